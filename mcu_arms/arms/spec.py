"""Arm files (`arms/NAME.toml`): the model, and loading with errors that point at the file, line and key."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    field_validator,
    model_validator,
)

from mcu_arms.contracts.addresses import is_loopback, parse_host
from mcu_arms.contracts.agents import agent_descriptor, agent_kinds
from mcu_arms.contracts.catalog import (
    A2A_AGENT,
    ACTION_MODES,
    CATEGORIES,
    DEFAULT_SIMULATOR,
    FRAME_READING_AGENTS,
    ONE_SIMULATOR_AGENTS,
    RESET_MODES,
    STATE_AGENTS,
    ActionMode,
    ResetMode,
)
from mcu_arms.contracts.errors import Problem, UserError, did_you_mean, user_error
from mcu_arms.contracts.game_state import DEFAULT_OBSERVE, OBSERVE_MODES, wants_frame, wants_state
from mcu_arms.contracts.limits import (
    MAX_ENV_ENTRY_BYTES,
    MAX_ENV_KEYS,
    MAX_SEEDS_PER_ARM,
    MAX_STEP_TIMEOUT_S,
    MAX_STEPS,
    MIN_STEP_TIMEOUT_S,
    SEED_LIMIT,
)
from mcu_arms.contracts.mineflayer import MineflayerServer
from mcu_arms.contracts.planned import (
    DEFAULT_PLANNER_TIMEOUT_S,
    DEFAULT_POLICY_BACKEND,
    DEFAULT_POLICY_TIMEOUT_S,
    POLICY_BACKENDS,
    PolicyBackend,
)
from mcu_arms.contracts.rubric import auto_eval_problem
from mcu_arms.contracts.settings import DEFAULT_CONTEXT_WINDOW, ENV_NAME_PATTERN, Thresholds
from mcu_arms.contracts.simulators import (
    SimulatorDescriptor,
    simulator_descriptor,
    simulator_for_agent,
    simulator_names,
    simulators,
)
from mcu_arms.contracts.slurm import MIN_STOP_MARGIN_S, TIME_ALLOWED, SlurmSettings
from mcu_arms.contracts.toml_text import parse_toml, toml_line
from mcu_arms.contracts.wire import (
    DEFAULT_OBS_ENCODING,
    DEFAULT_OBS_SIZE,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_VIDEO_MODEL,
    OBS_SIDE_MAX,
    OBS_SIDE_MIN,
    ObsEncoding,
)

ARM_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
SESSION_TURNS_WARN_ABOVE = 5

WIRE_API_REASON = (
    'codex-cli 0.171 refuses wire_api = "chat" before it sends anything ("`wire_api = "chat"` is no longer '
    'supported"): every turn would fail'
)

SESSION_TURNS_ZERO_REASON = (
    "0 (unbounded sessions) is refused: every turn re-sends the whole conversation with its frames, ~0.4 MB more "
    "per turn, and past ~5-6 MB each turn takes a flat ~600 s with no error; use a bounded number (1 is the default)"
)


class _Strict(BaseModel):
    """Unknown keys are errors, and so are wrong TOML types: `compact = "yes"` or `steps = "100"` is not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class SettingConflict(ValueError):
    """A rule between two settings, reported at the key the user most likely has to change."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


AUTO_PORT = "auto"


class PortsSpec(_Strict):
    """Both ports default to "auto" (free ones picked at plan time), so an arm without [ports] runs beside others."""

    green: int | str = AUTO_PORT
    purple: int | str = AUTO_PORT
    host: str = "127.0.0.1"
    expose: bool = False  # a host beyond loopback opens the arm to the network: it must be asked for

    @field_validator("green", "purple", mode="before")
    @classmethod
    def _port_range(cls, value: Any) -> int | str:
        if value == AUTO_PORT or (isinstance(value, int) and not isinstance(value, bool) and 1024 <= value <= 65535):
            return value
        raise ValueError(f'{value!r} is not a port between 1024 and 65535, nor "auto"')

    @field_validator("host")
    @classmethod
    def _ip_literal(cls, value: str) -> str:
        return str(parse_host(value))

    @model_validator(mode="after")
    def _two_ports(self) -> PortsSpec:
        if isinstance(self.green, int) and self.green == self.purple:
            raise SettingConflict(
                "ports.purple",
                f"the green and the purple cannot both listen on port {self.green}: the second to "
                "start would find it taken",
            )
        return self

    @model_validator(mode="after")
    def _exposure_asked_for(self) -> PortsSpec:
        if not is_loopback(self.host) and not self.expose:
            raise SettingConflict(
                "ports.host",
                f"{self.host} is not a loopback address: the arm's servers would be reachable from the network; "
                "set expose = true in [ports] to allow it (each server still requires its per-run token)",
            )
        return self


class CodexSpec(_Strict):
    auth: str | None = None
    root: str | None = None
    model: str | None = None
    provider_base_url: str | None = None
    provider_wire_api: Literal["responses"] | None = None
    provider_env_key: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)

    @field_validator("provider_wire_api", mode="before")
    @classmethod
    def _only_responses(cls, value: Any) -> Any:
        if value == "chat":
            raise ValueError(WIRE_API_REASON)
        return value

    @field_validator("auth", "root")
    @classmethod
    def _home_relative(cls, value: str | None) -> str | None:
        """`~/.codex/auth.json` means the user's home, as it would in a shell."""
        return os.path.expanduser(value) if value else value


