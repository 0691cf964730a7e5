"""`mcu-arms acceptance SIMULATOR`: the first-run checklist of a simulator's host (its descriptor names the module:
MineStudio has one), with a report of what it proved."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

import typer
from rich.markup import escape

from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.simulators import simulator_descriptor, simulators

STYLE = {"passed": "green", "stand-in": "cyan", "skipped": "yellow", "failed": "bold red"}


def register(app: typer.Typer) -> None:
    @app.command(short_help="Run the first-run checklist on the real MineStudio engine (a few minutes).")
    @reports_user_errors
    def acceptance(
        ctx: typer.Context,
        simulator: str = typer.Argument(
            ..., help="The simulator whose host is checked (one whose descriptor names an acceptance checklist)."
        ),
        out: Path = typer.Option(
            None, "--out", help="Where the run's folder (report.json, report.txt, recording/) goes [output/acceptance]."
        ),
        json_output: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Run the first-run checklist on the real engine (a few minutes, four engine launches; needs the engine, a GPU
        for STEVE-1, OPENAI_API_KEY to grade video): the green's import; a raw smoke run (image shape, info keys,
        statistic names, camera sign); two seeded hard resets giving the same first frame; a killed engine replaced
        with nothing left running; a seeded_fast landing; STEVE-1 offline with same-seed actions; a video graded at
        MCU's 640x360. Each check passed, failed or skipped with its evidence; on the test stand-in the engine
        checks say "stand-in". Exit 1 if a check failed."""
        descriptor = simulator_descriptor(simulator, key="SIMULATOR")
        if descriptor.acceptance is None:
            having = [d.name for d in simulators().values() if d.acceptance is not None]
            raise UserError(
                f"the {simulator} simulator has no acceptance checklist", key="SIMULATOR", allowed=", ".join(having)
            )
        checklist = importlib.import_module(descriptor.acceptance)
        env = environment(ctx)
        run_dir = checklist.new_run_dir(out or env.output_dir / "acceptance")
        with contextlib.redirect_stdout(sys.stderr):  # MineStudio prints every callback at each reset
            report = checklist.run_acceptance(env.variables, run_dir)
        json_path, text_path = checklist.write_report(report, run_dir)
        if json_output:
            print_json(env, report)
        else:
            for check in report.checks:
                env.console.print(
                    f"[{STYLE[check.status]}]{check.status:9}[/] {escape(check.name)} ({check.seconds} s)"
                )
                for line in check.evidence:
                    env.console.print(f"          {escape(line)}", highlight=False)
            env.console.print(f"report: {json_path} and {text_path}")
        if report.failed:
            raise typer.Exit(1)
