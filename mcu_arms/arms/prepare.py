"""Preparing arms for a run: each arm held by one mcu-arms at a time, their ports checked and held, their CODEX_HOMEs
built, their episode dirs created."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from mcu_arms.arms.plan import scenario_toml
from mcu_arms.atomic import write_json_atomic, write_text_atomic
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.environment import Environment
from mcu_arms.isolation.codex_home import STEPS_PER_TURN, CodexHome, build_codex_home
from mcu_arms.isolation.locks import held_exclusively
from mcu_arms.isolation.ports import PortRegistry
from mcu_arms.layout import STATE_DIR_ENV, arm_lock, create_run_dir, prepared_state_dir


@contextmanager
def held_arms(plans: list[ArmPlan], env: Environment) -> Iterator[None]:
    """Hold each arm for this process for as long as the block runs: the same arm started twice at the same instant
    gets one run, and the other a clear refusal (the kernel drops the hold if this process dies). Replicates of one
    arm are one hold."""
    with ExitStack() as stack:
        for plan in {plan.arm: plan for plan in plans}.values():
            lock = arm_lock(env.variables, env.output_dir / plan.arm)
            prepared_state_dir(lock.parent)

            def refused(holder: str, plan: ArmPlan = plan) -> UserError:
                return UserError(
                    f"arm '{plan.arm}' is being prepared or run by another mcu-arms ({holder}); see `mcu-arms status "
                    f"--arm {plan.arm}`, or stop it with `mcu-arms stop --arm {plan.arm}`",
                    path=plan.source,
                )

            stack.enter_context(held_exclusively(lock, refused=refused, key=STATE_DIR_ENV))
        yield


@contextmanager
def held_ports(plans: list[ArmPlan], env: Environment) -> Iterator[None]:
    """Check every episode's ports and reserve them for as long as the block runs (replicates of one arm may share
    fixed ports: they run one after another). Busy → UserError, nothing killed."""
    registry = PortRegistry(env.variables)
    by_host: dict[str, dict[int, str]] = {}
    owners: dict[str, str] = {}
    for plan in plans:
        ports = by_host.setdefault(plan.host, {})
        for process in plan.processes:  # a purple reached at its url listens there: none of this arm's ports
            if process.port is not None:
                ports.setdefault(process.port, f"arm '{plan.arm}' {process.role}")
        owners.setdefault(plan.host, ", ".join(dict.fromkeys(p.arm for p in plans if p.host == plan.host)))
    with ExitStack() as stack:
        for host, ports in by_host.items():
            stack.enter_context(registry.reserve(host, ports, owner=owners[host]))
        yield


def build_home_for(plan: ArmPlan, env: Environment) -> CodexHome | None:
    if not plan.codex_home:
        return None
    try:
        return build_codex_home(
            Path(plan.codex_home).name,
            Path(plan.codex_home).parent,
            Path(plan.codex_auth or ""),
            env.variables,
            env.clock(),
            expected_turns=plan.settings.steps // STEPS_PER_TURN,
        )
    except UserError as error:  # point at the arm file whose [codex] settings to fix
        raise error.at(path=error.path or plan.source) from None


def prepare_episode(plan: ArmPlan) -> ArmPlan:
    """Create the episode dir (never an existing one) and write plan.json and scenario.toml into it.

    If another process took the planned number meanwhile, the next free number is used and the plan's paths follow.
    """
    planned = Path(plan.episode_dir)
    run_dir = create_run_dir(planned.parent, plan.episode)
    if run_dir.path != planned:
        renumbered = plan.model_dump_json().replace(str(planned), str(run_dir.path))
        plan = ArmPlan.model_validate_json(renumbered).model_copy(update={"episode": run_dir.number})
    write_json_atomic(run_dir.plan, plan.public())
    write_text_atomic(run_dir.scenario, scenario_toml(plan))
    return plan


def prepare_arm(plan: ArmPlan, env: Environment) -> tuple[ArmPlan, CodexHome | None]:
    """Build the arm's codex home (if any) and create its episode dir with plan.json and scenario.toml."""
    home = build_home_for(plan, env)
    if home is not None:
        for action in home.actions:
            env.err_console.print(f"[dim]{plan.arm}: codex home: {action}[/]")
        plan = plan.model_copy(update={"warnings": plan.warnings + home.warnings})
    return prepare_episode(plan), home


def prepare_hosts(plans: list[ArmPlan], env: Environment) -> list[ArmPlan]:
    """What `plan` (without --dry-run) does: hold the arms, check the ports are free now and build each codex arm's
    home. No episode directory is made: only `run` makes one, so every episode under output/ is a run."""
    with held_arms(plans, env):
        with held_ports(plans, env):
            pass
        prepared = []
        for plan in plans:
            home = build_home_for(plan, env)
            prepared.append(plan.model_copy(update={"warnings": plan.warnings + home.warnings}) if home else plan)
        return prepared
