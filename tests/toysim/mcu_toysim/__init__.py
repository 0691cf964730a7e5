"""A toy fourth simulator, defined only under tests/: its descriptor, registered by the entry point beside it.

Its world is a seeded colour; every `attacks_per_pickup`-th `attack` (its arm-file table [toyworld]) picks up one of
each object the task's `pickup` entries name, and nothing else is ever counted (the other entries are unavailable, by
identity, with the reason).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from mcu_arms.api import GB, HostCheck, SimulatorCost, SimulatorDescriptor, TaskSpec, TaskSupport

NAME = "toyworld"
COUNTED_EVENT = "pickup"


class ToyWorldTable(BaseModel):
    """[toyworld] in an arm file: how the toy world plays."""

    model_config = ConfigDict(extra="forbid", strict=True)

    attacks_per_pickup: int = Field(
        default=1, ge=1, le=100, description="an integer from 1 to 100: the attacks that pick up one of each object"
    )


def toy_support(task: TaskSpec) -> TaskSupport:
    support = TaskSupport(runnable=True)
    entries = (*task.reward_cfg, *task.milestones)
    for entry in entries:
        if entry.event != COUNTED_EVENT:
            support.unavailable.append(entry.identity)
            support.reasons[entry.identity] = f"never pays: {NAME} counts '{COUNTED_EVENT}' events only"
    if len(support.unavailable) == len(entries):
        support.runnable = False
        support.reason = f"{NAME} can score nothing of task {task.name!r}: it counts '{COUNTED_EVENT}' events only"
    return support


def preflight(env: Mapping[str, str], arms: Mapping[str, BaseModel | None]) -> list[tuple[HostCheck, list[str]]]:
    return [
        (HostCheck(name=f"{NAME} engine", status="ok", detail="a colour and a counter: nothing to install"), list(arms))
    ]


TOYWORLD = SimulatorDescriptor(
    name=NAME,
    label=f"{NAME} (a toy world defined under tests/): not MCU scores",
    serves=frozenset({"frames"}),
    backend="mcu_toysim.backend:ToySimulator",
    supports=toy_support,
    table=NAME,
    table_model=ToyWorldTable,
    preflight="mcu_toysim:preflight",
    cost=SimulatorCost(cores=1, memory_bytes=GB // 8),
)
