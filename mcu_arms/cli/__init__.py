"""The `mcu-arms` command line: this module only registers commands; each lives in its own module."""

from __future__ import annotations

import typer

from mcu_arms import __version__
from mcu_arms.cli import (
    codex_home,
    compare,
    doctor,
    evaluate,
    new,
    plan,
    report,
    run,
    serve,
    status,
    tasks,
    view,
)

app = typer.Typer(
    name="mcu-arms",
    help="Run comparison arms of Minecraft agents on the MCU benchmark.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mcu-arms {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run comparison arms of Minecraft agents on the MCU benchmark."""


for command_module in (plan, run, compare, view, report, status, new, codex_home, doctor, tasks, serve, evaluate):
    command_module.register(app)
