"""Preparing arms for a run: their ports checked and held, their CODEX_HOMEs built, their episode dirs created."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from mcu_arms.arms.plan import ArmPlan, prepare_episode
from mcu_arms.environment import Environment
from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation.codex_home import STEPS_PER_TURN, CodexHome, build_codex_home
from mcu_arms.isolation.ports import PortRegistry


@contextmanager
def held_ports(plans: list[ArmPlan], env: Environment) -> Iterator[None]:
    """Check every arm's ports and reserve them for as long as the block runs. Busy → UserError, nothing killed."""
    registry = PortRegistry(env.env)
    with ExitStack() as stack:
        for plan in plans:
            stack.enter_context(
                registry.reserve(
                    plan.host,
                    {plan.green_port: f"arm '{plan.arm}' green", plan.purple_port: f"arm '{plan.arm}' purple"},
                    owner=plan.arm,
                )
            )
        yield


def build_home_for(plan: ArmPlan, env: Environment) -> CodexHome | None:
    if not plan.codex_home:
        return None
    try:
        return build_codex_home(
            plan.arm,
            Path(plan.codex_home).parent,
            Path(plan.codex_auth or ""),
            env.env,
            env.clock(),
            expected_turns=plan.settings.steps // STEPS_PER_TURN,
        )
    except UserError as error:  # point at the arm file whose [codex] settings to fix
        raise UserError(error.message, path=error.path or plan.source, key=error.key, allowed=error.allowed) from None


def prepare_arm(plan: ArmPlan, env: Environment) -> tuple[ArmPlan, CodexHome | None]:
    """Build the arm's codex home (if any) and create its episode dir with plan.json and scenario.toml."""
    home = build_home_for(plan, env)
    if home is not None:
        for action in home.actions:
            env.err_console.print(f"[dim]{plan.arm}: codex home: {action}[/]")
        plan = plan.model_copy(update={"warnings": plan.warnings + home.warnings})
    return prepare_episode(plan), home


def prepare_arms(plans: list[ArmPlan], env: Environment) -> list[ArmPlan]:
    """What `plan` (without --dry-run) does: check ports, then prepare each arm."""
    with held_ports(plans, env):
        pass
    return [prepare_arm(plan, env)[0] for plan in plans]
