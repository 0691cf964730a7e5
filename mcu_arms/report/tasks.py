"""The MCU task catalogue as a table: each task's scoring kind and, per simulator, whether it runs and what it
cannot observe there (each registered simulator's descriptor decides)."""

from __future__ import annotations

from pydantic import BaseModel

from mcu_arms.contracts.simulators import simulator_names, task_support
from mcu_arms.contracts.tasks import TaskSpec

SCORING_LABELS = {"reward": "reward_cfg", "milestones": "milestones", "video": "video only"}


class TaskRow(BaseModel):
    task: str
    category: str
    scoring: str  # a SCORING_LABELS value
    entries: int  # reward or milestone entries
    text: str
    runs_on: dict[str, bool]
    notes: dict[str, str] = {}  # per simulator: why not, or which entries (or objects) can never pay there, and why


def task_rows(tasks: list[TaskSpec], simulators: tuple[str, ...] | None = None) -> list[TaskRow]:
    """One row per task: whether each registered simulator runs it, with the notes of `simulators` (None: all)."""
    registered = simulator_names()
    noted = registered if simulators is None else simulators
    rows = []
    for task in tasks:
        runs_on: dict[str, bool] = {}
        notes: dict[str, str] = {}
        for simulator in registered:
            support = task_support(simulator, task)
            runs_on[simulator] = support.runnable
            note = support.reason if not support.runnable else "; ".join([*support.unavailable_text(), *support.notes])
            if note and simulator in noted:
                notes[simulator] = note
        rows.append(
            TaskRow(
                task=task.name,
                category=task.category,
                scoring=SCORING_LABELS[task.scoring_kind],
                entries=len(task.milestones or task.reward_cfg),
                text=task.text,
                runs_on=runs_on,
                notes=notes,
            )
        )
    return rows
