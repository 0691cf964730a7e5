"""The `mcu-arms` command line: this module only registers commands; each lives in its own module."""

from __future__ import annotations

from pathlib import Path

import typer

from mcu_arms import __version__
from mcu_arms.cli import (
    acceptance,
    codex_home,
    compare,
    doctor,
    evaluate,
    new,
    plan,
    report,
    run,
    run_episode,
    serve,
    status,
    tasks,
    view,
)
from mcu_arms.cli.common import App, environment
from mcu_arms.environment import ARMS_DIR_ENV, OUTPUT_DIR_ENV

app = App(
    name="mcu-arms",
    help="Run comparison arms of Minecraft agents on the MCU benchmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mcu-arms {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
    output_dir: Path | None = typer.Option(
        None, "--output-dir", help=f"Where runs are written and read [${OUTPUT_DIR_ENV} or output/]."
    ),
    arms_dir: Path | None = typer.Option(
        None,
        "--arms-dir",
        help=f"Where arm files are: --arm NAME, new NAME, plan with none named [${ARMS_DIR_ENV} or arms/].",
    ),
) -> None:
    """Run comparison arms of Minecraft agents on the MCU benchmark."""
    env = environment(ctx)
    env.output_root = output_dir or env.output_root
    env.arms_root = arms_dir or env.arms_root


for command_module in (
    plan,
    run,
    run_episode,
    compare,
    view,
    report,
    status,
    new,
    codex_home,
    doctor,
    acceptance,
    tasks,
    serve,
    evaluate,
):
    command_module.register(app)
