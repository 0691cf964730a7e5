"""`mcu-arms tasks [CATEGORY]`: the MCU tasks, how each is scored, and which simulators run it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.contracts.simulators import simulator_descriptor, simulator_names
from mcu_arms.contracts.tasks import all_tasks, load_category, tasks_root
from mcu_arms.environment import fits
from mcu_arms.report.tasks import task_rows


def register(app: typer.Typer) -> None:
    @app.command("tasks")
    @reports_user_errors
    def tasks_command(
        ctx: typer.Context,
        category: Annotated[str | None, typer.Argument(help="Only this category.")] = None,
        simulator: Annotated[
            str | None,
            typer.Option(help="Notes for this simulator only (why a task cannot run, what it cannot observe)."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """List MCU tasks with their scoring kind and the simulators that run them."""
        env = environment(ctx)
        if simulator is not None:
            simulator_descriptor(simulator, key="--simulator")
        registered = simulator_names()
        root = tasks_root(env=env.variables)
        if category is None:
            tasks = [task for group in all_tasks(root).values() for task in group]
        else:
            tasks = load_category(category, root)
        rows = task_rows(tasks, (simulator,) if simulator else None)
        if as_json:
            print_json(env, rows)
            return
        table = Table(title=f"MCU tasks ({len(rows)})")
        for column in ("category", "task", "scoring", *registered):
            table.add_column(column, no_wrap=True)
        table.add_column("notes", overflow="fold")
        for row in rows:
            table.add_row(
                row.category,
                row.task,
                f"{row.scoring} ({row.entries})" if row.entries else row.scoring,
                *("yes" if row.runs_on[simulator] else "no" for simulator in registered),
                "; ".join(f"{sim}: {note}" for sim, note in row.notes.items()),
            )
        if fits(env.console, table) or not rows:
            env.console.print(table)
            return
        env.console.print(f"[bold]MCU tasks ({len(rows)})[/]")  # too narrow: a task a paragraph, its name whole
        for row in rows:
            runs = [simulator for simulator in registered if row.runs_on[simulator]]
            scoring = f"{row.scoring} ({row.entries})" if row.entries else row.scoring
            env.console.print(
                f"[bold]{escape(row.task)}[/] [dim]{escape(row.category)}; {escape(scoring)}; "
                f"runs on {', '.join(runs) or 'none'}[/]"
            )
            for simulator, note in row.notes.items():
                env.console.print(Padding(escape(f"{simulator}: {note}"), (0, 0, 0, 2), expand=False))
