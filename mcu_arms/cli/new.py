"""`mcu-arms new NAME`: a new arm file from the commented template."""

from __future__ import annotations

from pathlib import Path

import typer

from mcu_arms.arms.template import new_arm_file
from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.contracts.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command()
    @reports_user_errors
    def new(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Arm name; the file is arms/NAME.toml."),
        agent: str | None = typer.Option(None, help="Agent kind."),
        task: str | None = typer.Option(None, help="Task category."),
        simulator: str | None = typer.Option(
            None, help="A built-in simulator (embedded, minestudio, mineflayer) or a plug-in's name."
        ),
        from_arm: str | None = typer.Option(
            None, "--from", help="Copy another arm's settings: its name (as for --arm) or its file."
        ),
        from_scenario: Path | None = typer.Option(
            None, "--from-scenario", help="An AgentBeats scenario.toml: one participant becomes the arm's purple table."
        ),
        participant: str | None = typer.Option(
            None, "--participant", help="The scenario participant's role (needed when it has several)."
        ),
        green_port: int | None = typer.Option(None, help="A fixed green port (default: auto)."),
        purple_port: int | None = typer.Option(None, help="A fixed purple port (default: auto)."),
    ) -> None:
        """Write arms/NAME.toml from templates/arm.toml, comments kept. Never overwrites an existing arm.

        Each setting is written where the template explains it. Ports are "auto" (free ones are picked at plan time), in a copy made with --from too, so that the copy runs beside its source; --green-port and --purple-port fix them.
        """  # noqa: E501 - typer keeps a help paragraph's line breaks, so each paragraph is one line
        env = environment(ctx)
        scenario = None
        unmapped: list[str] = []
        if from_scenario is not None:
            from mcu_arms.arms.from_scenario import scenario_values

            source = from_scenario if from_scenario.is_absolute() else env.cwd / from_scenario
            scenario, unmapped = scenario_values(source, participant)
        elif participant is not None:
            raise UserError("--participant names a participant of --from-scenario", key="--participant")
        path = new_arm_file(
            env,
            name,
            agent=agent,
            task=task,
            simulator=simulator,
            from_arm=from_arm,
            green_port=green_port,
            purple_port=purple_port,
            scenario=scenario,
        )
        for line in unmapped:
            env.console.print(f"not mapped: {line}", highlight=False, soft_wrap=True)
        env.console.print(
            f"wrote {env.shown(path)}; check it with: mcu-arms plan --dry-run {env.shown(path)}",
            highlight=False,
            soft_wrap=True,
        )
