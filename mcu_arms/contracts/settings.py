"""The settings in force for an arm, its plan, and the purple agent's options: what `plan` decides, `run` starts,
and every report records.

`Settings` holds everything that can change a result; its fingerprint says "these two runs are the same
experiment". `PurpleOptions` is what a purple server receives, and it writes its own command line, so that a setting
crosses from the plan to the purple process in one place. Every default below is stated once, here.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from mcu_arms.contracts.addresses import http_url, is_loopback
from mcu_arms.contracts.agents import option_fields
from mcu_arms.contracts.catalog import ActionMode, ResetMode
from mcu_arms.contracts.game_state import DEFAULT_OBSERVE, ObserveMode
from mcu_arms.contracts.planned import (
    DEFAULT_PLANNER_TIMEOUT_S,
    DEFAULT_POLICY_BACKEND,
    DEFAULT_POLICY_TIMEOUT_S,
    POLICY_BACKENDS,
    PolicyBackend,
)
from mcu_arms.contracts.redaction import redact_env, scrub
from mcu_arms.contracts.rubric import rubric_of
from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.contracts.slurm import DEFAULT_EXECUTOR, Executor, SlurmOptions
from mcu_arms.contracts.states import ProcessRole
from mcu_arms.contracts.wire import (
    DEFAULT_OBS_ENCODING,
    DEFAULT_OBS_SIZE,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_VIDEO_MODEL,
    ObsEncoding,
)

TableModel = TypeVar("TableModel", bound=BaseModel)
# v2: the seed is the replicate axis, not part of what makes two runs the same experiment.
FINGERPRINT_VERSION = "v2"
DEFAULT_CONTEXT_WINDOW = 258_000
# A planning turn carries the frame; measured: a constant ~0.48 MB at one turn per session, ~0.4 MB more per
# resumed turn, and a flat ~600 s per turn once a request passes ~5.15-6.15 MB (with no error in any log).
FIRST_TURN_PAYLOAD_BYTES = 480_000
PAYLOAD_GROWTH_BYTES = 400_000
PAYLOAD_WALL_BYTES = 5_150_000
COMPACT_FRACTION = 0.8
NO_COMPACT_FACTOR = 2
# codex compacts once a response reports total_tokens >= min(its limit, 90 % of its window), and it clamps the window
# it is told to the model's largest (measured with codex-cli 0.171: 872,000 for gpt-6.2-sol, 272,000 for a model name
# it does not know), so compaction cannot be switched off: a no-compaction arm tells it this for both, which leaves
# only that clamp in force.
CODEX_COMPACT_PERCENT = 90
CODEX_UNBOUNDED_TOKENS = 10**15
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Options that can carry a secret (a provider URL with user:pass@ or ?api_key=) reach the purple through its
# environment, never its command line, which every local user can read in `ps`.
OPTIONS_FROM_ENVIRONMENT: dict[str, str] = {
    "provider_base_url": "MCU_ARMS_PROVIDER_BASE_URL",
    "planner_base_url": "MCU_ARMS_PLANNER_BASE_URL",
    "policy_base_url": "MCU_ARMS_POLICY_BASE_URL",
}


def expected_payload_bytes(session_turns: int) -> int:
    """The request size of a session's last turn: the frame-carrying first turn plus what each resumed turn adds."""
    return FIRST_TURN_PAYLOAD_BYTES + PAYLOAD_GROWTH_BYTES * (session_turns - 1)


def default_compact_limit(compact: bool, context_window: int) -> int:
    """The limit when the arm file sets none: below the window to compact, above it so a full conversation overflows."""
    return int(context_window * COMPACT_FRACTION) if compact else context_window * NO_COMPACT_FACTOR


