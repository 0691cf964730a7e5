"""Which Policy class serves which agent kind, imported only when that kind is asked for: the built-in kinds here,
the others through the entry point group `mcu_arms.agents` (contracts/agents.py).

Light to import: the CLI validates a kind without loading any agent's dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcu_arms.contracts.agents import agent_entry_point, check_agent_kind
from mcu_arms.contracts.catalog import A2A_AGENT, AGENT_KINDS
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions

if TYPE_CHECKING:
    from mcu_arms.purple.base import Policy


PolicyFactory = Callable[[PurpleOptions], "Policy"]

# kind -> (module, what is missing when that module cannot be imported)
_MODULES: dict[str, tuple[str, str]] = {
    "noop": ("mcu_arms.purple.baselines", ""),
    "random": ("mcu_arms.purple.baselines", ""),
    "scripted": ("mcu_arms.purple.scripted", "the scripted policy (mcu_arms/purple/scripted.py) is not in this build"),
    "planned": ("mcu_arms.purple.planned.agent", "the planned agent (mcu_arms/purple/planned/) is not in this build"),
    "worldmodel": (
        "mcu_arms.purple.codex_agent",
        "the codex agents (mcu_arms/purple/codex_agent.py) are not in this build",
    ),
    "prolong": (
        "mcu_arms.purple.codex_agent",
        "the codex agents (mcu_arms/purple/codex_agent.py) are not in this build",
    ),
    "steve1": (
        "mcu_arms.purple.steve1",
        "STEVE-1 needs the minestudio extra (pip install 'mcu-arms[minestudio]'), its weights and a CUDA device",
    ),
}


def _import_agent_module(kind: str):  # a module object
    module_name, missing = _MODULES[kind]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        detail = f"{missing} ({error.name} not found)" if missing else f"{error.name} not found"
        raise UserError(f"agent kind '{kind}' cannot start: {detail}", key="--agent") from None


def _registered_factory(kind: str) -> PolicyFactory:
    """The factory another distribution registers for `kind` (entry point group mcu_arms.agents), loaded now."""
    if kind == A2A_AGENT:
        raise UserError(
            f"agent '{A2A_AGENT}' is another program's A2A server, started by its own [purple] command: mcu-arms "
            "serves no policy for it",
            key="--agent",
        )
    point = agent_entry_point(kind)
    if point is None:
        check_agent_kind(kind, key="--agent")
        raise UserError(f"agent kind '{kind}' is not registered", key="--agent")
    try:
        factory = point.load()
    except Exception as error:  # noqa: BLE001 - a third party's import error, named to the user
        raise UserError(
            f"agent kind '{kind}' cannot start: its entry point {point.value!r} cannot be loaded: {error}",
            key="--agent",
        ) from None
    if not callable(factory):
        raise UserError(f"agent kind '{kind}': its entry point {point.value!r} is not a factory", key="--agent")
    return factory


def warm_up_agent(kind: str) -> None:
    """Import `kind`'s module and run its `warm_up()` where it has one (a module-level function taking nothing): the
    fork server's call, so that a purple it forks starts warm. A registered kind is only loaded; another program's
    A2A server is nothing of ours to warm."""
    if kind == A2A_AGENT:
        return
    if kind not in AGENT_KINDS:
        _registered_factory(kind)
        return
    warm_up = getattr(_import_agent_module(kind), "warm_up", None)
    if callable(warm_up):
        warm_up()


def policy_factory(kind: str) -> PolicyFactory:
    """Resolve a kind to a constructor, importing its module now so that a missing piece fails at server start."""
    if kind not in AGENT_KINDS:
        return _registered_factory(kind)
    module = _import_agent_module(kind)
    if kind == "noop":
        return lambda options: module.NoopPolicy()
    if kind == "random":
        return lambda options: module.RandomPolicy(seed=options.seed)
    if kind == "scripted":
        return lambda options: module.ScriptedPolicy(seed=options.seed, output_dir=options.output_dir)
    if kind == "steve1":
        return lambda options: module.Steve1Policy(options)
    if kind == "planned":
        return lambda options: module.PlannedPolicy(options)
    return lambda options: module.CodexPolicy(kind, options)
