"""`mcu-arms tasks [CATEGORY]`: the MCU tasks, how each is scored, and which simulators run it."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import BaseModel
from rich.table import Table

from mcu_arms.contracts import catalog
from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.tasks import TaskSpec, all_tasks, load_category, tasks_root

SCORING_LABELS = {"reward": "reward_cfg", "milestones": "milestones", "video": "video only"}


class TaskRow(BaseModel):
    task: str
    category: str
    scoring: str  # reward_cfg | milestones | video only
    entries: int  # reward or milestone entries
    text: str
    runs_on: dict[str, bool]
    notes: dict[str, str] = {}  # per simulator: why not, or which entries have no analogue there


def _embedded_support(tasks: list[TaskSpec]) -> dict[str, tuple[bool, str]]:
    """Exact per-task support from the embedded backend; imported only when asked for (it pulls in crafter)."""
    try:
        from mcu_arms.green.sims.embedded import EmbeddedSimulator
    except ImportError as error:
        raise UserError(f"the embedded simulator cannot be loaded: {error}", key="--simulator") from None
    simulator = EmbeddedSimulator()
    support: dict[str, tuple[bool, str]] = {}
    try:
        for task in tasks:
            result = simulator.supports(task)
            note = result.reason if not result.runnable else ""
            if result.runnable and result.unavailable:
                note = "no analogue for: " + ", ".join(result.unavailable)
            support[task.name] = (result.runnable, note)
    finally:
        simulator.close()
    return support


def task_rows(tasks: list[TaskSpec], simulator: str | None) -> list[TaskRow]:
    exact = _embedded_support(tasks) if simulator == "embedded" else {}
    rows = []
    for task in tasks:
        notes: dict[str, str] = {}
        embedded_runs = task.category in catalog.EMBEDDED_CATEGORIES
        if task.name in exact:
            embedded_runs, note = exact[task.name]
            if note:
                notes["embedded"] = note
        rows.append(
            TaskRow(
                task=task.name,
                category=task.category,
                scoring=SCORING_LABELS[task.scoring_kind],
                entries=len(task.milestones or task.reward_cfg),
                text=task.text,
                runs_on={"minestudio": True, "embedded": embedded_runs},
                notes=notes,
            )
        )
    return rows


def register(app: typer.Typer) -> None:
    @app.command("tasks")
    @reports_user_errors
    def tasks_command(
        ctx: typer.Context,
        category: Annotated[str | None, typer.Argument(help="Only this category.")] = None,
        simulator: Annotated[
            str | None,
            typer.Option(help="Check exact per-task support on this simulator (embedded loads Crafter)."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """List MCU tasks with their scoring kind and the simulators that run them."""
        env = environment(ctx)
        if simulator is not None and simulator not in catalog.SIMULATORS:
            raise UserError(
                f"unknown simulator '{simulator}'", key="--simulator", allowed=", ".join(catalog.SIMULATORS)
            )
        root = tasks_root(env=env.env)
        if category is None:
            tasks = [task for group in all_tasks(root).values() for task in group]
        else:
            tasks = load_category(category, root)
        rows = task_rows(tasks, simulator)
        if as_json:
            print_json(env, rows)
            return
        table = Table(title=f"MCU tasks ({len(rows)})")
        for column in ("category", "task", "scoring", "minestudio", "embedded"):
            table.add_column(column, no_wrap=True)
        table.add_column("notes", overflow="fold")
        for row in rows:
            table.add_row(
                row.category,
                row.task,
                f"{row.scoring} ({row.entries})" if row.entries else row.scoring,
                "yes" if row.runs_on["minestudio"] else "no",
                "yes" if row.runs_on["embedded"] else "no",
                "; ".join(f"{sim}: {note}" for sim, note in row.notes.items()),
            )
        env.console.print(table)
        if simulator != "embedded":
            env.console.print(
                "embedded = category has a Crafter analogue; `--simulator embedded` checks each task exactly."
            )
