"""The wire protocol between the green agent, the purple agents and the client.

The ground floor all three share, so a payload has exactly one definition. Payloads travel as JSON text in an A2A
text part (a2a-sdk 1.x data parts turn integers into floats). Only pydantic here: light to import.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcu_arms.contracts.catalog import DEFAULT_SIMULATOR, ActionMode, ResetMode
from mcu_arms.contracts.game_state import DEFAULT_OBSERVE, GameState, ObserveMode
from mcu_arms.contracts.limits import MAX_STEP_TIMEOUT_S, MAX_STEPS, MIN_STEP_TIMEOUT_S, SEED_LIMIT
from mcu_arms.contracts.mineflayer import MineflayerServer
from mcu_arms.contracts.simulators import find_simulator
from mcu_arms.contracts.skills import GameEvent, SkillOutcome, SkillRequest

# MineStudio / VPT button order: the 20-element "expanded agent" button array uses exactly this order.
BUTTON_KEYS: tuple[str, ...] = (
    "attack",
    "back",
    "forward",
    "jump",
    "left",
    "right",
    "sneak",
    "sprint",
    "use",
    "drop",
    "inventory",
    "hotbar.1",
    "hotbar.2",
    "hotbar.3",
    "hotbar.4",
    "hotbar.5",
    "hotbar.6",
    "hotbar.7",
    "hotbar.8",
    "hotbar.9",
)
CAMERA_KEY = "camera"
AGENT_CARD_PATH = "/.well-known/agent-card.json"
# The only keys that ever reach a simulator. `chat` runs server commands; `mobs`, `voxels`, `pickItem` are
# privileged. Everything not listed here is dropped by the green agent and counted.
ALLOWED_ACTION_KEYS: frozenset[str] = frozenset(BUTTON_KEYS) | {CAMERA_KEY}
CAMERA_LIMIT_DEGREES = 180.0
# The vision model that grades episodes when video evaluation is on (the MCU green agent used GPT-4o).
DEFAULT_VIDEO_MODEL = "gpt-4o"
# Seconds the green waits for each answer. The benchmark's 60 s suits a reactive policy; a planning agent spends a
# whole model turn on the step where it re-plans, and at 60 s those steps silently become noops.
DEFAULT_STEP_TIMEOUT_S = 600.0
DEFAULT_PROGRESS_EVERY = 50
# The observation the green sends: (width, height) and encoding. The default is the seed's documented 128x128 PNG;
# MCU-AgentBeats' current green sends 640x360 JPEG made by cv2.imencode from an RGB frame, so its bytes hold the
# channels in BGR order and a purple that decodes with cv2 gets the simulator's RGB array back ("jpeg_bgr").
ObsEncoding = Literal["png", "jpeg", "jpeg_bgr"]
DEFAULT_OBS_SIZE: tuple[int, int] = (128, 128)
DEFAULT_OBS_ENCODING: ObsEncoding = "png"
OBS_SIDE_MIN, OBS_SIDE_MAX = 16, 4096

# An action as the simulator receives it, after validation: every button key with 0 or 1, and camera as
# (pitch, yaw) degrees in MineStudio's env order.
EnvAction = dict[str, Any]


def noop_action() -> EnvAction:
    """The action applied when the agent's answer cannot be used (timeout, error, invalid)."""
    action: EnvAction = {key: 0 for key in BUTTON_KEYS}
    action[CAMERA_KEY] = (0.0, 0.0)
    return action


# What an agent's `say` lines may start with: who decided (seed 002 tags its chat by source). A line must start with
# one of these, so that nothing an agent says can be a server command.
ChatSource = Literal["planner", "policy", "reflex"]
CHAT_TAGS: tuple[str, ...] = tuple(f"[{source}] " for source in get_args(ChatSource))
MAX_SAY_LINES = 4  # per action
MAX_SAY_CHARS = 200  # per line (a vanilla server takes 256)


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class InitPayload(_Payload):
    type: Literal["init"] = "init"
    prompt: str
    text: str
    world_seed: int | None = Field(
        default=None, description="the seed of the world this task plays in, when the simulator can say it"
    )  # added beside upstream's fields, as the two below
    world_seed_unknown: str | None = Field(default=None, description="why world_seed is None")


class AckPayload(_Payload):
    type: Literal["ack"] = "ack"
    success: bool = True
    message: str = ""


class ObservationPayload(_Payload):
    type: Literal["obs"] = "obs"
    step: int
    obs: str = Field(description="base64-encoded image of the frame, as `encoding` says (default 128x128 PNG)")
    encoding: ObsEncoding | None = None  # added beside upstream's fields; None from greens that do not say
    state: GameState | None = Field(
        default=None, description="what the player could know (contracts/game_state.py), when the arm observes it"
    )  # empty `obs` when the arm observes the state alone
    last_skill: SkillOutcome | None = Field(
        default=None,
        description="what the skill sent last step came to (contracts/skills.py), in the simulator's words",
    )
    events: list[GameEvent] | None = Field(
        default=None, description="what the player felt since the previous observation (damage, death), when reported"
    )


class AgentFailure(BaseModel):
    """Why an agent could not produce an action: trouble on its side of the wire (a failed model turn, a crashed
    tool, an observation it could not use), not a choice it made. The green counts the step as an infrastructure
    noop under this cause."""

    model_config = ConfigDict(extra="ignore")

    cause: str = Field(min_length=1, max_length=64)
    detail: str = ""


