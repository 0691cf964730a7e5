"""Which Policy serves which agent kind: the kind's descriptor (contracts/agents.py: the built-in agents and the
plug-ins, registered alike) names its factory, imported here only when that kind's server starts.

Light to import: the CLI validates a kind without loading any agent's dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcu_arms.contracts.agents import AgentDescriptor, agent_descriptor
from mcu_arms.contracts.catalog import A2A_AGENT
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions

if TYPE_CHECKING:
    from mcu_arms.purple.base import Policy


PolicyFactory = Callable[[PurpleOptions], "Policy"]


def _descriptor(kind: str) -> AgentDescriptor:
    descriptor = agent_descriptor(kind, key="--agent")
    if descriptor is None:
        raise UserError(
            f"agent '{A2A_AGENT}' is another program's A2A server, started by its own [purple] command: mcu-arms "
            "serves no policy for it",
            key="--agent",
        )
    return descriptor


def _import_factory(descriptor: AgentDescriptor) -> PolicyFactory:
    module_name, _, attribute = descriptor.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = descriptor.missing
        detail = f"{missing} ({error.name} not found)" if missing else f"{error.name} not found"
        raise UserError(f"agent kind '{descriptor.name}' cannot start: {detail}", key="--agent") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UserError(
            f"agent kind '{descriptor.name}': {descriptor.factory!r} is not a factory", key="--agent"
        ) from None
    return factory


def policy_factory(kind: str) -> PolicyFactory:
    """Resolve a kind to its factory, importing it now so that a missing piece fails at server start."""
    return _import_factory(_descriptor(kind))
