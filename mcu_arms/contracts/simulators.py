"""What each simulator is, as every layer asks it: one descriptor per simulator, in one lazy registry.

Planning, `doctor`, `tasks`, the scheduler, the comparison's labels and pairing, and the viewer ask a simulator's
descriptor what it serves, what it can score, what its arm-file table holds, what its preflight checks, what it costs
and how its world relates to the seed; none of them compares a simulator's name. The backend itself (a
green/sims/ module, or a third party's) is named here by import path and imported only when an episode runs.

The three built-in simulators are described here; another one registers through the entry point group
`mcu_arms.simulators` (its value: a SimulatorDescriptor) or `register_simulator`. Only pydantic and the standard
library: light to import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Literal

from pydantic import BaseModel

from mcu_arms.contracts.catalog import (
    ACTION_MODES,
    DEFAULT_ACTION_MODE,
    DEFAULT_RESET_MODE,
    RESET_MODES,
)
from mcu_arms.contracts.errors import UserError, did_you_mean
from mcu_arms.contracts.mineflayer import MineflayerServer
from mcu_arms.contracts.preflight import HostCheck
from mcu_arms.contracts.support import (
    TaskSupport,
    embedded_category_reason,
    embedded_support,
    mineflayer_support,
    minestudio_support,
)
from mcu_arms.contracts.tasks import TaskSpec

SIMULATOR_ENTRY_POINTS = "mcu_arms.simulators"

GB = 1024**3

# What a simulator can hand an arm: rendered frames, structured state (contracts/game_state.py), skills carried out
# to their end (contracts/skills.py), and a recording or frames that video evaluation can grade.
Serve = Literal["frames", "state", "skills", "video"]

# A preflight: (the green's environment, each arm's name -> its simulator table or None) -> the backend's own host
# checks, each with the arms it concerns.
Preflight = Callable[[Mapping[str, str], Mapping[str, BaseModel | None]], list[tuple[HostCheck, list[str]]]]


@dataclass(frozen=True)
class SimulatorCost:
    """What one episode on this simulator takes from the host it runs on, for scheduling and `doctor`."""

    cores: int = 1
    memory_bytes: int = GB // 2
    most_per_host: int | None = None  # a cap beyond cores and memory (None: none)
    private_display: bool = False  # each episode renders on an X display of its own (Xvfb)


@dataclass(frozen=True)
class BackendRequest:
    """What the green hands a backend's `open` classmethod: the arm's choices that reach the simulator."""

    obs_size: tuple[int, int]
    reset_mode: str | None
    action_mode: str | None
    table: BaseModel | None  # the arm's simulator table, validated by the descriptor's table_model


def _seed_is_the_world(reset_mode: str | None) -> str | None:
    return None


@dataclass(frozen=True)
class SimulatorDescriptor:
    """One simulator, as planning, doctor, tasks, the scheduler, reports and the viewer know it."""

    name: str
    label: str  # how comparisons and the viewer name its results when a run did not label them itself
    serves: frozenset[Serve]
    backend: str  # "module:Class" of a green/sims Simulator subclass, imported only when an episode runs
    supports: Callable[[TaskSpec], TaskSupport]  # which tasks, and which of their reward entries, it can score
    category_reason: Callable[[str], str | None] = lambda category: None  # why a whole category cannot run, or None
    # None when the world an episode plays is a function of its seed (for this reset mode), else why not: pairing by
    # seed removes the world's difficulty from the noise only where a seed is a world.
    world_from_seed: Callable[[str | None], str | None] = _seed_is_the_world
    reset_modes: tuple[str, ...] = ()  # the reset modes an arm may choose (empty: none to choose)
    default_reset_mode: str | None = None
    action_modes: tuple[str, ...] = ()  # the action modes an arm may choose (empty: env actions as they are)
    default_action_mode: str | None = None
    table: str | None = None  # the arm file's table for this simulator, e.g. [mineflayer]
    table_model: type[BaseModel] | None = None  # its validation
    preflight: str | None = None  # "module:function", a Preflight, imported only when doctor or a run checks
    cost: SimulatorCost = field(default_factory=SimulatorCost)
    python_modules: tuple[str, ...] = ()  # what its backend imports that is not always installed
    native_agents: frozenset[str] = frozenset()  # built-in agents that play this simulator only
    # the module of its first-run checklist on a real host (new_run_dir, run_acceptance, write_report), if it has one
    acceptance: str | None = None

    def serves_frames(self) -> bool:
        return "frames" in self.serves

    def serves_state(self) -> bool:
        return "state" in self.serves

    def resolved_reset(self, reset_mode: str | None) -> str | None:
        """How each task starts (unset: this simulator's default); None for a simulator with no choice."""
        return (reset_mode or self.default_reset_mode) if self.reset_modes else None

    def resolved_action_mode(self, action_mode: str | None) -> str | None:
        return (action_mode or self.default_action_mode) if self.action_modes else None

    def run_preflight(
        self, env: Mapping[str, str], arms: Mapping[str, BaseModel | None]
    ) -> list[tuple[HostCheck, list[str]]]:
        """This simulator's own host checks (the same a run makes), each with the arms it concerns."""
        if self.preflight is None:
            return []
        check: Preflight = _import(self.preflight, f"simulator '{self.name}' preflight")
        return check(env, arms)


def _import(path: str, what: str):  # noqa: ANN202 - whatever the path names
    module_name, _, attribute = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise UserError(f"{what} {path!r} cannot be imported: {error}") from None


def _minestudio_world(reset_mode: str | None) -> str | None:
    mode = reset_mode or DEFAULT_RESET_MODE
    return None if mode == "hard" else f'MineStudio with reset_mode = "{mode}" does not rebuild the world from the seed'


EMBEDDED = SimulatorDescriptor(
    name="embedded",
    label="embedded (Crafter): a Crafter analogue of MCU, not MCU scores",
    serves=frozenset({"frames", "state", "video"}),
    backend="mcu_arms.green.sims.crafter.embedded:EmbeddedSimulator",
    supports=embedded_support,
    category_reason=embedded_category_reason,
    preflight="mcu_arms.green.sims.crafter.embedded:preflight",
    cost=SimulatorCost(cores=1, memory_bytes=GB // 2),
    python_modules=("crafter",),
    native_agents=frozenset({"scripted"}),
)
MINESTUDIO = SimulatorDescriptor(
    name="minestudio",
    label="minestudio: MCU on Minecraft (MineStudio)",
    serves=frozenset({"frames", "video"}),
    backend="mcu_arms.green.sims.minestudio:MineStudioSimulator",
    supports=minestudio_support,
    world_from_seed=_minestudio_world,
    reset_modes=RESET_MODES,
    default_reset_mode=DEFAULT_RESET_MODE,
    action_modes=ACTION_MODES,
    default_action_mode=DEFAULT_ACTION_MODE,
    preflight="mcu_arms.green.sims.minestudio:preflight",
    # the JVM and the simulator process of one episode; at most three at once under Xvfb + llvmpipe (the seed's
    # measure), which render on the CPU
    cost=SimulatorCost(cores=1, memory_bytes=4 * GB, most_per_host=3, private_display=True),
    python_modules=("minestudio",),
    native_agents=frozenset({"steve1"}),
    acceptance="mcu_arms.acceptance.minestudio",
)
MINEFLAYER = SimulatorDescriptor(
    name="mineflayer",
    label="mineflayer: MCU on a user-provided Minecraft server, structured state; the world is the server's",
    serves=frozenset({"state", "skills"}),
    backend="mcu_arms.green.sims.mineflayer.backend:MineflayerSimulator",
    supports=mineflayer_support,
    world_from_seed=lambda reset_mode: "a Mineflayer world is the server's, whatever the seed",
    table="mineflayer",
    table_model=MineflayerServer,
    preflight="mcu_arms.green.sims.mineflayer.backend:preflight",
    cost=SimulatorCost(cores=1, memory_bytes=GB // 2),
)
BUILT_IN: tuple[SimulatorDescriptor, ...] = (MINESTUDIO, EMBEDDED, MINEFLAYER)

_registered: dict[str, SimulatorDescriptor] = {}
_from_entry_points: dict[str, SimulatorDescriptor] | None = None


def register_simulator(descriptor: SimulatorDescriptor) -> None:
    """Add a simulator for this process (entry points register one for every process)."""
    _registered[descriptor.name] = descriptor


def _entry_point_simulators() -> dict[str, SimulatorDescriptor]:
    """The simulators other distributions register, loaded once, on the first question; a broken one is named."""
    global _from_entry_points
    if _from_entry_points is None:
        found: dict[str, SimulatorDescriptor] = {}
        for point in entry_points(group=SIMULATOR_ENTRY_POINTS):
            try:
                descriptor = point.load()
            except Exception as error:  # noqa: BLE001 - a third party's import error, named to the user
                raise UserError(
                    f"the simulator entry point {point.name} = {point.value!r} cannot be loaded: {error}",
                    key=SIMULATOR_ENTRY_POINTS,
                ) from None
            if not isinstance(descriptor, SimulatorDescriptor) or descriptor.name != point.name:
                raise UserError(
                    f"the simulator entry point {point.name} = {point.value!r} is not a SimulatorDescriptor named "
                    f"{point.name!r}",
                    key=SIMULATOR_ENTRY_POINTS,
                )
            found[point.name] = descriptor
        _from_entry_points = found
    return _from_entry_points


def simulators() -> dict[str, SimulatorDescriptor]:
    """Every registered simulator by name: the built-in ones, then entry points', then this process's."""
    return {d.name: d for d in BUILT_IN} | _entry_point_simulators() | _registered


def simulator_names() -> tuple[str, ...]:
    return tuple(simulators())


def find_simulator(name: str) -> SimulatorDescriptor | None:
    """The descriptor of `name`, or None (a result written where another simulator was registered)."""
    return simulators().get(name)


def simulator_descriptor(name: str, *, key: str = "simulator") -> SimulatorDescriptor:
    """The descriptor of a registered simulator; an unknown name is a UserError listing the registered ones."""
    descriptor = find_simulator(name)
    if descriptor is None:
        names = simulator_names()
        raise UserError(f"unknown simulator '{name}'{did_you_mean(name, names)}", key=key, allowed=", ".join(names))
    return descriptor


def label_of(name: str) -> str:
    """How results of `name` are labelled when a run did not label them itself: its descriptor's label."""
    descriptor = find_simulator(name)
    return descriptor.label if descriptor is not None else name


def simulator_for_agent(agent: str) -> SimulatorDescriptor | None:
    """The one simulator a built-in agent plays (a Crafter script, a Minecraft policy), or None: any."""
    return next((d for d in simulators().values() if agent in d.native_agents), None)


def task_support(simulator: str, task: TaskSpec) -> TaskSupport:
    """Whether `simulator` (a registered one) can run and score `task`, and which of its entries it cannot observe."""
    return simulator_descriptor(simulator).supports(task)


def runnable_tasks(simulator: str, tasks: list[TaskSpec]) -> tuple[list[TaskSpec], dict[str, TaskSupport]]:
    """The tasks `simulator` can run, and every task's support (for the warnings and the skipped list)."""
    support = {task.name: task_support(simulator, task) for task in tasks}
    return [task for task in tasks if support[task.name].runnable], support


def import_backend(descriptor: SimulatorDescriptor):  # noqa: ANN201 - a green/sims Simulator subclass
    """The backend class, imported now: only the green calls this, when an episode runs."""
    return _import(descriptor.backend, f"simulator '{descriptor.name}' backend")
