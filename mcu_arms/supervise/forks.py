"""The run's fork server (forkserver.py): what it imports, when it starts, what it warms up.

Light (the standard library, psutil and the process layer's fork server): the entry point starts a `run`'s template
from here before the CLI imports, so that the template's imports overlap the supervisor's own and its plan.
"""

from __future__ import annotations

import atexit
import os
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from mcu_arms.child_env import OWNER_TOKEN_ENV, inherited_environment
from mcu_arms.forkserver import ForkRefused, ForkServer

if TYPE_CHECKING:
    from mcu_arms.contracts.settings import ArmPlan
    from mcu_arms.environment import Environment
    from mcu_arms.supervise.live import View

# What the children's commands (serve green, serve purple, evaluate) import, imported once by the run's fork server;
# the green's scoring modules too, which it imports only once an evaluation starts (~15 ms of every green's episode).
FORKED_COMMAND_MODULES = (
    "mcu_arms.entry",
    "mcu_arms.cli",
    "mcu_arms.cli.serve",
    "mcu_arms.cli.evaluate",
    "mcu_arms.green.server",
    "mcu_arms.green.scoring",
    "mcu_arms.green.video_eval",
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


# The template the entry point started for this process's `run` (at most one), with the environment and directory it
# was started for; taken by the run's supervision, discarded at exit where nothing took it.
_early: list[tuple[ForkServer, dict[str, str], str]] = []


def start_early_template() -> None:
    """The fork server of the `run` this process is about to make, started now (see the module's docstring)."""
    base_env, cwd = inherited_environment(os.environ), os.getcwd()
    try:
        forks = _start_template(base_env, cwd)
    except ForkRefused:
        return  # the run starts one later where it needs one, and says why not if it cannot
    _early.append((forks, base_env, cwd))
    atexit.register(discard_early_template)


def _start_template(base_env: dict[str, str], cwd: str) -> ForkServer:
    """A template for children built on `base_env` in `cwd`, with a fresh token; ForkRefused where it cannot start."""
    return ForkServer.start(base_env, cwd, OWNER_TOKEN_ENV, uuid.uuid4().hex, FORKED_COMMAND_MODULES)


def _take_early(env: Mapping[str, str], cwd: str) -> ForkServer | None:
    """The early template, if one was started for this environment and directory (else it is discarded)."""
    if not _early:
        return None
    forks, base_env, started_in = _early.pop()
    if base_env == inherited_environment(env) and started_in == cwd:
        return forks
    forks.discard()
    return None


def discard_early_template() -> None:
    """Where the run will not fork here (its episodes are Slurm jobs), or at exit where nothing took it."""
    while _early:
        _early.pop()[0].discard()


def warm_template(plans: list[ArmPlan], env: Environment, view: View) -> ForkServer | None:
    """The run's fork server; None (every child started by exec) where it cannot start, which the view says, or for a
    single episode without the template the entry point started early (a template started now would only add its
    imports to the episode's). For several episodes, what their children use is warmed up first (their clients' TLS
    settings and async backend, uvicorn's serving stack, the arms' simulators and agents), so that every green and
    purple it forks starts warm; a single episode is forked at once, its green warming its own simulator."""
    forks = _take_early(env.env, str(env.cwd))
    if forks is None and len(plans) < 2:
        return None
    if forks is None:
        try:
            forks = _start_template(inherited_environment(env.env), str(env.cwd))
        except ForkRefused as error:
            view.line(FORK_SERVER_LABEL, f"children start by exec: {error}")
            return None
    if len(plans) < 2:
        return forks
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
