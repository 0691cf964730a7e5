"""The one interface the episode loop uses, whichever simulator runs underneath.

Scoring never looks inside a backend: each backend reports MineStudio-style cumulative event counters
(`counters[event][object]`, e.g. counters["mine_block"]["oak_log"] == 3) and the scorer reads their per-step deltas,
exactly as MineStudio's RewardsCallback does. The embedded (Crafter) backend translates its achievements into those
counters, so reward_cfg and milestone_reward_cfg entries work unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcu_arms.contracts.support import TaskSupport

if TYPE_CHECKING:
    import numpy as np

    from mcu_arms.contracts.catalog import ActionMode, ResetMode
    from mcu_arms.contracts.evaluation import SimulatorRestart
    from mcu_arms.contracts.game_state import GameState
    from mcu_arms.contracts.simulators import BackendRequest
    from mcu_arms.contracts.skills import GameEvent, SkillOutcome, SkillRequest
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import EnvAction


@dataclass
class SimStep:
    """What one reset or step returns."""

    frame: np.ndarray | None  # HxWx3 uint8, what the agent sees; None when frames are off (Simulator.set_frames)
    counters: dict[str, dict[str, int]]  # cumulative event counters since reset
    done: bool = False  # the simulator itself ended the episode (max_steps is enforced by the loop, not here)
    info: dict[str, Any] = field(default_factory=dict)  # non-privileged extras for the step log (health, deaths)
    no_effect: list[str] = field(default_factory=list)  # inputs of this step the simulator could not carry out
    skill: SkillOutcome | None = None  # what the step's skill request came to (simulators that take skills)
    events: list[GameEvent] = field(default_factory=list)  # what the player felt since the previous step
    # A step that spans many game ticks (a skill): the cumulative counters after each tick on which something was
    # counted, in order, the last equal to `counters`. The scorer pays them tick by tick, as MineStudio's per-tick
    # RewardsCallback would over the same ticks; empty: the step is one tick, scored from `counters`.
    counter_ticks: list[dict[str, dict[str, int]]] = field(default_factory=list)


@dataclass(frozen=True)
class Recording:
    """A task's video as the simulator recorded it (what MCU grades), beside the agent's observation frames."""

    path: Path
    width: int
    height: int
    frames: int
    source: str  # who recorded it, and which frames


class SimulatorUnavailable(Exception):
    """The backend cannot start on this host; the message says what is missing and how to get it."""


class StateUnavailable(Exception):
    """The backend serves frames only: it cannot fill a GameState (contracts/game_state.py says why)."""


class Simulator(ABC):
    name: str  # its descriptor's name (contracts/simulators.py)
    accepts_skills = False  # takes skill requests (contracts/skills.py) beside env actions

    @classmethod
    def open(cls, request: BackendRequest) -> Simulator:
        """The backend for one evaluation, from the arm's choices its descriptor allowed (none by default)."""
        return cls()

    @classmethod  # noqa: B027 - an optional hook, a no-op unless a backend overrides it
    def warm_up(cls) -> None:
        """Pay once, while the green waits for its first request, the imports and first-call costs every episode on
        this backend would pay inside its first reset; it must leave nothing behind that an episode could see."""

    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def label(self) -> str:
        """How results are labelled, e.g. "embedded (Crafter 1.8.3): a Crafter analogue of MCU, not MCU scores"."""

    @abstractmethod
    def supports(self, task: TaskSpec) -> TaskSupport: ...

    @abstractmethod
    def reset_mode(self) -> ResetMode | str:
        """How each task is started: a catalog.ResetMode (a function of (seed, task) only), or how a backend that
        cannot make it so starts it (mineflayer: the server's world)."""

    def action_mode(self) -> ActionMode | None:
        """How actions are applied (catalog.ActionMode), for a backend that has the choice (MineStudio); None: env
        actions as they are."""
        return None

    @abstractmethod
    def reset(self, task: TaskSpec, seed: int) -> SimStep: ...

    @abstractmethod
    def step(self, action: EnvAction) -> SimStep: ...

    def act(self, skill: SkillRequest) -> SimStep:
        """Carry out one skill request to its end (only where `accepts_skills`)."""
        raise NotImplementedError(f"the {self.name} simulator takes env actions only")

    @abstractmethod
    def fallback_counts(self) -> dict[str, int]:
        """Inputs that had no effect or were approximated (e.g. {"camera": 812, "jump": 3}), deaths, etc."""

    def state(self) -> GameState:
        """What the player could know now, as structured state (only backends whose descriptor serves "state")."""
        raise StateUnavailable(f"the {self.name} simulator serves frames only")

    def set_frames(self, enabled: bool) -> None:  # noqa: B027 - an optional hook, a no-op unless a backend overrides it
        """Whether steps render a frame: an arm that observes the state alone and saves none needs none. A backend
        that always renders (MineStudio) keeps rendering."""

    def say(self, lines: list[str]) -> None:  # noqa: B027 - an optional hook, a no-op unless a backend overrides it
        """Post the agent's tagged chat lines in the game, where the simulator has a chat and the arm asks for it."""

    def world_seed(self, seed: int) -> tuple[int | None, str]:
        """The seed of the world the last reset made, or None and why it cannot be told."""
        return None, f"the {self.name} simulator does not say its world seed"

    def agent_instructions(self) -> str:
        """Plain words appended to the init prompt: how this simulator interprets the env action keys."""
        return ""

    def record_to(self, directory: Path | None) -> bool:
        """Record the render of the next task into `directory` (None: do not); False when this backend cannot, and
        video evaluation then grades the observation frames the step log saved."""
        return False

    def finish_recording(self) -> Recording | None:
        """The recording of the task that just ended, written out; None when there is none."""
        return None

    def restarts(self) -> list[SimulatorRestart]:
        """The instances replaced by the latest reset, because the one before had failed (none by default)."""
        return []

    @abstractmethod
    def close(self) -> None: ...
