"""`mcu-arms doctor`: a table of what this host has and what the arms need."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from mcu_arms.arms.campaign import select_arms, select_readable_arms
from mcu_arms.arms.spec import arm_files
from mcu_arms.cli.common import environment, print_json, report_unreadable, reports_user_errors, show_groups
from mcu_arms.cli.options import with_placement
from mcu_arms.contracts.catalog import CODEX_AGENTS
from mcu_arms.contracts.settings import Overrides
from mcu_arms.contracts.slurm import Placement
from mcu_arms.doctor import (
    DoctorReport,
    asked_can_run,
    group_name,
    model_endpoints,
    readiness_groups,
    run_doctor,
    slurm_checks,
)
from mcu_arms.environment import Environment, fits
from mcu_arms.isolation.codex_home import default_root

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def show_checks(report: DoctorReport, arms: int, env: Environment) -> None:
    """What can run first, then every check: a table where it fits, else a check a paragraph, its detail wrapped
    on word boundaries (an install command is never cut)."""
    title = f"mcu-arms doctor ({arms} arm(s))"
    table = Table(title=title)
    for column in ("check", "status", "detail", "needed by"):
        table.add_column(column)
    for check in report.checks:
        table.add_row(
            check.name, f"[{STYLE[check.status]}]{check.status}[/]", escape(check.detail), ", ".join(check.needed_by)
        )
    show_groups(report.groups, env)
    if fits(env.console, table):
        env.console.print(table)
        return
    env.console.print(f"[bold]{title}[/]")
    for check in report.checks:
        env.console.print(
            f"[{STYLE[check.status]}]{check.status}[/] [bold]{escape(check.name)}[/] "
            f"[dim](needed by {escape(', '.join(check.needed_by))})[/]"
        )
        env.console.print(Padding(escape(check.detail), (0, 0, 0, 2), expand=False))


def register(app: typer.Typer) -> None:
    @app.command(short_help="Check this host for what the arms need, grouped by what can run here.")
    @reports_user_errors
    @with_placement
    def doctor(
        ctx: typer.Context,
        placement: Placement,
        files: list[Path] = typer.Argument(
            None, help="The arm or campaign files whose arms' needs are checked (default: every arm in arms/)."
        ),
        json_output: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    ) -> None:
        """Check this host for what the arms (of arm files, or of campaigns) need: JDK 8, Xvfb, the MineStudio
        engine, local disks for sqlite, node and the Minecraft server of mineflayer arms, codex and its credential,
        CUDA for steve1, and memory for the number of arms. With --executor slurm, also what submitting them from
        here needs: sbatch, squeue and scancel, the partition, sacct, the run directory and this mcu-arms on a
        filesystem the nodes share, codex homes on local disk (the rest must hold on the nodes: `srun mcu-arms
        doctor ...` checks one). Exit 1 when what was asked about cannot run: an arm named, or with none named, every
        arm of arms/."""
        env = environment(ctx)
        named = [path if path.is_absolute() else env.cwd / path for path in files or []]
        select = select_arms if named else select_readable_arms  # a bad file of arms/ is reported; the rest checked
        selection = select(named or arm_files(env.arms_dir), Overrides(), env.arms_dir)
        specs = list({spec.name: spec for spec, _ in selection.specs}.values())
        report = run_doctor(specs, env.variables)
        if placement.executor == "slurm":
            chosen = placement.slurm.partition
            partitions = {spec.name: chosen or spec.slurm.partition for spec in specs}
            roots = {
                spec.name: Path(spec.codex.root) if spec.codex.root else default_root(env.variables)
                for spec in specs
                if spec.agent in CODEX_AGENTS
            }
            report.checks += slurm_checks(env.variables, env.output_dir, partitions, roots)
        arms = [(spec.name, group_name(spec.simulator, spec.agent, bool(model_endpoints(spec)))) for spec in specs]
        report.groups = readiness_groups(arms, report.checks)
        if json_output:
            print_json(env, report)
        else:
            show_checks(report, len(specs), env)
        report_unreadable(selection, env)
        if not asked_can_run(report.groups, named=bool(named)) or (named and report.failed):
            raise typer.Exit(1)