class PlannerSpec(_Strict):
    """The planned agent's planner: an OpenAI-compatible chat endpoint (vLLM, llama.cpp, a hosted API)."""

    base_url: str | None = None
    model: str | None = None
    revision: str | None = None  # recorded in every trajectory line; the endpoint cannot say it
    env_key: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
    timeout: float = Field(default=DEFAULT_PLANNER_TIMEOUT_S, gt=0)
    thinking: bool | None = None  # sent as chat_template_kwargs.enable_thinking; None: the server's default


class PolicySpec(_Strict):
    """The planned agent's policy: a Kev-style decision service, or a chat model asked for the same JSON."""

    backend: PolicyBackend = DEFAULT_POLICY_BACKEND
    base_url: str | None = None
    model: str | None = None
    revision: str | None = None  # decision_service: checked against its /v1/models at start
    env_key: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
    timeout: float = Field(default=DEFAULT_POLICY_TIMEOUT_S, gt=0)
    thinking: bool | None = None  # chat backend only, as the planner's


# Seconds another program's A2A purple may take to serve its card: a Python server importing its stack starts in a
# few seconds; one loading a model says so with [purple] ready_timeout.
DEFAULT_PURPLE_READY_TIMEOUT_S = 60.0
MAX_PURPLE_READY_TIMEOUT_S = 3600.0


class PurpleSpec(_Strict):
    """[purple], for agent = "a2a": another program's A2A server, started by its `command` (our child like any other)
    or reached at its `url` (already running: nothing started, nothing stopped)."""

    command: list[str] | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/\S*)?$")
    cwd: str | None = Field(default=None, min_length=1)
    identity: list[str] | None = Field(default=None, min_length=1)
    ready_timeout: float = Field(default=DEFAULT_PURPLE_READY_TIMEOUT_S, gt=0, le=MAX_PURPLE_READY_TIMEOUT_S)

    @field_validator("command")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value[0].strip():
            raise ValueError("the command's first word (the program) is empty")
        return value

    @model_validator(mode="after")
    def _one_way_in(self) -> PurpleSpec:
        if (self.command is None) == (self.url is None):
            raise SettingConflict(
                "purple.command" if self.command is not None else "purple",
                "[purple] needs either command (to start it) or url (to reach one already running), not "
                + ("both" if self.command is not None else "neither"),
            )
        if self.url is not None:
            for key in ("cwd", "identity"):
                if getattr(self, key) is not None:
                    raise SettingConflict(
                        f"purple.{key}", f"{key} is for a purple started by command, not one reached at its url"
                    )
        return self