def codex_compacts_at(limit: int, window: int) -> int:
    """The reported total_tokens at which codex compacts, told this limit and (after its own clamp) this window."""
    return min(limit, window * CODEX_COMPACT_PERCENT // 100)


def compacts(compact_limit: int, context_window: int) -> bool:
    """The arm compacts when its limit is below its window (arms/spec.py holds every arm to exactly this)."""
    return compact_limit < context_window


class Thresholds(BaseModel):
    """When infrastructure trouble fails an arm. Agent behaviour (invalid or no-effect actions, deaths) never does:
    it is counted and shown. Supervision policy, not a result: left out of the fingerprint."""

    model_config = ConfigDict(extra="forbid")

    infrastructure_share: float = Field(default=0.05, ge=0.0, le=1.0)  # of a task's steps
    infrastructure_in_a_row: int = Field(default=20, ge=1)
    init_must_succeed: bool = True
    task_error_fails: bool = True
    min_steps_for_share: int = Field(default=100, ge=1)  # while running, the share is judged after this many steps


class Overrides(BaseModel):
    """CLI overrides, mirroring run-arm.sh's flags. None means "as the file says"."""

    task: str | None = None
    seeds: list[int] | None = Field(default=None, min_length=1)
    steps: int | None = Field(default=None, gt=0)
    model_config = ConfigDict(allow_inf_nan=False)

    step_timeout: float | None = Field(default=None, gt=0)
    session_turns: int | None = None
    compact: bool | None = None
    green_port: int | None = None
    purple_port: int | None = None

    def given(self) -> dict[str, Any]:
        return {key: value for key, value in self.model_dump().items() if value is not None}


# The arm-file key each CLI override (an Overrides field, flag --field-name) sets.
OVERRIDDEN_KEYS: dict[str, str] = {
    "task": "task",
    "seeds": "seeds",
    "steps": "steps",
    "step_timeout": "step_timeout",
    "session_turns": "session_turns",
    "compact": "compact",
    "green_port": "ports.green",
    "purple_port": "ports.purple",
}


def flag_for(field: str) -> str:
    """The command-line flag of an options field: `step_timeout` -> `--step-timeout`."""
    return "--" + field.replace("_", "-")


# Settings that change no observation, action or score, only what is kept for watching a run afterwards: recorded
# in every report (its settings), never a difference between arms, never in the fingerprint.
RECORDED_ONLY_KEYS: frozenset[str] = frozenset({"save_frames"})
# Settings that vary between the replicates of one arm, or say only where it runs or what is kept: never a difference
# between arms. (Which Minecraft server a mineflayer arm plays on is placement too; its version is not, and the
# result's simulator label names the server.) Where another program's purple runs from and how long it may take to
# start are placement too: its code identity (purple_code) says what it runs.
REPLICATE_AND_PLACEMENT_KEYS: frozenset[str] = (
    frozenset(
        {
            "seed",
            "cuda_device",
            "mineflayer_host",
            "mineflayer_port",
            "mineflayer_username",
            "mineflayer_chat",
            "purple_cwd",
            "purple_ready_timeout",
        }
    )
    | RECORDED_ONLY_KEYS
)
# save_frames was hashed into v2 fingerprints before it left them; held at its default there, every run that kept
# the default keeps its fingerprint (and a run that saved no frames matches the same arm saving them).
SAVE_FRAMES_AS_HASHED = True
# What an A2A purple's command may hold, filled when it is started; without any of them, AgentBeats' contract
# (--host H --port P --card-url URL) is appended instead.
PURPLE_PLACEHOLDERS: tuple[str, ...] = ("{host}", "{port}", "{card_url}")
# What plan, run and the report say of a purple reached at its url.
NOT_OWNED = "not started by mcu-arms: not isolated, not owned"


# What a simulator option may be: a JSON scalar, as TOML and the evaluation request carry it.
SimulatorOption = str | int | float | bool | None


class Settings(BaseModel):
    """The values in force for one arm; everything that can change a result is here."""

    agent: str
    task: str
    tasks: list[str] | None
    simulator: str
    seed: int
    steps: int
    step_timeout: float
    session_turns: int
    compact: bool
    compact_limit: int
    context_window: int
    model: str | None
    provider_base_url: str | None
    provider_wire_api: str | None
    provider_env_key: str | None = None
    video_eval: bool
    video_model: str = DEFAULT_VIDEO_MODEL  # reports written before it was a setting read as the model then used
    auto_eval_dir: str | None = None  # MCU's video rubric from this checkout; None: ours
    save_frames: bool
    obs_size: tuple[int, int] = DEFAULT_OBS_SIZE  # (width, height) of the frames the agent is sent
    obs_encoding: ObsEncoding = DEFAULT_OBS_ENCODING
    env: dict[str, str]
    cuda_device: str | None
    reset_mode: ResetMode | None = None  # minestudio arms only; older plans read as unset
    action_mode: ActionMode | None = None  # minestudio arms only; older plans (which ran env mode) read as unset
    steve1_condition: str | None = None  # steve1 arms only: the text STEVE-1 is conditioned on instead of the task's
    observe: ObserveMode = DEFAULT_OBSERVE
    # The planned agent's models ([planner] and [policy] in the arm file); None for every other agent.
    planner_base_url: str | None = None
    planner_model: str | None = None
    planner_revision: str | None = None
    planner_env_key: str | None = None
    planner_timeout: float | None = None
    planner_thinking: bool | None = None
    policy_backend: PolicyBackend | None = None
    policy_base_url: str | None = None
    policy_model: str | None = None
    policy_revision: str | None = None
    policy_env_key: str | None = None
    policy_timeout: float | None = None
    policy_thinking: bool | None = None
    # The Minecraft server of a mineflayer arm ([mineflayer] in the arm file); None for every other simulator.
    mineflayer_host: str | None = None
    mineflayer_port: int | None = None
    mineflayer_version: str | None = None
    mineflayer_username: str | None = None
    mineflayer_chat: bool | None = None  # for watching a run: placement, never a difference
    # A registered simulator's own table (its descriptor's `table`, validated by its `table_model`) when that table is
    # no arm-file field of ours: a third party's simulator options; None for the built-in simulators.
    simulator_options: dict[str, SimulatorOption] | None = None
    # The agent's own options table ([agent_options], validated by its descriptor's table); None: it has none.
    agent_options: dict[str, SimulatorOption] | None = None
    # Another program's A2A purple (agent "a2a", [purple] in the arm file): the command that starts it (as written,
    # placeholders unfilled) or the address it is reached at; its code identity ("git COMMIT", "git COMMIT dirty
    # HASH" or "files HASH"); where it is started from, and how long it may take to serve its card.
    purple_command: list[str] | None = None
    purple_url: str | None = None
    purple_code: str | None = None
    purple_cwd: str | None = None
    purple_ready_timeout: float | None = None

    def redacted(self) -> Settings:
        """These settings as saved and shown: secrets in environment values and the endpoint URLs masked."""
        values = self.model_dump(include=set(OPTIONS_FROM_ENVIRONMENT))
        urls = {field: scrub(url) for field, url in values.items() if url}
        return self.model_copy(update={"env": redact_env(self.env), **urls})

    def fingerprinted(self) -> dict[str, Any]:
        """What the fingerprint covers: every setting except where things run (cuda_device picks a device), the
        seed (the replicate axis: runs of one arm with different seeds are replicates of one experiment) and what is
        only kept for watching (save_frames: the agent sees the same either way).

        Unset (None) settings are left out (empty simulator options too), and so are the observation settings at
        their defaults, so a setting added later does not change existing fingerprints. The auto_eval checkout counts
        as the rubric it selects, not as a path. A MineStudio arm's action_mode is left out when it is "env", the
        mode every MineStudio result before the setting ran in: such a result keeps its fingerprint and matches an arm
        that asks for env mode, while an arm at the new default ("agent") gets a new fingerprint, because it plays a
        different game.
        """
        data = {key: value for key, value in self.model_dump().items() if value is not None}
        for table in ("simulator_options", "agent_options"):
            if not data.get(table):
                data.pop(table, None)
        for key in REPLICATE_AND_PLACEMENT_KEYS:
            data.pop(key, None)
        if data.pop("auto_eval_dir", None) is not None:
            data["video_rubric"] = rubric_of(self.auto_eval_dir)
        data["save_frames"] = SAVE_FRAMES_AS_HASHED
        if data.get("action_mode") == "env":
            data.pop("action_mode")
        for key, default in (
            ("obs_size", DEFAULT_OBS_SIZE),
            ("obs_encoding", DEFAULT_OBS_ENCODING),
            ("observe", DEFAULT_OBSERVE),
        ):
            if data.get(key) == default:
                data.pop(key)
        return data


def flat_settings(settings: Settings) -> dict[str, Any]:
    """Settings as rows: env entries one by one (so that a verdict can say "differs only in env.X")."""
    data = settings.model_dump()
    environment = data.pop("env")
    for name, value in sorted(environment.items()):
        data[f"env.{name}"] = value
    for table in ("simulator_options", "agent_options"):
        for name, value in sorted((data.pop(table) or {}).items()):
            data[f"{table}.{name}"] = value
    return data


# Settings that name one model (or one agent) together: when the leader differs, the rest of its group differs with
# it, as one change (another program's purple is its command or address and its code).
MODEL_GROUPS: dict[str, tuple[str, ...]] = {
    "planner_model": ("planner_base_url", "planner_revision", "planner_env_key"),
    "policy_model": ("policy_backend", "policy_base_url", "policy_revision", "policy_env_key"),
    "agent": ("purple_command", "purple_url", "purple_code"),
}


def differing_keys(settings: list[Settings]) -> set[str]:
    """Every flat setting whose value is not the same for all of `settings`."""
    flats = [flat_settings(each) for each in settings]
    keys = {key for flat in flats for key in flat}
    return {key for key in keys if any(flat.get(key) != flats[0].get(key) for flat in flats)}


def compact_limit_follows(settings: list[Settings], differing: set[str]) -> str | None:
    """The setting a differing compaction limit is part of, so that one change is not counted twice.

    Turning compaction on moves the limit below the window: that is what `compact` means, not a second change. A
    limit left at its default also moves with `context_window`; one set by hand differs on its own.
    """
    if "compact_limit" not in differing:
        return None
    if "compact" in differing:
        return "compact"
    defaults = all(each.compact_limit == default_compact_limit(each.compact, each.context_window) for each in settings)
    return "context_window" if defaults and "context_window" in differing else None


def setting_follows(key: str, settings: list[Settings], differing: set[str]) -> str | None:
    """The setting a differing one is part of, so that one change is not counted twice: a compaction limit that moves
    with `compact` or `context_window`, a model's endpoint, revision and key variable when the model itself differs."""
    if key == "compact_limit":
        return compact_limit_follows(settings, differing)
    leader = next((model for model, group in MODEL_GROUPS.items() if key in group), None)
    return leader if leader in differing else None


def differing_settings(settings: list[Settings]) -> list[str]:
    """What makes these runs different experiments, sorted: every differing setting but the replicate axis and
    placement, and those that only follow another setting."""
    differing = differing_keys(settings)
    counted = differing - REPLICATE_AND_PLACEMENT_KEYS
    return sorted(key for key in counted if setting_follows(key, settings, differing) is None)


def fingerprint(settings: Settings) -> str:
    """A versioned hash of what changes results. Name, ports and paths are left out on purpose."""
    canonical = json.dumps(settings.fingerprinted(), sort_keys=True, separators=(",", ":"))
    return f"{FINGERPRINT_VERSION}:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"


class PurpleOptions(BaseModel):
    """Everything a purple server passes to its policies. Baselines and STEVE-1 read `seed` (scripted also
    `output_dir`, for its report; STEVE-1 also `cuda_device` and `steve1_condition`); codex agents read the model and
    provider; the planned agent its planner_* and policy_*."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # Each field is a `serve purple` flag (flag_for), its description the flag's help (cli/serve.py builds them).
    seed: int = Field(default=0, description="Seed for the policy's own randomness [0].")
    output_dir: Path | None = Field(default=None, description="Where the policy writes its reports.")
    step_timeout: float = Field(
        default=DEFAULT_STEP_TIMEOUT_S,
        gt=0,
        description=f"Seconds the green waits for each action [{DEFAULT_STEP_TIMEOUT_S:g}].",
    )
    session_turns: int | None = Field(
        default=None, gt=0, description="Codex agents: turns per session before a new one."
    )
    compact_limit: int | None = Field(default=None, gt=0, description="Codex agents: auto-compaction token limit.")
    context_window: int = Field(
        default=DEFAULT_CONTEXT_WINDOW,
        gt=0,
        description="Codex agents: the model's context window in tokens; a limit below it compacts, one above it "
        "never does.",
    )
    model: str | None = Field(default=None, description="Codex agents: model name.")
    provider_base_url: str | None = Field(
        default=None,
        description="Codex agents: model provider base URL (a URL that carries a credential belongs in the variable, "
        "not on a command line every local user can read).",
    )
    provider_wire_api: str | None = Field(default=None, description="Codex agents: provider wire API (e.g. responses).")
    provider_env_key: str | None = Field(  # a name, never the key
        default=None,
        pattern=ENV_NAME_PATTERN,
        description="Codex agents: name of the environment variable holding the provider's API key (the key itself "
        "is never passed on a command line).",
    )
    cuda_device: str | None = Field(default=None, description="STEVE-1: CUDA device index to run on.")
    steve1_condition: str | None = Field(  # None: STEVE-1 is conditioned on the task text
        default=None, min_length=1, description="STEVE-1: the text it is conditioned on [each task's own text]."
    )
    planner_base_url: str | None = Field(
        default=None,
        description="Planned agent: the planner's OpenAI-compatible /v1 URL (one with a credential: in the variable).",
    )
    planner_model: str | None = Field(default=None, description="Planned agent: planner model.")
    planner_revision: str | None = Field(
        default=None, description="Planned agent: planner model revision, as recorded."
    )
    planner_env_key: str | None = Field(
        default=None,
        pattern=ENV_NAME_PATTERN,
        description="Planned agent: name of the variable holding the planner's API key.",
    )
    planner_timeout: float | None = Field(
        default=None,
        gt=0,
        description=f"Planned agent: seconds per planner call [{DEFAULT_PLANNER_TIMEOUT_S:g}].",
    )
    planner_thinking: bool | None = Field(
        default=None,
        description="Planned agent: chat_template_kwargs.enable_thinking in every planner request (unset: not sent).",
    )
    policy_backend: PolicyBackend | None = Field(
        default=None, description=f"Planned agent: {', '.join(POLICY_BACKENDS)} [{DEFAULT_POLICY_BACKEND}]."
    )
    policy_base_url: str | None = Field(
        default=None,
        description="Planned agent: the decision service root or chat /v1 URL "
        "(one with a credential: in the variable).",
    )
    policy_model: str | None = Field(default=None, description="Planned agent: policy model.")
    policy_revision: str | None = Field(
        default=None, description="Planned agent: the policy revision (checked by Kev)."
    )
    policy_env_key: str | None = Field(
        default=None,
        pattern=ENV_NAME_PATTERN,
        description="Planned agent: name of the variable holding the policy's API key.",
    )
    policy_timeout: float | None = Field(
        default=None, gt=0, description=f"Planned agent: seconds per decision [{DEFAULT_POLICY_TIMEOUT_S:g}]."
    )
    policy_thinking: bool | None = Field(
        default=None, description="Planned agent, chat policy: as --planner-thinking, in every decision request."
    )

    agent_options: str | None = Field(
        default=None, description="The agent's own options table ([agent_options] in the arm file), as JSON."
    )

    def argv(self, fields: Iterable[str] | None = None) -> list[str]:
        """The `serve purple` flags that give a purple these options (`fields`: the ones its agent reads, by its
        descriptor; unset ones are left to the default); the options that can carry a secret are in
        `environment()` instead."""
        chosen = set(PurpleOptions.model_fields) if fields is None else set(fields)
        flags: list[str] = []
        for field, value in self.model_dump().items():
            if value is not None and field in chosen and field not in OPTIONS_FROM_ENVIRONMENT:
                flags += [flag_for(field), str(value)]
        return flags

    def table(self, model: type[TableModel]) -> TableModel:
        """The agent's own options table, validated by its model (its defaults where the arm gives none)."""
        return model.model_validate_json(self.agent_options or "{}")

    def environment(self) -> dict[str, str]:
        """The variables that give a purple the options kept off its command line."""
        values = self.model_dump()
        return {
            name: str(values[field]) for field, name in OPTIONS_FROM_ENVIRONMENT.items() if values[field] is not None
        }


def purple_options(settings: Settings, purple_dir: Path) -> PurpleOptions:
    """The purple's options: the settings it reads, and where it writes its own files."""
    own = json.dumps(settings.agent_options, sort_keys=True) if settings.agent_options else None
    shared = settings.model_dump(include=set(PurpleOptions.model_fields) - {"agent_options"})
    return PurpleOptions(output_dir=purple_dir, agent_options=own, **shared)


def external_purple_argv(command: list[str], host: str, port: int) -> list[str]:
    """How another program's A2A purple is started: its command with the placeholders filled, or with AgentBeats'
    contract appended where it holds none."""
    values = {"{host}": host, "{port}": str(port), "{card_url}": http_url(host, port)}
    if not any(holder in part for part in command for holder in PURPLE_PLACEHOLDERS):
        return [*command, "--host", host, "--port", str(port), "--card-url", values["{card_url}"]]
    filled = []
    for part in command:
        for holder, value in values.items():
            part = part.replace(holder, value)
        filled.append(part)
    return filled


def _purple_argv(settings: Settings, host: str, port: int) -> list[str]:
    """Another program's purple: its command filled in, or nothing to start (one reached at its address)."""
    return [] if settings.purple_command is None else external_purple_argv(settings.purple_command, host, port)


def mcu_arms_argv() -> list[str]:
    """How every process of an arm is started: this interpreter's mcu-arms."""
    return [sys.executable, "-m", "mcu_arms"]


def command_lines(
    settings: Settings,
    *,
    host: str,
    green_port: int,
    purple_port: int,
    episode_dir: Path,
    purple_dir: Path,
    scenario: Path,
    events: Path,
) -> dict[ProcessRole, list[str]]:
    """The one place an arm's three command lines are written, from its validated settings and where the episode
    runs: `plan` writes them into plan.json, and `run-episode` writes them again rather than run what a file says."""
    serve = [*mcu_arms_argv(), "serve"]
    expose = [] if is_loopback(host) else ["--expose"]
    options = purple_options(settings, purple_dir)
    return {
        "green": [
            *serve,
            "green",
            "--host",
            host,
            "--port",
            str(green_port),
            "--card-url",
            http_url(host, green_port),
            *expose,
            "--output-root",
            str(episode_dir),
            "--warm-up",
            settings.simulator,
        ],
        "purple": _purple_argv(settings, host, purple_port)
        if settings.purple_command is not None or settings.purple_url is not None
        else [
            *serve,
            "purple",
            "--agent",
            settings.agent,
            "--host",
            host,
            "--port",
            str(purple_port),
            "--card-url",
            http_url(host, purple_port),
            *expose,
            *options.argv(option_fields(settings.agent)),
        ],
        "client": [*mcu_arms_argv(), "evaluate", str(scenario), "--events", str(events)],
    }


class ProcessPlan(BaseModel):
    role: ProcessRole
    argv: list[str]
    env: dict[str, str]  # added to the inherited environment
    cwd: str
    log: str
    port: int | None = None
    url: str | None = None
    # A listening socket the supervisor bound on `port` and hands to the server (inherited at this descriptor), so
    # that no other process can take the port between the pick and the server's start.
    listen_fd: int | None = None

    def redacted_env(self) -> dict[str, str]:
        return redact_env(self.env)

    def command_line(self) -> str:
        """The command as shown: secret-shaped arguments masked."""
        return scrub(shlex.join(self.argv))


class CompactionPlan(BaseModel):
    compact: bool
    limit: int
    context_window: int
    # compact: the reported tokens at which codex compacts (its 90 % cap applied); None: the arm never asks it to
    codex_compacts_at: int | None = None
    explanation: str


class CampaignTag(BaseModel):
    """The campaign an episode ran for: `compare CAMPAIGN`, `status --campaign` and the viewer read only episodes that
    carry its name; `run` is the one `mcu-arms run` of it (its record under output/.campaigns/NAME/)."""

    name: str
    run: str


class ArmPlan(BaseModel):
    """One arm, resolved: what will run, where, with which settings. Saved as the episode's plan.json."""

    schema_version: int = 2
    arm: str
    source: str
    fingerprint: str
    settings: Settings
    overrides: dict[str, Any]
    tasks: list[str] = Field(default_factory=list)  # the tasks the simulator will run, in order
    replicates: int = 1  # how many seeds this arm runs (this plan is the episode of settings.seed)
    host: str
    green_port: int
    purple_port: int
    ports_auto: list[str]
    episode: int
    episode_dir: str
    links: dict[str, str]  # logs/<arm>_*.log and _result.json -> files in the episode dir
    codex_home: str | None
    sqlite_dir: str | None
    codex_auth: str | None
    compaction: CompactionPlan
    thresholds: Thresholds = Field(default_factory=Thresholds)
    processes: list[ProcessPlan]
    warnings: list[str]
    # Fixed facts of the simulator worth knowing (a milestone it can never pay, and why): shown, never alerted.
    notes: list[str] = Field(default_factory=list)
    # What the researcher said about the run (`run --tag`, `--note`): in the report, never in the fingerprint.
    tags: dict[str, str] = Field(default_factory=dict)
    note: str | None = None
    blocked: list[str] = Field(default_factory=list)  # failed host checks: `run` refuses this arm
    unanswered: list[str] = Field(default_factory=list)  # its model endpoints that did not answer (also warnings)
    executor: Executor = DEFAULT_EXECUTOR  # slurm: the episode runs as a job, on whichever node Slurm gives it
    slurm: SlurmOptions | None = None  # the job's options, for executor slurm
    campaign: CampaignTag | None = None  # None: run as an arm of its own, not for a campaign
    sequential: SequentialLook | None = None  # `run --until-resolved`: the look this episode runs in

    def process(self, role: ProcessRole) -> ProcessPlan:
        return next(p for p in self.processes if p.role == role)

    @property
    def label(self) -> str:
        """How the episode is named on screen: the arm, and its seed when the arm runs several."""
        return self.arm if self.replicates == 1 else f"{self.arm} s{self.settings.seed}"

    def public(self) -> dict[str, Any]:
        """The plan as shown and saved: secrets in settings, environments and command lines masked."""
        data = self.model_copy(update={"settings": self.settings.redacted()}).model_dump(mode="json")
        for process, shown in zip(self.processes, data["processes"], strict=True):
            shown["env"] = process.redacted_env()
            shown["argv"] = [scrub(part) for part in process.argv]
        return data
