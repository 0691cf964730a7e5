"""The `mcu-arms` command line: this module only names the commands; each lives in its own module, imported only when
that command runs (or when `--help` or shell completion lists them all), so that starting one command — the three
processes of every episode among them — never pays for importing every other."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import typer

from mcu_arms import __version__
from mcu_arms.cli.common import App, Group, environment
from mcu_arms.collector import imports_without_gc
from mcu_arms.environment import ARMS_DIR_ENV, OUTPUT_DIR_ENV

# Each command by name, in the order `--help` lists them, with the module (mcu_arms.cli.MODULE) whose `register`
# defines it.
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
    "merge-shards": "merge_shards",
}


def command_module(name: str) -> str:
    return f"mcu_arms.cli.{COMMAND_MODULES[name]}"


class LazyGroup(Group):
    """The root group: a command's module is imported the first time that command is looked up."""

    def list_commands(self, ctx: Any) -> list[str]:  # typer's own click: duck-typed
        return [*COMMAND_MODULES, *(name for name in super().list_commands(ctx) if name not in COMMAND_MODULES)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            with imports_without_gc():
                module = importlib.import_module(command_module(cmd_name))
            defined = App()
            module.register(defined)
            self.commands.update(typer.main.get_group(defined).commands)
        return self.commands.get(cmd_name)


app = App(
    name="mcu-arms",
    help="Run comparison arms of Minecraft agents on the MCU benchmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
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
