"""`mcu-arms plan`: resolve arms into plans and show them; without --dry-run, prepare their episode dirs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mcu_arms.arms.campaign import Selection, select_arms
from mcu_arms.arms.plan import plan_specs, resolve_sources
from mcu_arms.arms.spec import arm_files
from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.cli.options import with_overrides, with_placement
from mcu_arms.contracts.settings import ArmPlan, Overrides
from mcu_arms.contracts.slurm import Placement
from mcu_arms.contracts.timestamps import file_stamp
from mcu_arms.doctor import preflight, slurm_preflight
from mcu_arms.environment import Environment
from mcu_arms.supervise.reruns import RerunDecision


def _arm_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion for --arm: the arms in the arms dir."""
    return [path.stem for path in arm_files(environment(ctx).arms_dir) if path.stem.startswith(incomplete)]


FILES_ARGUMENT = typer.Argument(None, help="Arm files (arms/NAME.toml).")
ARM_OPTION = typer.Option([], "--arm", help="Arm by name: arms/NAME.toml. Repeatable.", autocompletion=_arm_names)
DRY_RUN_OPTION = typer.Option(False, "--dry-run", help="Show the plans and touch nothing.")


def _short(text: str, env: Environment) -> str:
    """Paths relative to the project and the interpreter as `python`, for reading; the plan keeps them whole."""
    return text.replace(sys.executable, "python").replace(str(env.cwd) + "/", "")


def render_plan(plan: ArmPlan, env: Environment) -> None:
    settings = Table.grid(padding=(0, 2))
    settings.add_column(style="bold")
    settings.add_column()
    for key, value in plan.settings.redacted().model_dump().items():
        if value is None or (key == "env" and not value):
            continue
        shown = ", ".join(f"{k}=***" for k in value) if key == "env" else value
        mark = " [yellow](override)[/]" if key in plan.overrides else ""
        settings.add_row(key, f"{shown}{mark}")
    settings.add_row("compaction", plan.compaction.explanation)
    settings.add_row("fingerprint", plan.fingerprint)
    ports = f"{plan.host}: green {plan.green_port}, purple {plan.purple_port}"
    if plan.ports_auto:
        ports += f" (auto: {', '.join(plan.ports_auto)})"
        if plan.slurm is not None:
            ports = f"{plan.host}: {', '.join(plan.ports_auto)} picked on the node when the episode starts"
    settings.add_row("ports", ports)
    if plan.slurm is not None:
        settings.add_row("executor", f"slurm: {escape(plan.slurm.shown())}")
    settings.add_row("episode dir", _short(plan.episode_dir, env))
    if plan.codex_home:
        built = "; built on the node's own disk" if plan.slurm is not None else ""
        settings.add_row("CODEX_HOME", f"{plan.codex_home} (sqlite: {plan.sqlite_dir}{built})")
        settings.add_row("credential", f"{plan.codex_auth} (symlinked, never copied)")

    processes = Table.grid(padding=(0, 1))
    processes.add_column(style="bold cyan")
    processes.add_column()
    for process in plan.processes:
        processes.add_row(process.role, f"$ {_short(process.command_line(), env)}")
        for key, value in process.redacted_env().items():
            processes.add_row("", f"[dim]env[/] {key}={value}")
        processes.add_row("", f"[dim]log[/] {_short(process.log, env)}")
    links = Table.grid(padding=(0, 1))
    links.add_column()
    for link, target in plan.links.items():
        links.add_row(f"[dim]{_short(link, env)} -> {_short(target, env)}[/]")

    parts: list = [settings, "", processes, "", links]
    for warning in plan.warnings:
        parts.append(f"[yellow]warning:[/] {escape(warning)}")
    for problem in plan.blocked:
        parts.append(f"[bold red]cannot run here:[/] {escape(problem)}")
    title = f"arm [bold]{plan.arm}[/] ({plan.source})"
    env.console.print(Panel(Group(*parts), title=title, title_align="left", expand=False))