class ArmSpec(_Strict):
    """One comparison arm, as written in its TOML file (before defaults that depend on the host are resolved)."""

    name: str = Field(pattern=ARM_NAME_PATTERN)
    description: str = ""
    agent: str  # a built-in agent kind (catalog.AGENT_KINDS) or a registered one (contracts/agents.py)
    task: Literal[CATEGORIES]  # type: ignore[valid-type]
    tasks: list[str] | None = None
    simulator: str = DEFAULT_SIMULATOR  # a registered simulator (contracts/simulators.py)
    seed: int = Field(default=0, ge=0, lt=SEED_LIMIT)
    # replicates: one episode per seed
    seeds: list[int] | None = Field(default=None, min_length=1, max_length=MAX_SEEDS_PER_ARM)
    replicates: int | None = Field(default=None, ge=1, le=MAX_SEEDS_PER_ARM)  # or: this many counting up from `seed`
    steps: int | None = Field(default=None, gt=0, le=MAX_STEPS)
    step_timeout: float = Field(default=DEFAULT_STEP_TIMEOUT_S, ge=MIN_STEP_TIMEOUT_S, le=MAX_STEP_TIMEOUT_S)
    session_turns: int = 1
    compact: bool = False
    compact_limit: int | None = Field(default=None, gt=0)
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, gt=0)
    ports: PortsSpec = Field(default_factory=PortsSpec)
    codex: CodexSpec = Field(default_factory=CodexSpec)
    env: dict[str, str] = Field(default_factory=dict)
    cuda_device: str | None = None
    reset_mode: ResetMode | None = None
    action_mode: ActionMode | None = None
    steve1_condition: str | None = Field(default=None, min_length=1)
    video_eval: bool = False
    video_model: str = Field(default=DEFAULT_VIDEO_MODEL, min_length=1)
    auto_eval_dir: str | None = None
    save_frames: bool = True
    thresholds: Thresholds = Field(default_factory=Thresholds)
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    obs_size: list[int] = Field(default_factory=lambda: list(DEFAULT_OBS_SIZE))
    obs_encoding: ObsEncoding = DEFAULT_OBS_ENCODING
    observe: Literal[OBSERVE_MODES] = DEFAULT_OBSERVE  # type: ignore[valid-type]
    planner: PlannerSpec | None = None
    policy: PolicySpec | None = None
    mineflayer: MineflayerServer | None = None  # the mineflayer simulator's table: the server it plays on
    purple: PurpleSpec | None = None  # agent = "a2a" only: another program's A2A server
    agent_options: dict[str, Any] | None = None  # the agent's own table, validated by its descriptor's

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, value: str) -> str:
        kinds = agent_kinds()
        if value not in kinds:
            raise ValueError(f"{value!r} is not allowed{did_you_mean(value, kinds)}")
        return value

    @field_validator("simulator")
    @classmethod
    def _registered_simulator(cls, value: str) -> str:
        if value not in simulator_names():
            raise ValueError(f"unknown simulator {value!r}{did_you_mean(value, simulator_names())}")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _tables_of_other_simulators(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> ArmSpec:
        """An arm file may hold the table a registered simulator's descriptor names ([toy] for a simulator "toy");
        it is validated as a field of its own, by the descriptor's table model, so its errors name its keys."""
        if cls is ArmSpec and isinstance(data, dict):
            tables = tuple((t, model) for t, model in simulator_tables_outside_the_spec().items() if t in data)
            if tables:
                spec: ArmSpec = _spec_with_tables(tables).model_validate(data)
                return spec
        result: ArmSpec = handler(data)
        return result

    @property
    def simulator_descriptor(self) -> SimulatorDescriptor:
        return simulator_descriptor(self.simulator)

    def simulator_table(self) -> BaseModel | None:
        """The arm's table for its simulator ([mineflayer] for the mineflayer one), None when it has none."""
        table = self.simulator_descriptor.table
        return getattr(self, table, None) if table in type(self).model_fields else None

    @field_validator("obs_size")
    @classmethod
    def _obs_size(cls, value: list[int]) -> list[int]:
        if len(value) != 2 or not all(OBS_SIDE_MIN <= side <= OBS_SIDE_MAX for side in value):
            raise ValueError(f"{value} is not [width, height] with each side in {OBS_SIDE_MIN}..{OBS_SIDE_MAX}")
        return value

    @field_validator("auto_eval_dir")
    @classmethod
    def _auto_eval_checkout(cls, value: str | None) -> str | None:
        """A checkout of MCU's auto_eval folder, checked now rather than when the first video is graded."""
        if value is None:
            return None
        folder = Path(os.path.expanduser(value)).resolve()
        problem = auto_eval_problem(folder)
        if problem:
            raise ValueError(problem)
        return str(folder)

    @field_validator("session_turns")
    @classmethod
    def _bounded_sessions(cls, value: int) -> int:
        if value == 0:
            raise ValueError(SESSION_TURNS_ZERO_REASON)
        if value < 0:
            raise ValueError("session_turns must be 1 or more")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_ENV_KEYS:
            raise ValueError(f"{len(value)} variables; at most {MAX_ENV_KEYS} are allowed")
        for key, text in value.items():
            limit = f"at most {MAX_ENV_ENTRY_BYTES} bytes are allowed"
            if len(key.encode()) > MAX_ENV_ENTRY_BYTES:
                raise ValueError(f"a name of {len(key.encode())} bytes; {limit}")
            if len(text.encode()) > MAX_ENV_ENTRY_BYTES:
                raise SettingConflict(f"env.{key}", f"a value of {len(text.encode())} bytes; {limit}")
            if not re.fullmatch(ENV_NAME_PATTERN, key):
                raise ValueError(f"'{key}' is not a valid environment variable name")
            if "\x00" in text:  # the value itself is not repeated: it may be a secret
                raise SettingConflict(f"env.{key}", "the value contains a NUL byte, which no environment can hold")
        return value

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if any(not 0 <= seed < SEED_LIMIT for seed in value):
                raise ValueError(f"seeds must be integers from 0 to 2^63 - 1 ({SEED_LIMIT - 1})")
            if len(set(value)) != len(value):
                raise ValueError("each seed may appear once")
        return value

    def replicate_seeds(self) -> list[int]:
        """The seeds this arm runs, one episode each: the replicate axis, never a difference between arms."""
        if self.seeds is not None:
            return list(self.seeds)
        return list(range(self.seed, self.seed + (self.replicates or 1)))

    @model_validator(mode="after")
    def _consistent(self) -> ArmSpec:
        if self.seeds is not None and self.replicates is not None:
            raise SettingConflict(
                "replicates", "give seeds = [...] or replicates = N (counting up from seed), not both"
            )
        if self.seeds is not None and "seed" in self.model_fields_set:
            raise SettingConflict("seeds", "give seeds = [...] or seed = N, not both")
        if self.seed + (self.replicates or 1) > SEED_LIMIT:
            raise SettingConflict("replicates", f"the seeds would count up past 2^63 - 1 ({SEED_LIMIT - 1})")
        if self.cuda_device is not None and self.agent != "steve1":
            raise SettingConflict("cuda_device", 'cuda_device is only for agent = "steve1"')
        if self.steve1_condition is not None and self.agent != "steve1":
            raise SettingConflict("steve1_condition", 'steve1_condition is only for agent = "steve1"')
        if self.purple is not None and self.agent != A2A_AGENT:
            raise SettingConflict("purple", f'[purple] is only for agent = "{A2A_AGENT}"')
        if self.purple is None and self.agent == A2A_AGENT:
            raise SettingConflict(
                "purple", f'agent = "{A2A_AGENT}" needs a [purple] table with command = [...] or url = "..."'
            )
        self._consistent_agent_options()
        self._consistent_simulator_choices()
        self._consistent_server()
        self._consistent_observation()
        reason = self.simulator_descriptor.category_reason(self.task)
        if reason is not None:
            runs_it = _quoted([d.name for d in simulators().values() if d.category_reason(self.task) is None])
            raise SettingConflict("task", f"task {reason}: it needs simulator = {runs_it}")
        if self.compact_limit is not None:
            if self.compact and self.compact_limit >= self.context_window:
                raise SettingConflict(
                    "compact_limit",
                    f"compact_limit {self.compact_limit} must be below context_window {self.context_window} "
                    "for compaction to happen",
                )
            if not self.compact and self.compact_limit <= self.context_window:
                raise SettingConflict(
                    "compact_limit",
                    f"compact_limit {self.compact_limit} is within the context window {self.context_window}, so "
                    "conversations would compact: set compact = true, or a limit above the window",
                )
        return self

    def agent_table(self) -> BaseModel | None:
        """The arm's [agent_options], validated by its agent's table model (None: the arm gives none)."""
        if self.agent_options is None:
            return None
        try:
            descriptor = agent_descriptor(self.agent)
        except UserError as error:
            raise SettingConflict("agent", error.message) from None
        if descriptor is None or descriptor.table is None:
            raise SettingConflict("agent_options", f'agent "{self.agent}" declares no options table')
        try:
            return descriptor.table.model_validate(self.agent_options)
        except ValidationError as error:
            first = error.errors()[0]
            key = ".".join(["agent_options", *(str(part) for part in first["loc"])])
            known = ", ".join(descriptor.table.model_fields)
            message = str(first["msg"]).removeprefix("Value error, ")
            raise SettingConflict(key, f'{message} (agent "{self.agent}" takes: {known})') from None

    def _consistent_agent_options(self) -> None:
        self.agent_table()

    def _consistent_simulator_choices(self) -> None:
        """A reset mode, an action mode or a simulator table is only for a simulator that takes it, and an agent that
        plays one simulator only runs there: each descriptor says."""
        descriptor = self.simulator_descriptor
        own = type(self).model_fields.get(descriptor.table or "")
        if own is not None and descriptor.table_model is not None and own.annotation != descriptor.table_model | None:
            raise SettingConflict(
                "simulator",
                f"the {self.simulator} simulator's descriptor names the table [{descriptor.table}], which is one of "
                "mcu-arms' own arm-file tables: its descriptor must name another",
            )
        if self.reset_mode is not None and self.reset_mode not in descriptor.reset_modes:
            takers = _quoted([d.name for d in simulators().values() if d.reset_modes])
            raise SettingConflict(
                "reset_mode",
                f"reset_mode is only for simulator = {takers} (the {self.simulator} one starts each task its own way)",
            )
        if self.action_mode is not None and self.action_mode not in descriptor.action_modes:
            takers = _quoted([d.name for d in simulators().values() if d.action_modes])
            raise SettingConflict(
                "action_mode",
                f"action_mode is only for simulator = {takers} (the other simulators take env actions as they are)",
            )
        for other in simulators().values():
            table = other.table
            if table in type(self).model_fields and getattr(self, table) is not None and other is not descriptor:
                raise SettingConflict(table, f'[{table}] is only for simulator = "{other.name}"')
        native = simulator_for_agent(self.agent)
        if native is not None and native is not descriptor:
            why = ONE_SIMULATOR_AGENTS.get(self.agent, f"plays the {native.name} simulator only")
            raise SettingConflict("simulator", f'agent "{self.agent}" {why}: it needs simulator = "{native.name}"')

    def _consistent_server(self) -> None:
        """A simulator that serves no frames cannot feed a frame-reading agent, a frame in the observation or a video
        to grade."""
        descriptor = self.simulator_descriptor
        if self.video_eval and "video" not in descriptor.serves:
            raise SettingConflict(
                "video_eval", f"video evaluation grades frames, and the {self.simulator} simulator serves none"
            )
        if descriptor.serves_frames():
            return
        if self.agent in FRAME_READING_AGENTS:
            framed = _quoted([d.name for d in simulators().values() if d.serves_frames()])
            raise SettingConflict(
                "simulator",
                f'agent "{self.agent}" reads frames, and the {self.simulator} simulator serves none '
                f"(structured state only): pair it with simulator = {framed}",
            )
        if wants_frame(self.observe):
            raise SettingConflict(
                "observe", f'the {self.simulator} simulator serves no frames: it needs observe = "state"'
            )

    def _consistent_observation(self) -> None:
        """What the agent reads must be what the arm observes, and the simulator must be able to provide it."""
        if wants_state(self.observe) and not self.simulator_descriptor.serves_state():
            state_from = sorted(d.name for d in simulators().values() if d.serves_state())
            raise SettingConflict(
                "observe",
                f'observe = "{self.observe}" needs structured state, which only the '
                f"{' and '.join(state_from)} simulators provide (the {self.simulator} one serves frames)",
            )
        if self.agent == "steve1" and self.obs_encoding == "jpeg_bgr":
            raise SettingConflict(
                "obs_encoding",
                'agent "steve1" decodes frames as RGB: with obs_encoding = "jpeg_bgr" it would see red and blue '
                "swapped (jpeg_bgr is for purples that decode with cv2, as MCU-AgentBeats' do)",
            )
        if self.agent in FRAME_READING_AGENTS and not wants_frame(self.observe):
            raise SettingConflict(
                "observe", f'agent "{self.agent}" reads frames: it needs observe = "frame" or "frame+state"'
            )
        if self.agent not in STATE_AGENTS:
            for table in ("planner", "policy"):
                if getattr(self, table) is not None:
                    raise SettingConflict(table, f'[{table}] is only for agent = "planned"')
            return
        if not wants_state(self.observe):
            raise SettingConflict(
                "observe", f'agent "{self.agent}" reads structured state: it needs observe = "state" or "frame+state"'
            )
        for table, spec in (("planner", self.planner), ("policy", self.policy)):
            missing = [key for key in ("base_url", "model") if spec is None or getattr(spec, key) is None]
            if spec is None or missing:
                raise SettingConflict(table, f'agent "planned" needs [{table}] {" and ".join(missing)}')
            if spec.timeout >= self.step_timeout:
                raise SettingConflict(
                    f"{table}.timeout",
                    f"{table}.timeout {spec.timeout:g} s must be below step_timeout {self.step_timeout:g} s, or a slow "
                    "answer turns the step into a noop",
                )
        assert self.policy is not None  # the loop above refused an arm without [policy]
        if self.policy.backend == "decision_service" and self.policy.thinking is not None:
            raise SettingConflict(
                "policy.thinking", 'a decision service applies no chat template: thinking is for backend = "chat"'
            )
        if self.policy.backend == "decision_service" and self.policy.revision is None:
            raise SettingConflict(
                "policy.revision", "a decision service's model revision is checked at start: set [policy] revision"
            )


def simulator_tables_outside_the_spec() -> dict[str, type[BaseModel]]:
    """The arm-file tables registered simulators name that are no field of ArmSpec (a third party's), with their
    models: the built-in ones ([mineflayer]) are fields, flattened into Settings."""
    return {
        d.table: d.table_model
        for d in simulators().values()
        if d.table is not None and d.table_model is not None and d.table not in ArmSpec.model_fields
    }


@cache
def _spec_with_tables(tables: tuple[tuple[str, type[BaseModel]], ...]) -> type[ArmSpec]:
    """ArmSpec with these simulator tables as optional fields, each validated by its descriptor's model."""
    fields: dict[str, Any] = {table: (model | None, None) for table, model in tables}
    extended: type[ArmSpec] = create_model("ArmSpec", __base__=ArmSpec, **fields)
    return extended


# What each field accepts, for error messages.
ALLOWED: dict[str, str] = {
    "name": "letters, digits, '_' and '-', 1 to 64 characters",
    "task": ", ".join(CATEGORIES),
    "tasks": "a list of task names in the category (`mcu-arms tasks CATEGORY` lists them)",
    "seed": f"an integer from 0 to 2^63 - 1 ({SEED_LIMIT - 1})",
    "seeds": f"a list of at most {MAX_SEEDS_PER_ARM} distinct integers from 0 to 2^63 - 1, one episode each, "
    "e.g. [0, 1, 2]",
    "replicates": f"an integer from 1 to {MAX_SEEDS_PER_ARM}: that many seeds counting up from `seed`",
    "steps": f"an integer from 1 to {MAX_STEPS}",
    "step_timeout": f"seconds from {MIN_STEP_TIMEOUT_S:g} to {MAX_STEP_TIMEOUT_S:g}",
    "session_turns": "an integer >= 1",
    "compact": "true or false",
    "compact_limit": "tokens: below context_window with compact = true, above it without",
    "context_window": "tokens, an integer > 0",
    "env": f"at most {MAX_ENV_KEYS} NAME = \"value\" pairs; names of letters, digits and '_', not starting with a "
    f"digit; string values; each name and value at most {MAX_ENV_ENTRY_BYTES} bytes",
    "cuda_device": 'a CUDA device index or UUID as a string, for agent = "steve1" only',
    "reset_mode": f"{', '.join(RESET_MODES)}; for the simulators that take one (their descriptor says)",
    "action_mode": f"{', '.join(ACTION_MODES)}; for the simulators that take one (their descriptor says)",
    "steve1_condition": 'a non-empty text STEVE-1 is conditioned on for every task, for agent = "steve1" only',
    "ports.green": 'a port 1024-65535 or "auto"',
    "ports.purple": 'a port 1024-65535 or "auto"',
    "ports.host": "the IP address both agents bind to and are reached at: 127.0.0.1 (default), ::1, or with "
    "expose = true a local address or 0.0.0.0 / ::",
    "ports.expose": "true or false: true allows a ports.host beyond loopback",
    "codex.provider_wire_api": "responses (the only wire API codex still speaks)",
    "codex.provider_env_key": "the NAME of the environment variable holding the provider's API key, not the key",
    "video_eval": "true or false",
    "video_model": 'a vision model name, e.g. "gpt-4o"',
    "save_frames": "true or false",
    "thresholds.infrastructure_share": "a share of a task's steps, 0 to 1",
    "thresholds.infrastructure_in_a_row": "an integer >= 1",
    "thresholds.init_must_succeed": "true or false",
    "thresholds.task_error_fails": "true or false",
    "thresholds.min_steps_for_share": "an integer >= 1",
    "auto_eval_dir": "a checkout of MCU's auto_eval folder (prompt/, criteria_files/): grade video with MCU's rubric",
    "obs_size": f"[width, height], each {OBS_SIDE_MIN}..{OBS_SIDE_MAX}; [640, 360] as MCU-AgentBeats sends",
    "obs_encoding": "png, jpeg, jpeg_bgr (MCU-AgentBeats' cv2-encoded JPEG)",
    "observe": ", ".join(OBSERVE_MODES),
    "planner.base_url": 'an OpenAI-compatible endpoint ending in /v1, e.g. "http://127.0.0.1:8000/v1"',
    "planner.model": "the served model name (vLLM's --served-model-name, llama.cpp's --alias)",
    "planner.env_key": "the NAME of the environment variable holding the planner's API key, not the key",
    "planner.timeout": "seconds > 0, below step_timeout",
    "planner.thinking": "true or false: sent in every request as chat_template_kwargs.enable_thinking (the docs: which "
    "servers honour it); unset: nothing is sent",
    "policy.backend": ", ".join(POLICY_BACKENDS),
    "policy.base_url": "decision_service: the service root (it serves /v1/systemone); chat: an endpoint ending in /v1",
    "policy.revision": "the model revision the decision service must serve (its /v1/models `run` ends in @REVISION)",
    "policy.env_key": "the NAME of the environment variable holding the policy's API key, not the key",
    "policy.timeout": "seconds > 0, below step_timeout",
    "policy.thinking": 'true or false, backend = "chat" only: as planner.thinking',
    "agent_options": "a table of the agent's own options, as its descriptor declares them (a plug-in's)",
    "purple": 'a table: command = ["python", "my_purple.py"] (started with --host --port --card-url appended, or '
    '{host} {port} {card_url} filled in) or url = "http://127.0.0.1:9019" (an agent already running)',
    "purple.command": 'the argv that starts your A2A server, a list of strings, e.g. ["python", "my_purple.py"]; '
    "placeholders {host}, {port}, {card_url} are filled in, else --host H --port P --card-url URL is appended",
    "purple.url": 'the base URL of an A2A agent already running, e.g. "http://127.0.0.1:9019"',
    "purple.cwd": "the directory the command starts in (relative: to where mcu-arms runs); its git commit and "
    "uncommitted changes are the agent's code identity",
    "purple.identity": 'globs of the agent\'s source files, relative to cwd, e.g. ["src/**/*.py"]: their hash is the '
    "code identity where cwd is no git repository",
    "purple.ready_timeout": f"seconds > 0, at most {MAX_PURPLE_READY_TIMEOUT_S:g}, for its agent card to answer",
    "slurm.partition": "a partition name (sbatch --partition)",
    "slurm.account": "an account name (sbatch --account)",
    "slurm.time": TIME_ALLOWED,
    "slurm.mem": 'memory as sbatch --mem takes it: a number with an optional K, M, G or T, e.g. "8G"',
    "slurm.gres": 'a GRES as sbatch --gres takes it, e.g. "mcslot:1" or "gpu:1"',
    "slurm.cpus": "an integer >= 1 (sbatch --cpus-per-task)",
    "slurm.qos": 'a QOS name (sbatch --qos), e.g. "long"',
    "slurm.constraint": 'node features as sbatch --constraint takes them, e.g. "avx2" or "avx2&ib"',
    "slurm.exclude": 'nodes never to use, as sbatch --exclude takes them, e.g. "node[01-03],gpu7"',
    "slurm.log_dir": "a directory (relative: to where mcu-arms runs) for the jobs' stdout and stderr, instead of each "
    "episode directory",
    "slurm.array_throttle": "an integer >= 1: at most this many of the array's episodes at once",
    "slurm.sbatch": 'a list of extra sbatch options, each "--name=value" or "--flag"',
    "slurm.setup": 'a list of shell lines the job runs before the episode, e.g. ["module load jdk/8"]',
    "slurm.stop_margin": f"seconds >= {MIN_STOP_MARGIN_S} before the time limit at which the episode is told to stop",
}


def allowed_for(key: str) -> str | None:
    """What a key accepts; an [env] entry ("env.NAME") accepts what [env] does; a simulator, a registered one."""
    if key == "simulator":
        return ", ".join(simulator_names())
    if key == "agent":
        return ", ".join(agent_kinds())
    table, _, name = key.partition(".")
    owner = next((d for d in simulators().values() if d.table == table and d.table_model is not None), None)
    if owner is not None and owner.table_model is not None:
        fields = owner.table_model.model_fields
        if not name:
            return f'a table ({", ".join(fields)}), for simulator = "{owner.name}" only'
        return fields[name].description if name in fields else None
    return ALLOWED.get(key) or ALLOWED.get(table)


def _quoted(names: list[str]) -> str:
    return " or ".join(f'"{name}"' for name in names)


def describe_error(error: Mapping[str, Any]) -> Problem:
    """An arm file's validation error: its dotted key, the message, and what the key allows."""
    loc = [str(part) for part in error["loc"] if not isinstance(part, int)]
    key = ".".join(loc)
    kind = error["type"]
    conflict = error.get("ctx", {}).get("error")
    if isinstance(conflict, SettingConflict):
        return Problem(conflict.key, str(conflict))  # the message names the combination that is allowed
    if kind == "extra_forbidden":
        table = ".".join(loc[:-1])
        known = list(ArmSpec.model_fields) if not table else _table_keys(table)
        return Problem(
            key, f"unknown key{did_you_mean(loc[-1], known)} (known keys here: {', '.join(known)})", kind=kind
        )
    if kind == "missing":
        return Problem(key, "is required", kind=kind)
    if kind == "literal_error":
        allowed = allowed_for(key)
        hint = did_you_mean(error["input"], (allowed or "").split(", "))
        return Problem(key, f"{error['input']!r} is not allowed{hint}", allowed, kind)
    message = str(error["msg"]).removeprefix("Value error, ")
    return Problem(key, message, allowed_for(key), kind)


def _table_keys(table: str) -> list[str]:
    model: Any = simulator_tables_outside_the_spec().get(table) or ArmSpec
    if model is not ArmSpec:
        return list(model.model_fields)
    for part in table.split("."):
        field = model.model_fields.get(part)
        if field is None:
            return []
        model = field.annotation
    return list(getattr(model, "model_fields", {}))


# A `seeds = [` assignment (at any table), and a TOML comment: what the pre-parse bound on seed lists looks at.
SEEDS_ASSIGNMENT = re.compile(r"^[ \t]*seeds[ \t]*=[ \t]*\[", re.MULTILINE)
TOML_COMMENT = re.compile(r"#[^\n]*")


def refuse_long_seed_lists(text: str, path: Path) -> None:
    """Refuse a seed list past MAX_SEEDS_PER_ARM before tomllib parses it: tomllib takes about 5 µs an item, so a
    list of 100,000 seeds would cost half a second only to be refused. Counted with C-speed string methods: at least
    as many seeds as commas outside comments."""
    for found in SEEDS_ASSIGNMENT.finditer(text):
        end = text.find("]", found.end())
        listed = TOML_COMMENT.sub("", text[found.end() : end if end >= 0 else len(text)])
        if listed.count(",") > MAX_SEEDS_PER_ARM:
            raise UserError(
                f"{listed.count(',')} or more seeds are too many",
                path=path,
                line=text.count("\n", 0, found.start()) + 1,
                key="seeds",
                allowed=ALLOWED["seeds"],
            )


def parse_arm(text: str, path: Path, data: dict[str, Any] | None = None) -> ArmSpec:
    """Validate an arm file's text (its table when the caller has parsed it already: a large file is parsed once).
    Every problem is reported with its line and what is allowed."""
    if data is None:
        refuse_long_seed_lists(text, path)
        data = parse_toml(text, path)
    data.setdefault("name", path.stem)
    try:
        return ArmSpec.model_validate(data)
    except ValidationError as error:
        raise user_error(
            error, path=path, line_of=partial(toml_line, text), describe=describe_error, every=True
        ) from None


def load_arm(path: Path) -> ArmSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such arm file", path=path) from None
    except OSError as error:
        raise UserError(f"cannot read the arm file: {error.strerror or error}", path=path) from None
    except UnicodeDecodeError:
        raise UserError("not a UTF-8 text file", path=path) from None
    return parse_arm(text, path)


def arm_files(arms_dir: Path) -> list[Path]:
    """Every arm file in the arms dir (NAME.toml), sorted by name."""
    return sorted(arms_dir.glob("*.toml")) if arms_dir.is_dir() else []


def known_arms_text(arms_dir: Path) -> str:
    """The arms that exist, for an error's `allowed`."""
    return ", ".join(path.stem for path in arm_files(arms_dir)) or f"none in {arms_dir}"


def arm_path(arms_dir: Path, name: str, *, key: str = "--arm") -> Path:
    """Where `--arm NAME` looks: arms/NAME.toml."""
    if not re.fullmatch(ARM_NAME_PATTERN, name):
        raise UserError(f"'{name}' is not a valid arm name", key=key, allowed=ALLOWED["name"])
    path = arms_dir / f"{name}.toml"
    if not path.exists():
        hint = did_you_mean(name, (known.stem for known in arm_files(arms_dir)))
        raise UserError(
            f"no arm named '{name}'{hint} ({path} does not exist)", key=key, allowed=known_arms_text(arms_dir)
        )
    return path
