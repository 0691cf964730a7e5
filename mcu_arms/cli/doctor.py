"""`mcu-arms doctor`: a table of what this host has and what the arms need."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from mcu_arms.arms.campaign import select_arms
from mcu_arms.arms.spec import arm_files
from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.cli.options import with_placement
from mcu_arms.contracts.catalog import CODEX_AGENTS
from mcu_arms.contracts.settings import Overrides
from mcu_arms.contracts.slurm import Placement
from mcu_arms.doctor import run_doctor, slurm_checks
from mcu_arms.isolation.codex_home import default_root

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def register(app: typer.Typer) -> None:
    @app.command()
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
        doctor ...` checks one). Exit 1 if a check fails."""
        env = environment(ctx)
        paths = [path if path.is_absolute() else env.cwd / path for path in files or []] or arm_files(env.arms_dir)
        specs = list({spec.name: spec for spec, _ in select_arms(paths, Overrides(), env.arms_dir).specs}.values())
        report = run_doctor(specs, env.env)
        if placement.executor == "slurm":
            chosen = placement.slurm.partition
            partitions = {spec.name: chosen or spec.slurm.partition for spec in specs}
            roots = {
                spec.name: Path(spec.codex.root) if spec.codex.root else default_root(env.env)
                for spec in specs
                if spec.agent in CODEX_AGENTS
            }
            report.checks += slurm_checks(env.env, env.output_dir, partitions, roots)
        if json_output:
            print_json(env, report)
        else:
            table = Table(title=f"mcu-arms doctor ({len(specs)} arm(s))")
            for column in ("check", "status", "detail", "needed by"):
                table.add_column(column)
            for check in report.checks:
                table.add_row(
                    check.name,
                    f"[{STYLE[check.status]}]{check.status}[/]",
                    escape(check.detail),
                    ", ".join(check.needed_by),
                )
            env.console.print(table)
        if report.failed:
            raise typer.Exit(1)