def planned(
    files: list[Path],
    arm_names: list[str],
    overrides: Overrides,
    env: Environment,
    placement: Placement | None = None,
    *,
    every_arm_when_none: bool = False,
) -> tuple[list[ArmPlan], Selection]:
    """The episodes to run for what was named (arm files, `--arm`, campaign files; with none and
    `every_arm_when_none`, every arm in arms/), each with what stops it here for the plan to show and `run` to
    refuse: doctor's failed checks of this host, or for Slurm the failed checks of what submitting from here needs
    (what the episode needs is checked on its node)."""
    sources = resolve_sources(files, arm_names, env, every_arm_when_none=every_arm_when_none)
    selection = select_arms(sources, overrides, env.arms_dir)
    tags = selection.campaign_tags(f"{file_stamp(env.clock())}-{os.getpid()}")
    plans = [plan.model_copy(update={"campaign": tags.get(plan.arm)}) for plan in plan_specs(selection.specs, overrides, env, placement)]
    if placement is not None and placement.executor == "slurm":
        partitions = {plan.arm: plan.slurm.partition for plan in plans if plan.slurm is not None}
        roots = {plan.arm: Path(plan.codex_home).parent for plan in plans if plan.codex_home}
        blocked = slurm_preflight(env.env, env.output_dir, partitions, roots)
    else:
        blocked = preflight([spec for spec, _ in selection.specs], env.env)
    return [plan.model_copy(update={"blocked": blocked.get(plan.arm, [])}) for plan in plans], selection


def show_plans(
    plans: list[ArmPlan],
    env: Environment,
    *,
    dry_run: bool,
    json_output: bool,
    decisions: dict[str, RerunDecision] | None = None,
) -> None:
    """The plans; for `run --dry-run` also what run would do with each arm (run, skip as finished, retry)."""
    if json_output:
        shown: dict = {"dry_run": dry_run, "plans": [p.public() for p in plans]}
        if decisions is not None:
            shown["decisions"] = {arm: {"action": d.action, "message": d.message} for arm, d in decisions.items()}
        print_json(env, shown)
        return
    for arm_plan in plans:
        render_plan(arm_plan, env)
    for arm, decision in (decisions or {}).items():
        blocked = next(plan.blocked for plan in plans if plan.label == arm)
        action = "refuse (this host cannot run it)" if blocked else decision.action
        env.console.print(f"[bold]{escape(arm)}[/]: would {action}" + (f" — {escape(decision.message)}" if decision.message else ""))
    if dry_run:
        env.console.print("[bold]dry run:[/] nothing was created, reserved or started.")


def register(app: typer.Typer) -> None:
    @app.command()
    @reports_user_errors
    @with_overrides
    @with_placement
    def plan(
        ctx: typer.Context,
        overrides: Overrides,
        placement: Placement,
        files: list[Path] = FILES_ARGUMENT,
        arm: list[str] = ARM_OPTION,
        dry_run: bool = DRY_RUN_OPTION,
        json_output: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
    ) -> None:
        """Resolve arms into plans: commands, environment, ports, paths, fingerprint and warnings.

        With no arm named, every arm in arms/. Without --dry-run it also checks that the ports are free now and builds each codex agent's CODEX_HOME (on Slurm both happen on the node, when each episode starts); only `run` creates episode dirs.
        """
        env = environment(ctx)
        plans, _ = planned(files or [], arm, overrides, env, placement, every_arm_when_none=True)
        on_nodes = placement.executor == "slurm"
        if not dry_run and not on_nodes:
            from mcu_arms.arms.prepare import prepare_hosts

            plans = prepare_hosts(plans, env)
        show_plans(plans, env, dry_run=dry_run or on_nodes, json_output=json_output)
        if not dry_run and not json_output and on_nodes:
            env.console.print(
                f"planned {len(plans)} arm(s) for Slurm: ports and codex homes are made on each episode's node when it "
                "starts; `mcu-arms run --executor slurm` submits them."
            )
        elif not dry_run and not json_output:
            env.console.print(
                f"prepared {len(plans)} arm(s): ports free now, codex homes built; `mcu-arms run` creates the episode."
            )
