"""The `mcu-arms` command line: this module only names the commands; each lives in its own module, imported only when
that command runs (or when `--help` or shell completion lists them all), so that starting one command — the three
processes of every episode among them — never pays for importing every other."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from mcu_arms.cli.common import EXIT_USER_ERROR, App, Group, environment
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.project import find_project
from mcu_arms.environment import ARMS_DIR_ENV, OUTPUT_DIR_ENV
from mcu_arms.process.collector import imports_without_gc

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
    "init": "init",
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
        from mcu_arms.version import tool_identity

        typer.echo(f"mcu-arms {tool_identity().describe()}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
    output_dir: Path | None = typer.Option(
        None,
        "--output-dir",
        help=f"Where runs are written and read [${OUTPUT_DIR_ENV}, the project's output_dir, or output/].",
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
    if env.project is None and ctx.invoked_subcommand != "init":  # init makes a project: none above it applies
        try:
            env.project = find_project(env.cwd)
        except UserError as error:
            env.err_console.print(f"[bold red]error:[/] {escape(error.render())}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USER_ERROR) from None
        # the variables it sets (state_dir, codex_root) where the environment sets none: the environment wins
        defaults = env.project.environment_defaults() if env.project is not None else {}
        env.set_by_project = frozenset(variable for variable in defaults if not env.variables.get(variable))
        env.variables = {**env.variables, **{variable: defaults[variable] for variable in env.set_by_project}}
