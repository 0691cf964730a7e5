"""`mcu-arms new NAME`: a new arm file from the commented template."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mcu_arms.arms.template import new_arm_file
from mcu_arms.cli.common import environment, reports_user_errors


def register(app: typer.Typer) -> None:
    @app.command()
    @reports_user_errors
    def new(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Arm name; the file is arms/NAME.toml."),
        agent: Optional[str] = typer.Option(None, help="Agent kind."),
        task: Optional[str] = typer.Option(None, help="Task category."),
        simulator: Optional[str] = typer.Option(None, help="minestudio or embedded."),
        from_arm: Optional[Path] = typer.Option(None, "--from", help="Copy another arm file's settings."),
    ) -> None:
        """Write arms/NAME.toml from templates/arm.toml, comments kept. Never overwrites an existing arm."""
        env = environment(ctx)
        path = new_arm_file(env, name, agent=agent, task=task, simulator=simulator, from_arm=from_arm)
        env.console.print(f"wrote {path}; check it with: mcu-arms plan --dry-run {path}")
