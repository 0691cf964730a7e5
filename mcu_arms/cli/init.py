"""`mcu-arms init [DIR]`: start a research project (arms/init.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from mcu_arms.arms.init import init_project
from mcu_arms.cli.common import environment, print_json, reports_user_errors


def register(app: typer.Typer) -> None:
    @app.command()
    @reports_user_errors
    def init(
        ctx: typer.Context,
        directory: Path = typer.Argument(Path("."), help="The project folder (created if missing)."),
        json_output: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
    ) -> None:
        """Start a project: arms/ with the demo pair, campaigns/demo.toml, mcu-arms.toml and a .gitignore.

        Writes over nothing: if any of these files exists, nothing is written and the error names it.
        """
        env = environment(ctx)
        result = init_project(env.cwd / directory, str(directory))
        if json_output:
            print_json(env, result)
            return
        for name in result.written:
            env.console.print(f"wrote {env.shown(Path(result.project) / name)}", highlight=False, soft_wrap=True)
        env.console.print("next:", highlight=False)
        for command in result.next_commands:
            env.console.print(f"  {command}", highlight=False, soft_wrap=True)
