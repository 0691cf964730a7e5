"""The agent registry: which agent kinds an arm may name, each by its descriptor. The built-in agents are registered
here exactly as a plug-in registers one through the entry point group `mcu_arms.agents` (its value: an
AgentDescriptor, or a bare factory PurpleOptions -> Policy).

A descriptor names its factory as "module:callable" (imported only when its purple server starts: the purple's
registry, purple/registry.py), the PurpleOptions fields its policy reads (its server's command line carries those
and no other agent's), and its own options table, `[agent_options]` in an arm file. Light to import: a plug-in's
entry point is loaded only where its descriptor is needed (an arm holding [agent_options]).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from pydantic import BaseModel

from mcu_arms.contracts.catalog import A2A_AGENT, AGENT_KINDS
from mcu_arms.contracts.errors import UserError, did_you_mean

AGENT_ENTRY_POINTS = "mcu_arms.agents"
# The options every agent's server is given: its seed, where it writes, how long the green waits for each action.
COMMON_OPTIONS: tuple[str, ...] = ("seed", "output_dir", "step_timeout")
CODEX_OPTIONS: tuple[str, ...] = (
    "session_turns",
    "compact_limit",
    "context_window",
    "model",
    "provider_base_url",
    "provider_wire_api",
    "provider_env_key",
)
PLANNED_OPTIONS: tuple[str, ...] = tuple(
    f"{model}_{key}"
    for model, keys in (
        ("planner", ("base_url", "model", "revision", "env_key", "timeout", "thinking")),
        ("policy", ("backend", "base_url", "model", "revision", "env_key", "timeout", "thinking")),
    )
    for key in keys
)
CODEX_MISSING = "the codex agents (mcu_arms/purple/codex_agent.py) are not in this build"


@dataclass(frozen=True)
class AgentDescriptor:
    """One agent kind, as planning and the purple server know it."""

    name: str
    factory: str  # "module:callable", the callable taking PurpleOptions and returning a Policy
    missing: str = ""  # what is missing when the factory's module cannot be imported
    options: tuple[str, ...] = ()  # the PurpleOptions fields it reads beyond COMMON_OPTIONS
    table: type[BaseModel] | None = None  # its own options table ([agent_options]); None: it takes none

    def option_fields(self) -> tuple[str, ...]:
        """The PurpleOptions fields its server's command line carries."""
        return (*COMMON_OPTIONS, *self.options, *(("agent_options",) if self.table is not None else ()))


BUILT_IN_AGENTS: dict[str, AgentDescriptor] = {
    descriptor.name: descriptor
    for descriptor in (
        AgentDescriptor("worldmodel", "mcu_arms.purple.codex_agent:make_worldmodel", CODEX_MISSING, CODEX_OPTIONS),
        AgentDescriptor("prolong", "mcu_arms.purple.codex_agent:make_prolong", CODEX_MISSING, CODEX_OPTIONS),
        AgentDescriptor(
            "steve1",
            "mcu_arms.purple.steve1:make_policy",
            "STEVE-1 needs the minestudio extra (pip install 'mcu-arms[minestudio]'), its weights and a CUDA device",
            ("cuda_device", "steve1_condition"),
        ),
        AgentDescriptor(
            "scripted",
            "mcu_arms.purple.scripted:make_policy",
            "the scripted policy (mcu_arms/purple/scripted.py) is not in this build",
        ),
        AgentDescriptor(
            "planned",
            "mcu_arms.purple.planned.agent:make_policy",
            "the planned agent (mcu_arms/purple/planned/) is not in this build",
            PLANNED_OPTIONS,
        ),
        AgentDescriptor("random", "mcu_arms.purple.baselines:make_random"),
        AgentDescriptor("noop", "mcu_arms.purple.baselines:make_noop"),
    )
}
assert tuple(BUILT_IN_AGENTS) == AGENT_KINDS, "catalog.AGENT_KINDS names the built-in agents, in this order"


@functools.lru_cache(maxsize=4)
def _registered_agents(search_path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    """The group's entry points as found on `search_path`: reading every distribution's metadata costs ~20 ms, and
    every arm file parsed asks, so it is read once per import path."""
    return tuple(entry_points(group=AGENT_ENTRY_POINTS))


def agent_entry_point(kind: str) -> EntryPoint | None:
    """The entry point registering `kind`, or None (a built-in kind, or none at all)."""
    return next((point for point in _registered_agents(tuple(sys.path)) if point.name == kind), None)


def agent_kinds() -> tuple[str, ...]:
    """Every kind an arm may name: the built-in ones, another program's A2A server, then the registered ones."""
    registered = sorted({point.name for point in _registered_agents(tuple(sys.path))} - {*AGENT_KINDS, A2A_AGENT})
    return (*AGENT_KINDS, A2A_AGENT, *registered)


def check_agent_kind(kind: str, *, key: str = "agent") -> str:
    """`kind` when an arm may name it, else a UserError listing the kinds that are."""
    kinds = agent_kinds()
    if kind not in kinds:
        raise UserError(f"unknown agent kind '{kind}'{did_you_mean(kind, kinds)}", key=key, allowed=", ".join(kinds))
    return kind


def agent_descriptor(kind: str, *, key: str = "agent") -> AgentDescriptor | None:
    """The descriptor of `kind`: a built-in one, or a plug-in's (its entry point loaded now: an AgentDescriptor, or
    a bare factory, which reads the common options only). None for another program's A2A server."""
    if kind in BUILT_IN_AGENTS:
        return BUILT_IN_AGENTS[kind]
    if kind == A2A_AGENT:
        return None
    point = agent_entry_point(kind)
    if point is None:
        check_agent_kind(kind, key=key)
        raise UserError(f"agent kind '{kind}' is not registered", key=key)
    try:
        value = point.load()
    except Exception as error:  # noqa: BLE001 - a third party's import error, named to the user
        raise UserError(
            f"agent kind '{kind}' cannot start: its entry point {point.value!r} cannot be loaded: {error}", key=key
        ) from None
    if isinstance(value, AgentDescriptor):
        return value
    if not callable(value):
        raise UserError(f"agent kind '{kind}': its entry point {point.value!r} is not a factory", key=key)
    return AgentDescriptor(kind, point.value)


def option_fields(kind: str) -> tuple[str, ...]:
    """The PurpleOptions fields the server of `kind` is given: a built-in agent's without loading anything; a
    plug-in's are the common ones, and its options table where it declares one."""
    if kind in BUILT_IN_AGENTS:
        return BUILT_IN_AGENTS[kind].option_fields()
    return (*COMMON_OPTIONS, "agent_options")
