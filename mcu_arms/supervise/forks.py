"""The run's fork server (forkserver.py): what it imports, when it starts, what it warms up."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Literal

from mcu_arms.forkserver import ForkRefused, ForkServer
from mcu_arms.procs import OWNER_TOKEN_ENV, inherited_environment

if TYPE_CHECKING:
    from mcu_arms.contracts.settings import ArmPlan
    from mcu_arms.environment import Environment
    from mcu_arms.supervise.live import View

# What the children's commands (serve green, serve purple, evaluate) import, imported once by the run's fork server.
FORKED_COMMAND_MODULES = (
    "mcu_arms.entry",
    "mcu_arms.cli",
    "mcu_arms.cli.serve",
    "mcu_arms.cli.evaluate",
    "mcu_arms.green.server",
    "mcu_arms.purple.server",
    "mcu_arms.client.evaluate",
)
# Called by the fork server with each simulator and each agent kind the run's arms use, so that every green and
# purple it forks starts warm (the backend imported and a world built; the agent's module imported).
SIMULATOR_WARM_UP = "mcu_arms.green.server:warm_up_simulator"
AGENT_WARM_UP = "mcu_arms.purple.registry:warm_up_agent"
# Called before the first fork: the TLS settings and the async backend every A2A client of a child uses, and what
# uvicorn imports to serve.
ALWAYS_WARM_UP = (
    ("mcu_arms.a2a_client:tls_context", "the A2A clients' TLS settings"),
    ("mcu_arms.a2a_client:warm_up_async_http", "the A2A clients' async backend"),
    ("mcu_arms.a2a_transport:warm_up_serving", "the servers' HTTP stack"),
)
FORK_SERVER_LABEL = "fork server"


def warm_template(plans: list[ArmPlan], env: Environment, view: View) -> ForkServer | None:
    """The run's fork server with what its children use warmed up first (their clients' TLS settings, uvicorn's
    serving stack, the arms' simulators and agents), so that every green and purple it forks starts warm; None
    (every child started by exec) where it cannot start, which the view says."""
    try:
        forks = ForkServer.start(
            inherited_environment(env.env), str(env.cwd), OWNER_TOKEN_ENV, uuid.uuid4().hex, FORKED_COMMAND_MODULES
        )
    except ForkRefused as error:
        view.line(FORK_SERVER_LABEL, f"children start by exec: {error}")
        return None
    calls: list[tuple[str, tuple[str, ...], str]] = [(function, (), what) for function, what in ALWAYS_WARM_UP]
    calls += [(SIMULATOR_WARM_UP, (name,), f"simulator '{name}'") for name in _used(plans, "simulator")]
    calls += [(AGENT_WARM_UP, (kind,), f"agent '{kind}'") for kind in _used(plans, "agent")]
    for function, args, what in calls:
        try:
            forks.warm_up(function, *args)
        except ForkRefused as error:
            view.line(FORK_SERVER_LABEL, f"{what} not warmed up ({error}): each child warms its own")
    return forks


def _used(plans: list[ArmPlan], setting: Literal["simulator", "agent"]) -> list[str]:
    return sorted({getattr(plan.settings, setting) for plan in plans})
