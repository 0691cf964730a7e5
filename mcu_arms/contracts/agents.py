"""Which agent kinds an arm may name: the built-in ones (catalog.AGENT_KINDS) and those other distributions register
through the entry point group `mcu_arms.agents` (its value: a factory, PurpleOptions -> Policy).

Only the names are read here (the entry points' metadata, nothing imported): the purple's registry
(purple/registry.py) loads an agent's factory when its server starts. Light to import.
"""

from __future__ import annotations

import functools
import sys
from importlib.metadata import EntryPoint, entry_points

from mcu_arms.contracts.catalog import A2A_AGENT, AGENT_KINDS
from mcu_arms.contracts.errors import UserError, did_you_mean

AGENT_ENTRY_POINTS = "mcu_arms.agents"


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
