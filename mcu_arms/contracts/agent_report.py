"""The purple agents' own reports, as every reader sees them.

A codex agent writes `<purple dir>/worldmodel_report.json` (prolong: `prolong_report.json`) after every turn; the
scripted player writes `scripted_report.json` as each episode closes; the planned agent writes `planned_report.json`
as it goes. `AgentSummary` is the one shape the run report, `status` and `compare` read, whichever kind wrote the
file: no reader guesses keys.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator, model_validator

from mcu_arms.contracts.errors import NESTED_TOO_DEEPLY, validation_summary
from mcu_arms.contracts.game_state import Capabilities
from mcu_arms.contracts.planned import PolicyBackend
from mcu_arms.contracts.redaction import scrub
from mcu_arms.contracts.settings import CODEX_UNBOUNDED_TOKENS, codex_compacts_at, compacts
from mcu_arms.contracts.states import TurnOutcome
from mcu_arms.contracts.text import MAX_REASON_CHARS, shown_text
from mcu_arms.contracts.timestamps import iso_seconds

AGENT_REPORT_SUFFIX = "_report.json"


# Schema 2: payload_bytes is the largest request body a turn sent (schema 1: prompt + frame + rollout, not a request
# size at all); turns carry their requests and token usage.
AGENT_REPORT_SCHEMA_VERSION = 2
EPISODE_REPORT_NAME = "agent_report.json"
# A codex episode's directory (`<purple dir>/task_NN/`): besides its report and the agent's own files (logs.txt,
# notes, memory/), one directory per model turn with what went in and came out, and the frames it was shown.
TURNS_DIR = "turns"
TURN_PROMPT_FILE = "prompt.md"
TURN_ACTIONS_FILE = "actions.json"
TURN_STDERR_FILE = "stderr.txt"
TURN_EVENTS_FILE = "events.jsonl"  # codex's own --json event stream
TURN_FRAMES_DIR = "frames"

# How a turn's payload_bytes was found: rebuilt from the thread's rollout (what codex re-sends, request by request);
# the prompt and the base64 frame only, when codex ran a thread but its rollout could not be read (a lower bound);
# or schema 1's prompt + frame + rollout size.
PayloadBasis = Literal["rollout", "lower_bound", "legacy"]
# Why a turn started a new thread although its session had turns left: codex no longer had the thread
# (`exec resume` failed), or the thread had reached the limit in force of an arm that does not compact.
ColdStart = Literal["session_lost", "window_full"]


class TokenUsage(BaseModel):
    """Tokens as codex counts them (`turn.completed.usage`, the rollout's usage records)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0

    def minus(self, earlier: TokenUsage) -> TokenUsage:
        return TokenUsage(**{key: value - getattr(earlier, key) for key, value in self})

    def plus(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(**{key: value + getattr(other, key) for key, value in self})


class CompactionInForce(BaseModel):
    """What decided compaction for a purple's turns, with codex's own clamps applied."""

    compact: bool
    limit: int  # as the plan states it
    context_window: int  # as the plan states it
    # the window codex used: the one it was told, clamped to its model's largest (None: no turn has run yet)
    codex_window: int | None
    codex_compacts_at: int | None  # the reported total_tokens at which codex compacts (None: not known before a turn)
    # Arms that do not compact: a thread whose last response reported this many tokens is dropped before codex could
    # compact it (the stated window, or codex's own cap when that is lower).
    cold_start_at: int | None

    @classmethod
    def of(cls, limit: int, context_window: int, codex_window: int | None) -> CompactionInForce:
        compact = compacts(limit, context_window)
        if compact:
            at: int | None = codex_compacts_at(limit, codex_window or context_window)
            return cls(
                compact=True,
                limit=limit,
                context_window=context_window,
                codex_window=codex_window,
                codex_compacts_at=at,
                cold_start_at=None,
            )
        at = codex_compacts_at(CODEX_UNBOUNDED_TOKENS, codex_window) if codex_window else None
        return cls(
            compact=False,
            limit=limit,
            context_window=context_window,
            codex_window=codex_window,
            codex_compacts_at=at,
            cold_start_at=min(context_window, at or context_window),
        )


class TurnRecord(BaseModel):
    """One model turn: what it cost and what came of it."""

    turn: int
    step: int
    session: int
    thread_id: str | None
    resumed: bool
    outcome: TurnOutcome
    rc: int | None
    reason: str | None = None
    latency_s: float
    prompt_bytes: int
    frame_bytes: int
    rollout_bytes_before: int
    rollout_bytes_after: int
    payload_bytes: int = Field(description="the largest request body the turn sent to the model (see payload_basis)")
    frames_in_session: int
    actions_queued: int
    compactions_in_thread: int
    payload_basis: PayloadBasis = "rollout"
    requests: int | None = None  # model requests the turn sent, compaction requests included
    compaction_requests: int | None = None
    request_bytes: int | None = None  # every request body of the turn together
    usage: TokenUsage | None = None  # this turn's own tokens: the difference of the thread's running totals
    thread_usage: TokenUsage | None = None  # the thread's running total, as turn.completed reports it
    last_total_tokens: int | None = None  # total_tokens of the thread's last response: what codex holds to its limit
    cold_start: ColdStart | None = None


def turn_dir_name(turn: int) -> str:
    return f"turn_{turn:04d}"


def turn_frame_name(step: int) -> str:
    """The frame attached to the turn taken at `step`, in the episode's TURN_FRAMES_DIR."""
    return f"step_{step}.png"


def turn_at_step(records: list[TurnRecord], step: int) -> TurnRecord | None:
    """The turn whose plan the agent was following at `step`: the latest turn taken at or before it.

    A turn is taken when the queue of planned actions runs dry, at the step whose observation it answers; the
    actions it queued are replayed on the steps after it until the next turn. A failed turn is the one in force for
    the noop it caused.
    """
    taken = [record for record in records if record.step <= step]
    return max(taken, key=lambda record: (record.step, record.turn)) if taken else None


class CodexItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None


class CodexEvent(BaseModel):
    """One line of codex's --json event stream, as far as a reader of answers needs it."""

    model_config = ConfigDict(extra="ignore")

    type: str
    item: CodexItem | None = None


def agent_messages(events_path: Path) -> list[str]:
    """The messages the model wrote in one turn (codex's completed `agent_message` items), in order.

    Lines that are not events (a torn tail, codex's own noise) are skipped: the turn's outcome is in its TurnRecord.
    """
    try:
        lines = events_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    messages = []
    for line in lines:
        try:
            event = CodexEvent.model_validate_json(line)
        except ValidationError:
            continue
        if event.type == "item.completed" and event.item and event.item.type == "agent_message" and event.item.text:
            messages.append(event.item.text)
    return messages


class EpisodeReport(BaseModel):
    """One episode's counters; the output directory's report sums these."""

    task_dir: str
    task: str
    started_at: str
    observations: int = 0
    actions_replayed: int = 0
    noops: Counter[str] = Field(default_factory=Counter)
    turns: int = 0
    failed_turns_by_rc: Counter[str] = Field(default_factory=Counter)
    failed_turns_by_reason: Counter[str] = Field(default_factory=Counter)
    sessions_started: int = 0
    sessions_completed: int = 0
    sessions_discarded: int = 0
    compactions: int = 0
    overflow_resets: int = 0
    actions_truncated: int = 0
    camera_compensated: int = 0
    leftover_processes_stopped: int = 0  # still running in a turn's group after codex exited
    sessions_lost: int = 0  # `exec resume` failed: codex no longer had the thread (a cold start followed)
    window_full_resets: int = 0  # a no-compaction arm's thread reached its limit: dropped before codex compacted it
    unwanted_compactions: int = 0  # codex compacted a no-compaction arm's thread mid-turn (its cap cannot be lifted)
    codex_window: int | None = None  # the window codex used, read from the rollout (its clamp applied)
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    warnings: list[str] = Field(default_factory=list)
    turn_records: list[TurnRecord] = Field(default_factory=list)


class AgentSettings(BaseModel):
    """What was in force for every episode of this purple process."""

    kind: str
    session_turns: int
    compact_limit: int | None
    step_timeout: float
    turn_timeout: float
    model: str | None
    provider_base_url: str | None
    provider_wire_api: str | None
    provider_env_key: str | None = None
    camera_quantised: bool
    codex_executable: str
    codex_version: str
    codex_home: str
    codex_home_audit: dict[str, bool | str]
    context_window: int | None = None
    codex_overrides: list[str] = Field(default_factory=list)  # the `-c` settings every turn carries
    provider_config: str | None = None  # the 0600 config file that carries the provider to codex

    @field_validator("provider_base_url")
    @classmethod
    def _no_secret_in_url(cls, url: str | None) -> str | None:
        """A report keeps the provider URL as it may be shown: user:pass@ and key parameters masked."""
        return scrub(url) if url else url


class LatencySummary(BaseModel):
    turns: int
    median_s: float | None
    p90_s: float | None
    max_s: float | None
    max_payload_bytes: int | None


class AgentReport(BaseModel):
    schema_version: int = AGENT_REPORT_SCHEMA_VERSION
    kind: str
    written_at: str
    settings: AgentSettings
    turns: int
    failed_turns: int
    failed_turns_by_rc: dict[str, int]
    failed_turns_by_reason: dict[str, int]
    sessions_started: int
    sessions_completed: int
    sessions_discarded: int
    compactions: int
    overflow_resets: int
    leftover_processes_stopped: int = 0
    sessions_lost: int = 0
    window_full_resets: int = 0
    unwanted_compactions: int = 0
    compaction_limit: int | None
    compaction_in_force: CompactionInForce | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    noops: dict[str, int]
    latency: LatencySummary
    warnings: list[str]
    episodes: list[EpisodeReport]

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Read a schema-1 report as schema 2: its payload_bytes stay as written, marked as the old sum."""
        if not isinstance(data, dict) or data.get("schema_version", 1) >= AGENT_REPORT_SCHEMA_VERSION:
            return data
        data = {**data, "schema_version": AGENT_REPORT_SCHEMA_VERSION}
        episodes = data.get("episodes")
        if isinstance(episodes, list):
            data["episodes"] = [_legacy_payloads(episode) for episode in episodes]
        return data


def _legacy_payloads(episode: Any) -> Any:
    if not isinstance(episode, dict) or not isinstance(episode.get("turn_records"), list):
        return episode
    records = [
        {**record, "payload_basis": "legacy"} if isinstance(record, dict) else record
        for record in episode["turn_records"]
    ]
    return {**episode, "turn_records": records}


def report_name(kind: str) -> str:
    return f"{kind}{AGENT_REPORT_SUFFIX}"


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summarise(settings: AgentSettings, episodes: list[EpisodeReport]) -> AgentReport:
    """The output directory's report: settings, totals over its episodes, and the episodes themselves."""
    by_rc: Counter[str] = Counter()
    by_reason: Counter[str] = Counter()
    noops: Counter[str] = Counter()
    for episode in episodes:
        by_rc.update(episode.failed_turns_by_rc)
        by_reason.update(episode.failed_turns_by_reason)
        noops.update(episode.noops)
    records = [record for episode in episodes for record in episode.turn_records]
    latencies = [record.latency_s for record in records]
    tokens = TokenUsage()
    for episode in episodes:
        tokens = tokens.plus(episode.tokens)
    codex_window = next((e.codex_window for e in reversed(episodes) if e.codex_window is not None), None)
    in_force = None
    if settings.compact_limit is not None and settings.context_window is not None:
        in_force = CompactionInForce.of(settings.compact_limit, settings.context_window, codex_window)
    return AgentReport(
        kind=settings.kind,
        written_at=iso_seconds(),
        settings=settings,
        turns=sum(episode.turns for episode in episodes),
        failed_turns=sum(by_rc.values()),
        failed_turns_by_rc=dict(by_rc),
        failed_turns_by_reason=dict(by_reason),
        sessions_started=sum(episode.sessions_started for episode in episodes),
        sessions_completed=sum(episode.sessions_completed for episode in episodes),
        sessions_discarded=sum(episode.sessions_discarded for episode in episodes),
        compactions=sum(episode.compactions for episode in episodes),
        overflow_resets=sum(episode.overflow_resets for episode in episodes),
        leftover_processes_stopped=sum(episode.leftover_processes_stopped for episode in episodes),
        sessions_lost=sum(episode.sessions_lost for episode in episodes),
        window_full_resets=sum(episode.window_full_resets for episode in episodes),
        unwanted_compactions=sum(episode.unwanted_compactions for episode in episodes),
        compaction_limit=settings.compact_limit,
        compaction_in_force=in_force,
        tokens=tokens,
        noops=dict(noops),
        latency=LatencySummary(
            turns=len(latencies),
            median_s=statistics.median(latencies) if latencies else None,
            p90_s=_percentile(latencies, 0.9) if latencies else None,
            max_s=max(latencies) if latencies else None,
            max_payload_bytes=max((record.payload_bytes for record in records), default=None),
        ),
        warnings=[f"{Path(e.task_dir).name}: {warning}" for e in episodes for warning in e.warnings],
        episodes=episodes,
    )


class ScriptedEpisode(BaseModel):
    task: str
    observations: int
    stats: dict[str, int]


class ScriptedReport(BaseModel):
    """`scripted_report.json`: what the player noticed about itself (lost its place, respawned, slept exposed)."""

    kind: str = "scripted"
    seed: int
    stats: dict[str, int]
    episodes: list[ScriptedEpisode]


class PlannedSettings(BaseModel):
    """The planned agent's models, as in force (the key variables by name, never their values)."""

    planner_base_url: str
    planner_model: str
    planner_revision: str | None
    planner_env_key: str | None
    planner_timeout: float
    planner_thinking: bool | None = None  # None: nothing sent, the server's default
    policy_backend: PolicyBackend
    policy_base_url: str
    policy_model: str
    policy_revision: str | None
    policy_env_key: str | None
    policy_timeout: float
    policy_thinking: bool | None = None
    policy_served: str | None = None  # what the decision service said it runs (its /v1/models `run`)

    @field_serializer("planner_base_url", "policy_base_url")
    def _no_secret_in_url(self, url: str) -> str:
        """A report keeps an endpoint as it may be shown (user:pass@ and key parameters masked); the agent itself
        calls the URL as given."""
        return scrub(url)


class PlannedEpisode(BaseModel):
    """One episode of the planned agent: how often each model was asked, what it answered, what the reflex did."""

    task_dir: str
    task: str
    started_at: str
    trajectory: str  # relative to the purple dir
    world_seed: int | None = None  # as the green said it (the trajectory's world_seed)
    world_seed_unknown: str | None = None  # why world_seed is None
    observations: int = 0
    actions: int = 0  # high-level actions run (one trajectory line each)
    decisions: int = 0  # decision points: candidates offered and one chosen
    policy_calls: int = 0
    fallbacks: int = 0  # decisions taken by the executor's own first choice (invalid, late or failed policy)
    planner_calls: int = 0
    plans_accepted: int = 0
    replans_accepted: int = 0
    stale_replans: int = 0  # re-plans that arrived after their step had passed: discarded
    invalid_outputs: Counter[str] = Field(default_factory=Counter)  # by kind (contracts/planned.py InvalidOutput)
    invalid_reasons: Counter[str] = Field(default_factory=Counter)  # "kind: reason", for reading what went wrong
    model_failures: Counter[str] = Field(default_factory=Counter)  # by cause (contracts/planned.py ModelFailure)
    action_statuses: Counter[str] = Field(default_factory=Counter)
    reflex_interrupts: int = 0
    reflex_latency_ms_max: float | None = None
    planner_latency_ms: list[float] = Field(default_factory=list)
    decision_latency_ms: list[float] = Field(default_factory=list)
    capabilities: Capabilities | None = None
    warnings: list[str] = Field(default_factory=list)


class PlannedReport(BaseModel):
    schema_version: int = AGENT_REPORT_SCHEMA_VERSION
    kind: str = "planned"
    written_at: str
    settings: PlannedSettings
    decisions: int
    policy_calls: int
    fallbacks: int
    planner_calls: int
    stale_replans: int
    invalid_outputs: dict[str, int]
    model_failures: dict[str, int]
    reflex_interrupts: int
    median_planner_ms: float | None
    median_decision_ms: float | None
    warnings: list[str]
    episodes: list[PlannedEpisode]


def summarise_planned(settings: PlannedSettings, episodes: list[PlannedEpisode]) -> PlannedReport:
    invalid: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for episode in episodes:
        invalid.update(episode.invalid_outputs)
        failures.update(episode.model_failures)
    planner_ms = [ms for episode in episodes for ms in episode.planner_latency_ms]
    decision_ms = [ms for episode in episodes for ms in episode.decision_latency_ms]
    return PlannedReport(
        written_at=iso_seconds(),
        settings=settings,
        decisions=sum(episode.decisions for episode in episodes),
        policy_calls=sum(episode.policy_calls for episode in episodes),
        fallbacks=sum(episode.fallbacks for episode in episodes),
        planner_calls=sum(episode.planner_calls for episode in episodes),
        stale_replans=sum(episode.stale_replans for episode in episodes),
        invalid_outputs=dict(invalid),
        model_failures=dict(failures),
        reflex_interrupts=sum(episode.reflex_interrupts for episode in episodes),
        median_planner_ms=statistics.median(planner_ms) if planner_ms else None,
        median_decision_ms=statistics.median(decision_ms) if decision_ms else None,
        warnings=[f"{Path(e.task_dir).name}: {warning}" for e in episodes for warning in e.warnings],
        episodes=episodes,
    )


class AgentSummary(BaseModel):
    """What the run report keeps of an agent's own report: its counters, typed, whatever the agent's kind.

    None means "this agent does not report it", never zero.
    """

    kind: str
    report_file: str
    turns: int | None = None
    failed_turns: int | None = None
    failed_turns_by_reason: dict[str, int] = Field(default_factory=dict)
    # The commonest reasons a turn failed, in the agent's own words (bounded, neutralised), most frequent first:
    # "503 Service Unavailable: model overloaded" says more than "failed_turn 40".
    top_failure_reasons: dict[str, int] = Field(default_factory=dict)
    compactions: int | None = None
    overflow_resets: int | None = None
    sessions_lost: int | None = None
    window_full_resets: int | None = None
    compaction_limit: int | None = None
    codex_compacts_at: int | None = None  # the limit codex applied (its clamps included), when the agent knows it
    max_payload_bytes: int | None = None
    median_turn_s: float | None = None
    tokens: TokenUsage | None = None
    decisions: int | None = None  # the planned agent's decision points
    invalid_outputs: int | None = None  # model answers rejected (plans, re-plans, decisions)
    invalid_outputs_by_kind: dict[str, int] = Field(default_factory=dict)
    stale_replans: int | None = None
    reflex_interrupts: int | None = None
    median_planner_ms: float | None = None
    median_decision_ms: float | None = None
    counters: dict[str, int] = Field(default_factory=dict)  # kind-specific (e.g. the scripted player's respawns)
    warnings: list[str] = Field(default_factory=list)


TOP_FAILURE_REASONS = 3


def top_reasons(reasons: Iterable[str | None], most: int = TOP_FAILURE_REASONS) -> dict[str, int]:
    """The `most` commonest reasons, each as it may be shown (bounded, control characters made visible)."""
    counted = Counter(shown_text(reason, MAX_REASON_CHARS) for reason in reasons if reason)
    return dict(counted.most_common(most))


def in_its_words(reasons: dict[str, int]) -> str:
    """`; the agent said: 40x "503 Service Unavailable: model overloaded"`, or "" when it reported none."""
    if not reasons:
        return ""
    return "; the agent said: " + ", ".join(f'{count}x "{reason}"' for reason, count in reasons.items())


def summary_of_codex(report: AgentReport, report_file: str) -> AgentSummary:
    failed = (record.reason for episode in report.episodes for record in episode.turn_records if record.outcome != "ok")
    return AgentSummary(
        top_failure_reasons=top_reasons(failed),
        kind=report.kind,
        report_file=report_file,
        turns=report.turns,
        failed_turns=report.failed_turns,
        failed_turns_by_reason=dict(report.failed_turns_by_reason),
        compactions=report.compactions,
        overflow_resets=report.overflow_resets,
        sessions_lost=report.sessions_lost,
        window_full_resets=report.window_full_resets,
        compaction_limit=report.compaction_limit,
        codex_compacts_at=report.compaction_in_force.codex_compacts_at if report.compaction_in_force else None,
        max_payload_bytes=report.latency.max_payload_bytes,
        median_turn_s=report.latency.median_s,
        tokens=report.tokens,
        warnings=list(report.warnings),
    )


def summary_of_scripted(report: ScriptedReport, report_file: str) -> AgentSummary:
    return AgentSummary(kind=report.kind, report_file=report_file, counters=dict(report.stats))


def summary_of_planned(report: PlannedReport, report_file: str) -> AgentSummary:
    """Model calls count as turns: planner calls plus policy calls; a failed one brought no answer at all."""
    return AgentSummary(
        kind=report.kind,
        report_file=report_file,
        turns=report.planner_calls + report.policy_calls,
        failed_turns=sum(report.model_failures.values()),
        failed_turns_by_reason=dict(report.model_failures),
        decisions=report.decisions,
        invalid_outputs=sum(report.invalid_outputs.values()),
        invalid_outputs_by_kind=dict(report.invalid_outputs),
        stale_replans=report.stale_replans,
        reflex_interrupts=report.reflex_interrupts,
        median_planner_ms=report.median_planner_ms,
        median_decision_ms=report.median_decision_ms,
        counters={"fallbacks": report.fallbacks, "policy_calls": report.policy_calls},
        warnings=list(report.warnings),
    )


REPORT_MODELS: dict[str | None, type[ScriptedReport] | type[PlannedReport]] = {
    "scripted": ScriptedReport,
    "planned": PlannedReport,
}


def read_agent_report(path: Path) -> AgentReport | ScriptedReport | PlannedReport:
    """A purple report file as its typed model; ValueError naming the file when it is none of them."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"purple report {path} cannot be read: {error}") from None
    except RecursionError:
        raise ValueError(f"purple report {path} cannot be read: {NESTED_TOO_DEEPLY}") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    model = REPORT_MODELS.get(kind, AgentReport)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ValueError(
            f"purple report {path} is not a {model.__name__} ({validation_summary(error, limit=1)})"
        ) from None


def read_episode_report(path: Path) -> EpisodeReport:
    """One episode's `agent_report.json`; ValueError naming the file when it is not one."""
    try:
        return EpisodeReport.model_validate_json(path.read_bytes())
    except OSError as error:
        raise ValueError(f"episode report {path} cannot be read: {error.strerror or error}") from None
    except ValidationError as error:
        problem = validation_summary(error, limit=1)
        raise ValueError(f"episode report {path} is not an EpisodeReport ({problem})") from None


def agent_summary(path: Path) -> AgentSummary:
    report = read_agent_report(path)
    if isinstance(report, ScriptedReport):
        return summary_of_scripted(report, path.name)
    if isinstance(report, PlannedReport):
        return summary_of_planned(report, path.name)
    return summary_of_codex(report, path.name)
