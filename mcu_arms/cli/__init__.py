"""The `mcu-arms` command line: this module only registers commands; each lives in its own module.

`mcu-arms CMD ...` imports CMD's module alone (`app_for`): importing every command's core costs about a second, more
than a refused plan's whole work. `app` (every command) is built when first asked for: help, tests, completion.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from mcu_arms import __version__
from mcu_arms.cli.common import App, environment
from mcu_arms.environment import ARMS_DIR_ENV, OUTPUT_DIR_ENV

# Each command's name, and the module of mcu_arms.cli that registers it (in the order help lists them).
COMMAND_MODULES: dict[str, str] = {
    "plan": "plan",
    "run": "run",
    "run-episode": "run_episode",
    "compare": "compare",
    "view": "view",
    "report": "report",
    "status": "status",
    "stop": "status",
    "new": "new",
    "codex-home": "codex_home",
    "doctor": "doctor",
    "acceptance": "acceptance",
    "tasks": "tasks",
    "serve": "serve",
    "evaluate": "evaluate",
}
EVERY_MODULE = list(dict.fromkeys(COMMAND_MODULES.values()))
# The root's options that take a value: the command named is the first argument that is neither one nor a value.
ROOT_VALUE_OPTIONS = ("--output-dir", "--arms-dir")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mcu-arms {__version__}")
        raise typer.Exit()


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


def build_app(modules: Sequence[str]) -> App:
    """The CLI with the commands of `modules` registered."""
    built = App(
        name="mcu-arms",
        help="Run comparison arms of Minecraft agents on the MCU benchmark.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    built.callback()(_root)
    for module in modules:
        importlib.import_module(f"mcu_arms.cli.{module}").register(built)
    return built


def named_command(args: Sequence[str]) -> str | None:
    """The command `args` name (after the root's options), or None when they name none we know."""
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in ROOT_VALUE_OPTIONS:
            skip_value = True
        elif not arg.startswith("-"):
            return arg if arg in COMMAND_MODULES else None
    return None


def app_for(args: Sequence[str]) -> App:
    """The CLI that runs `args`: the named command's module alone, or every command (help, a mistyped name)."""
    command = named_command(args)
    return build_app([COMMAND_MODULES[command]] if command else EVERY_MODULE)


_full_app: App | None = None


def __getattr__(name: str) -> Any:
    """`app`, every command registered, built on first use."""
    global _full_app
    if name != "app":
        raise AttributeError(name)
    if _full_app is None:
        _full_app = build_app(EVERY_MODULE)
    return _full_app