class ActionPayload(_Payload):
    """An agent's answer in one of the three formats of the MCU green agent.

    compact agent: action_type="agent", buttons=[int 0..8640], camera=[int 0..120]
    expanded agent: action_type="agent", buttons=[20 x 0/1], camera=[pitch, yaw] degrees
    env: action_type="env", action={button: 0/1, ..., "camera": [pitch, yaw]}
    skill (an mcu-arms addition, for simulators that take them): action_type="skill", skill={kind, args}

    `reason` and `failure` are mcu-arms additions that greens not knowing them ignore: a noop sent because the
    agent could not act says why, and `failure` says it was infrastructure.
    """

    type: Literal["action"] = "action"
    action_type: Literal["agent", "env", "skill"] = "env"
    buttons: list[Any] | None = None
    camera: list[Any] | None = None
    action: dict[str, Any] | None = None
    skill: SkillRequest | None = None
    reason: str | None = None
    failure: AgentFailure | None = None
    say: list[str] | None = Field(
        default=None,
        description="lines for the game's chat, each starting with its source's tag (CHAT_TAGS); posted where the "
        "arm sets [mineflayer] chat = true, ignored elsewhere; an untagged line is dropped and counted",
    )


class _Table(BaseModel):
    """A simulator table as the request carries it, before its descriptor's model validates it."""

    model_config = ConfigDict(extra="allow")


class EvalConfig(BaseModel):
    """The `config` block of an evaluation request (AgentBeats EvalRequest).

    Keys this green does not know are accepted, as upstream's green accepts them (AgentBeats scenarios carry keys
    for other greens, e.g. `difficulty`): they travel with the request, and the green names them as ignored.
    """

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_category: str
    tasks: list[str] | None = None
    max_steps: int | None = Field(default=None, gt=0, le=MAX_STEPS)
    step_timeout: float = Field(default=DEFAULT_STEP_TIMEOUT_S, ge=MIN_STEP_TIMEOUT_S, le=MAX_STEP_TIMEOUT_S)
    seed: int = Field(default=0, ge=0, lt=SEED_LIMIT)
    simulator: str = DEFAULT_SIMULATOR  # a registered simulator (contracts/simulators.py); the green checks it
    mineflayer: MineflayerServer | None = None  # the server a mineflayer evaluation plays on; None: the defaults
    video_eval: bool = False
    video_model: str = Field(default=DEFAULT_VIDEO_MODEL, min_length=1)
    output_dir: str | None = None
    save_frames: bool = True
    observe: ObserveMode = DEFAULT_OBSERVE
    progress_every: int = Field(default=DEFAULT_PROGRESS_EVERY, gt=0)
    obs_size: tuple[
        Annotated[int, Field(ge=OBS_SIDE_MIN, le=OBS_SIDE_MAX)], Annotated[int, Field(ge=OBS_SIDE_MIN, le=OBS_SIDE_MAX)]
    ] = DEFAULT_OBS_SIZE  # (width, height), as MineStudio's obs_size
    obs_encoding: ObsEncoding = DEFAULT_OBS_ENCODING
    auto_eval_dir: str | None = None  # a checkout of MCU's auto_eval folder on the green's host: MCU's video rubric
    reset_mode: ResetMode | None = None  # how MineStudio starts each task; None: DEFAULT_RESET_MODE (catalog)
    action_mode: ActionMode | None = None  # how MineStudio applies actions; None: DEFAULT_ACTION_MODE (catalog)
    # AgentBeats' sharded assessments: this request runs shard `shard_index` of `num_shards` of the category's first
    # `num_instances` (task x seed) instances (all when None), as contracts/shards.py partitions them.
    shard_index: int = Field(default=0, ge=0)
    num_shards: int = Field(default=1, ge=1)
    num_instances: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _shard_in_range(self) -> EvalConfig:
        if self.shard_index >= self.num_shards:
            raise ValueError(f"shard_index {self.shard_index} is not below num_shards {self.num_shards}")
        return self

    def simulator_table(self, table: str | None) -> BaseModel | None:
        """The simulator's own table of this config (a field here, or a key another simulator's descriptor names);
        the green validates it with that descriptor's table model."""
        if table is None:
            return None
        value = getattr(self, table, None) if table in EvalConfig.model_fields else (self.model_extra or {}).get(table)
        if value is None or isinstance(value, BaseModel):
            return value
        return _Table.model_validate(value)

    def ignored_keys(self) -> list[str]:
        """The keys this green does not know, in order: the table the simulator's descriptor names is known."""
        descriptor = find_simulator(self.simulator)
        own_table = descriptor.table if descriptor is not None else None
        return sorted(key for key in self.model_extra or {} if key != own_table)

    def known(self) -> EvalConfig:
        """This config without the keys it does not know (their values are never stored: they may be secrets)."""
        return EvalConfig.model_validate(self.model_dump(exclude=set(self.ignored_keys())))


class EvalRequest(BaseModel):
    """What the client sends to the green agent: who to evaluate, and how."""

    model_config = ConfigDict(extra="forbid")

    participants: dict[str, str]
    config: EvalConfig
