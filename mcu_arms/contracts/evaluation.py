"""The evaluation result: the MCU green agent's shape, plus everything needed to trust a number.

`results[].task_metrics[task]` keeps upstream's keys with upstream's meaning (max_score, sim_score = the raw reward
sum, score, the video criteria) so existing readers work; the extra keys say how each score was made (source,
normalised sim score, milestones with their steps, noops by cause, dropped keys, simulator fallbacks, video status
and rubric, latencies). An unscored task is never a silent 0: it is left out of `total_score` and
`total_max_score`, counted in `scored_tasks` and listed in `unscored_tasks`; `upstream_total_score` is the total as
MCU-AgentBeats computes it (every task, unscored ones as 0), to hold against an AgentBeats leaderboard.

On the wire the result is one A2A DataPart shaped as upstream's (`artifact_data`): the category result at the top,
where an AgentBeats client reads `results[0].total_score`, and the rest of ours under `mcu_arms`. Data parts carry
numbers as protobuf doubles, so integers arrive as floats; pydantic reads 3.0 as 3.
Versioned: a file of an older schema is migrated when read. Only pydantic here: light to import.

Whatever a purple sends, the record stays small: every per-cause counter keeps its top COUNTS_KEPT causes and sums
the rest under OTHER_CAUSES (the total is unchanged), every kept reason and message is bounded and neutralised.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field, field_validator, model_validator

from mcu_arms.contracts.errors import UserError, user_error
from mcu_arms.contracts.limits import MAX_EVALUATION_BYTES
from mcu_arms.contracts.reading import read_json
from mcu_arms.contracts.rubric import VideoRubric
from mcu_arms.contracts.shards import ShardInfo
from mcu_arms.contracts.states import EndedBy, InitFailure
from mcu_arms.contracts.text import MAX_MESSAGE_CHARS, MAX_REASON_CHARS, shown_text
from mcu_arms.contracts.wire import EvalConfig

EVALUATION_SCHEMA_VERSION = 2
# The key of the artifact's DataPart that holds everything of ours that is not the category result.
ARTIFACT_ENVELOPE_KEY = "mcu_arms"

# Reasons kept per noop cause: enough to diagnose, bounded for a 12,000-step episode.
FIRST_REASONS_KEPT = 5
# Causes kept by name in a per-cause counter of a result; the rest are summed under OTHER_CAUSES.
COUNTS_KEPT = 20
OTHER_CAUSES = "(other)"
# Distinct causes a counter tracks while it runs; later new ones count under OTHER_CAUSES at once.
COUNTS_TRACKED = 256


def top_counts(counts: dict[str, int]) -> dict[str, int]:
    """The COUNTS_KEPT largest counts by name, the rest summed under OTHER_CAUSES: the total is kept."""
    if len(counts) <= COUNTS_KEPT:
        return dict(counts)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[:COUNTS_KEPT])
    kept[OTHER_CAUSES] = kept.get(OTHER_CAUSES, 0) + sum(count for _, count in ranked[COUNTS_KEPT:])
    return kept


class CappedCounter(Counter[str]):
    """A Counter that tracks at most COUNTS_TRACKED distinct names: a purple inventing a new key every step grows
    OTHER_CAUSES, not the green's memory."""

    def add(self, names: Iterable[str], unnamed: int = 0) -> None:
        for name in names:
            if name in self or len(self) < COUNTS_TRACKED:
                self[name] += 1
            else:
                self[OTHER_CAUSES] += 1
        if unnamed:
            self[OTHER_CAUSES] += unnamed

    def kept(self) -> dict[str, int]:
        return dict(sorted(top_counts(self).items()))


# The video criteria averaged per category, as in the MCU green agent's result (task_progress is the score).
AVERAGED_CRITERIA: tuple[str, ...] = (
    "action_control",
    "error_recognition_and_correction",
    "creative_attempts",
    "task_completion_efficiency",
    "material_selection_and_usage",
)


class NoopCauseStats(BaseModel):
    count: int = 0
    first_reasons: list[str] = Field(default_factory=list)  # with the step each happened, e.g. "step 12: ..."

    def record(self, step: int, reason: str) -> None:
        self.count += 1
        if len(self.first_reasons) < FIRST_REASONS_KEPT:
            self.first_reasons.append(f"step {step}: {shown_text(reason, MAX_REASON_CHARS)}")


