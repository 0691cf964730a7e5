"""Which agent kinds an arm may name: the built-in ones (catalog.AGENT_KINDS) and those other distributions register
through the entry point group `mcu_arms.agents` (its value: a factory, PurpleOptions -> Policy).

Only the names are read here (the entry points' metadata, nothing imported): the purple's registry
(purple/registry.py) loads an agent's factory when its server starts. Light to import.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from mcu_arms.contracts.catalog import AGENT_KINDS
from mcu_arms.contracts.errors import UserError, did_you_mean

AGENT_ENTRY_POINTS = "mcu_arms.agents"


def agent_entry_point(kind: str) -> EntryPoint | None:
    """The entry point registering `kind`, or None (a built-in kind, or none at all)."""
    return next(iter(entry_points(group=AGENT_ENTRY_POINTS, name=kind)), None)


def agent_kinds() -> tuple[str, ...]:
    """Every kind an arm may name: the built-in ones, then the registered ones."""
    registered = sorted({point.name for point in entry_points(group=AGENT_ENTRY_POINTS)} - set(AGENT_KINDS))
    return (*AGENT_KINDS, *registered)


def check_agent_kind(kind: str, *, key: str = "agent") -> str:
    """`kind` when an arm may name it, else a UserError listing the kinds that are."""
    kinds = agent_kinds()
    if kind not in kinds:
        raise UserError(f"unknown agent kind '{kind}'{did_you_mean(kind, kinds)}", key=key, allowed=", ".join(kinds))
    return kind