class LatencyStats(BaseModel):
    """Agent round-trip times over a task's steps, in milliseconds."""

    count: int = 0
    mean_ms: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    max_ms: float | None = None

    @classmethod
    def of(cls, samples_ms: list[float]) -> LatencyStats:
        if not samples_ms:
            return cls()
        ordered = sorted(samples_ms)
        return cls(
            count=len(ordered),
            mean_ms=round(statistics.fmean(ordered), 3),
            p50_ms=round(ordered[len(ordered) // 2], 3),
            p95_ms=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
            max_ms=round(ordered[-1], 3),
        )


class InitOutcome(BaseModel):
    """How the agent answered the init message. `ok` False is loud in the summary; the episode still runs."""

    ok: bool
    cause: InitFailure | None = None
    message: str = ""  # what the agent (or the transport) said: bounded and neutralised
    round_trip_ms: float | None = None

    @field_validator("message")
    @classmethod
    def _shown(cls, message: str) -> str:
        return shown_text(message, MAX_MESSAGE_CHARS)


class MilestoneResult(BaseModel):
    identity: str
    step: int | None  # the step whose action reached it (the observation's step number); None when never
    available: bool  # False: no analogue on this simulator, can never be reached here


class GradedFrames(BaseModel):
    """Which frames video evaluation graded: the simulator's recording of the render (what MCU grades: MineStudio's
    640x360 `episode_1.mp4`), or the observation frames at the agent's obs_size (PNGs the step log saved)."""

    source: Literal["render_recording", "observation_frames"]
    path: str  # the video file, or the folder of PNGs
    width: int
    height: int
    frames_in_episode: int
    frames_sent: int  # how many of them the grader was shown


class VideoResult(BaseModel):
    status: str
    reason: str = ""
    task_progress: float | None = None
    model: str | None = None
    rubric: VideoRubric = "mcu_arms"  # schema 1 had only ours
    graded_frames: GradedFrames | None = None  # None: nothing graded, or a result from before it was said
    recording_problem: str | None = None  # the simulator's recording could not be written (observation frames graded)


class SimulatorRestart(BaseModel):
    """The simulator instance was replaced before a task started, because the old one failed."""

    cause: Literal["crash", "timeout"]  # the engine died or broke its socket / it did not answer in time
    detail: str  # the error, as the simulator raised it
    failed_task: str  # the task during which the old instance failed
    failed_during: Literal["reset", "step"]
    failed_step: int | None = None  # the step that failed, when it was a step
    at: str  # when the new instance was asked for


class TaskMetrics(BaseModel):
    """One task's entry in `task_metrics`."""

    max_score: float
    sim_score: float = 0.0  # upstream's meaning: the raw sum of simulator rewards (cut_stone: 5.0, not 10.0)
    score: float | None  # None: unscored, not counted in the category total
    normalised_sim_score: float | None = None  # ours: the simulator's share scaled to max_score; None: video-only
    task_progress: float | None = None
    action_control: float | None = None
    error_recognition_and_correction: float | None = None
    creative_attempts: float | None = None
    task_completion_efficiency: float | None = None
    material_selection_and_usage: float | None = None
    category: str
    scoring_kind: str
    scored: bool
    score_source: str
    milestones: list[MilestoneResult] = Field(default_factory=list)
    milestones_available: int = 0
    milestones_total: int = 0
    sim_reward: float = 0.0
    max_reward: float = 0.0
    reward_events: list[dict[str, Any]] = Field(default_factory=list)
    steps_run: int = 0
    max_steps: int = 0
    ended_by: EndedBy = "max_steps"
    noops: dict[str, NoopCauseStats] = Field(default_factory=dict)
    noop_total: int = 0
    agent_reported_noops: NoopCauseStats | None = None  # the agent itself answered a noop and said why
    dropped_keys: dict[str, int] = Field(default_factory=dict)
    action_adjustments: dict[str, int] = Field(default_factory=dict)
    action_formats: dict[str, int] = Field(default_factory=dict)
    sim_fallbacks: dict[str, int] = Field(default_factory=dict)
    unavailable_entries: list[str] = Field(default_factory=list)
    unavailable_reasons: dict[str, str] = Field(default_factory=dict)  # identity -> why it can never pay here
    sim_restarts: list[SimulatorRestart] = Field(default_factory=list)  # instances replaced before this task ran
    init: InitOutcome | None = None
    video: VideoResult
    agent_latency: LatencyStats = Field(default_factory=LatencyStats)
    sim_step_ms_mean: float | None = None
    duration_s: float = 0.0
    started_at: str = ""
    finished_at: str = ""
    error: str | None = None  # the episode could not run to its end (e.g. the agent's card was unreachable)
    steps_log: str | None = None
    frames_dir: str | None = None
    # Infrastructure (the agent could not be reached or could not answer) apart from behaviour (what it answered).
    infrastructure_noops: int = 0  # steps whose noop cause is an infrastructure cause (contracts/states.py)
    longest_infrastructure_run: int = 0  # the most of those in a row
    agent_failures: dict[str, int] = Field(default_factory=dict)  # the agent's own failure causes (AgentFailure)
    no_effect_steps: int = 0  # steps where an input had no effect on this simulator (behaviour)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy has no rule for it
    @property
    def upstream_score(self) -> float:
        """The score as MCU-AgentBeats counts it: an unscored task (video-only without video, an episode error) is 0."""
        return self.score if self.score is not None else 0.0

    @field_validator("dropped_keys", "action_adjustments", "action_formats", "sim_fallbacks", "agent_failures")
    @classmethod
    def _bounded_counts(cls, counts: dict[str, int]) -> dict[str, int]:
        return top_counts(counts)

    @field_validator("error")
    @classmethod
    def _shown_error(cls, error: str | None) -> str | None:
        return shown_text(error, MAX_MESSAGE_CHARS) if error is not None else None


class SkippedTask(BaseModel):
    task: str
    reason: str  # e.g. which simulator the task needs


class CategoryResult(BaseModel):
    task_category: str
    num_tasks: int
    scored_tasks: int
    unscored_tasks: list[str] = Field(default_factory=list)
    skipped_tasks: list[SkippedTask] = Field(default_factory=list)
    total_max_score: float  # over scored tasks only
    total_score: float  # over scored tasks only
    avg_action_control: float | None = None
    avg_error_recognition_and_correction: float | None = None
    avg_creative_attempts: float | None = None
    avg_task_completion_efficiency: float | None = None
    avg_material_selection_and_usage: float | None = None
    note: str = ""
    task_metrics: dict[str, TaskMetrics]

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy has no rule for it
    @property
    def upstream_total_score(self) -> float:
        """The total as MCU-AgentBeats computes it: every task counted, unscored ones as 0."""
        return round(sum(m.upstream_score for m in self.task_metrics.values()), 3)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy has no rule for it
    @property
    def upstream_total_max_score(self) -> float:
        return round(sum(m.max_score for m in self.task_metrics.values()), 3)

    @classmethod
    def of(cls, category: str, metrics: dict[str, TaskMetrics], skipped: list[SkippedTask]) -> CategoryResult:
        scored = {name: m for name, m in metrics.items() if m.scored and m.score is not None}
        unscored = [name for name in metrics if name not in scored]
        averages: dict[str, float | None] = {}
        for criterion in AVERAGED_CRITERIA:
            values = [getattr(m, criterion) for m in metrics.values() if getattr(m, criterion) is not None]
            averages[f"avg_{criterion}"] = round(statistics.fmean(values), 3) if values else None
        notes = []
        if unscored:
            notes.append(
                f"{len(unscored)} of {len(metrics)} tasks unscored ({', '.join(unscored)}): left out of the totals, "
                "not counted as 0"
            )
        if skipped:
            notes.append(f"{len(skipped)} tasks skipped: not runnable on this simulator")
        return cls(
            task_category=category,
            num_tasks=len(metrics),
            scored_tasks=len(scored),
            unscored_tasks=unscored,
            skipped_tasks=skipped,
            total_max_score=round(sum(m.max_score for m in scored.values()), 3),
            total_score=round(sum(m.score for m in scored.values() if m.score is not None), 3),
            note="; ".join(notes),
            task_metrics=metrics,
            **averages,
        )


class SimulatorInfo(BaseModel):
    name: str
    version: str
    label: str
    reset_mode: str | None = None  # how each task was started (catalog.ResetMode); None in older results
    action_mode: str | None = None  # how actions were applied (catalog.ActionMode); None where it does not apply


class EvaluationResult(BaseModel):
    schema_version: int = EVALUATION_SCHEMA_VERSION
    participants: dict[str, str]
    results: list[CategoryResult]
    simulator: SimulatorInfo
    seed: int
    max_steps: int
    max_steps_note: str = ""
    config: EvalConfig
    ignored_config_keys: list[str] = Field(default_factory=list)  # names only: their values may be secrets
    video_rubric: VideoRubric = "mcu_arms"
    started_at: str
    finished_at: str
    duration_s: float
    output_dir: str
    shard: ShardInfo | None = None  # a sharded request's part of the category; None: the whole category

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Schema 1 called the normalised simulator score `sim_score`; upstream's sim_score is the raw reward sum."""
        if not isinstance(data, dict) or data.get("schema_version", 1) >= EVALUATION_SCHEMA_VERSION:
            return data
        data = {**data, "schema_version": EVALUATION_SCHEMA_VERSION}
        data["results"] = [_category_from_schema_1(category) for category in data.get("results") or []]
        return data

    def artifact_data(self) -> dict[str, Any]:
        """The result as upstream's green sends it: the category result at the top, ours under `mcu_arms`."""
        (category,) = self.results  # one evaluation request is one category
        envelope = self.model_dump(mode="json", exclude={"results"})
        return {**category.model_dump(mode="json"), ARTIFACT_ENVELOPE_KEY: envelope}


def _category_from_schema_1(category: Any) -> Any:
    if not isinstance(category, dict) or not isinstance(category.get("task_metrics"), dict):
        return category
    migrated = {}
    for name, metrics in category["task_metrics"].items():
        if isinstance(metrics, dict):
            metrics = {
                **metrics,
                "normalised_sim_score": metrics.get("sim_score"),
                "sim_score": metrics.get("sim_reward", 0.0),
            }
        migrated[name] = metrics
    return {**category, "task_metrics": migrated}


def evaluation_from_artifact(data: dict[str, Any]) -> EvaluationResult | None:
    """Our result from an artifact's data, in the DataPart shape or the older whole-result JSON text; None when the
    data is not ours (e.g. from upstream's green, which sends only the category result)."""
    if isinstance(data.get(ARTIFACT_ENVELOPE_KEY), dict):
        category = {key: value for key, value in data.items() if key != ARTIFACT_ENVELOPE_KEY}
        data = {**data[ARTIFACT_ENVELOPE_KEY], "results": [category]}
    elif not ("results" in data and "simulator" in data):
        return None
    try:
        return EvaluationResult.model_validate(data)
    except ValidationError:
        return None


def read_evaluation(path: Path) -> EvaluationResult:
    """The green's `evaluation.json` read as untrusted input (contracts/reading.py), or a UserError naming the file
    (and the key) when it is not one."""
    data = read_json(path, MAX_EVALUATION_BYTES, "evaluation")
    try:
        return EvaluationResult.model_validate(data)
    except ValidationError as error:
        problem = user_error(error, path=path)
        raise UserError(f"not an evaluation result: {problem.message}", path=path, key=problem.key) from None


def summary_text(result: EvaluationResult) -> str:
    """The human-readable block streamed with the result (the MCU green agent's "MCU Evaluation Result")."""
    lines = ["MCU Evaluation Result", f"Simulator: {result.simulator.label}"]
    for category in result.results:
        lines += [
            f"Category: {category.task_category}",
            f"Number of Tasks: {category.num_tasks} (scored: {category.scored_tasks})",
            f"Total Score: {category.total_score:.2f} / {category.total_max_score:.2f}",
            f"Total as MCU-AgentBeats counts it (unscored tasks as 0): {category.upstream_total_score:.2f} / "
            f"{category.upstream_total_max_score:.2f}",
        ]
        if category.note:
            lines.append(f"Note: {category.note}")
        lines += ["", "Task Results:"]
        for name, metrics in category.task_metrics.items():
            lines.append(f"Task '{name}': {_task_line(metrics)}")
        for skipped in category.skipped_tasks:
            lines.append(f"Task '{skipped.task}': skipped ({skipped.reason})")
    return "\n".join(lines)


def _task_line(metrics: TaskMetrics) -> str:
    score = "unscored" if metrics.score is None else f"{metrics.score:.2f} / {metrics.max_score:g}"
    parts = [f"{score} [{metrics.score_source}]", f"{metrics.steps_run} steps"]
    if metrics.milestones_total:
        reached = sum(1 for m in metrics.milestones if m.step is not None)
        what = "milestones" if metrics.scoring_kind == "milestones" else "rewards"
        parts.append(f"{what} reached {reached}/{metrics.milestones_total}")
    if metrics.noop_total:
        causes = ", ".join(f"{cause} {stats.count}" for cause, stats in metrics.noops.items())
        parts.append(f"noops {metrics.noop_total} ({causes})")
    for label, counts in (
        ("dropped", metrics.dropped_keys),
        ("adjusted", metrics.action_adjustments),
        ("simulator fallbacks", metrics.sim_fallbacks),
    ):
        if counts:
            parts.append(f"{label} " + ", ".join(f"{key} x{count}" for key, count in counts.items()))
    if metrics.unavailable_entries:
        parts.append("no analogue on this simulator: " + ", ".join(metrics.unavailable_entries))
    for restart in metrics.sim_restarts:
        where = f"step {restart.failed_step}" if restart.failed_step is not None else restart.failed_during
        parts.append(f"SIMULATOR RESTARTED first ({restart.cause} in {restart.failed_task} at {where})")
    if metrics.video.status == "ok":
        parts.append(f"video graded by the {metrics.video.rubric} rubric")
    elif metrics.video.status != "skipped_perfect":
        parts.append(f"video evaluation {metrics.video.status}")
    if metrics.init is not None and not metrics.init.ok:
        parts.append(f"INIT FAILED ({metrics.init.cause}: {metrics.init.message})")
    if metrics.error:
        parts.append(f"ERROR: {metrics.error}")
    return "; ".join(parts)
