"""Live progress of one arm, fed by typed records only: the green's step logs (`<task>/steps.jsonl`, tailed for new
bytes) and its progress events (the episode's `events.jsonl`). Cheap enough to poll twice a second for many arms.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from mcu_arms.contracts.events import EvaluationStarted, EventRecord, InitFailed, TaskStarted
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES, ArmPhase
from mcu_arms.contracts.steps import STEPS_FILE, JsonlTail, StepProgress

# Steps that make up the "recent" rate window, and how many step intervals the running median looks back on.
RATE_WINDOW_STEPS = 20
MEDIAN_HISTORY_STEPS = 2000


@dataclass(frozen=True)
class StepSample:
    """One step of one task, as progress needs it."""

    task: str
    record: StepProgress


class StepsTail:
    """Reads the new complete records of every `<green_dir>/<task>/steps.jsonl`."""

    def __init__(self, green_dir: Path) -> None:
        self.green_dir = green_dir
        self._tails: dict[Path, JsonlTail[StepProgress]] = {}

    def poll(self) -> list[StepSample]:
        samples: list[StepSample] = []
        if not self.green_dir.is_dir():
            return samples
        for path in sorted(self.green_dir.glob(f"*/{STEPS_FILE}"), key=_mtime):
            tail = self._tails.setdefault(path, JsonlTail(path, StepProgress))
            samples += [StepSample(path.parent.name, record) for record in tail.poll()]
        return samples

    @property
    def invalid_lines(self) -> int:
        return sum(tail.invalid for tail in self._tails.values())


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@dataclass
class ArmProgress:
    """What the live view shows for one arm; updated by the arm's own thread only, read by the view."""

    arm: str  # the episode as named on screen (ArmPlan.label)
    max_steps: int
    tasks_total: int | None = None
    state: ArmPhase = "planning"
    grid: tuple[str, int] | None = None  # (arm, seed) of an arm that runs several seeds: its cell in the grid
    task: str | None = None
    step: int = 0  # steps done in the current task
    tasks_done: int = 0
    steps_total: int = 0  # over all tasks
    milestones: list[tuple[str, str, int]] = field(default_factory=list)  # (task, identity, step)
    milestones_total: int | None = None  # in the current task, from the green's events
    noops: Counter[str] = field(default_factory=Counter)
    task_noops: int = 0
    timeouts_in_a_row: int = 0
    infrastructure: Counter[str] = field(default_factory=Counter)  # noops by infrastructure cause, all tasks
    task_infrastructure: int = 0
    infrastructure_in_a_row: int = 0
    behaviour: Counter[str] = field(default_factory=Counter)  # invalid answers and inputs without effect
    no_effect_steps: int = 0
    milestone_entries: int | None = None  # of the current task, from its TaskStarted event
    milestones_reachable: int | None = None
    last_agent_ms: float | None = None
    init_failures: list[InitFailed] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    alerts: list[str] = field(default_factory=list)
    _times: deque[float] = field(default_factory=lambda: deque(maxlen=MEDIAN_HISTORY_STEPS + 1))

    def add_steps(self, samples: list[StepSample]) -> None:
        for sample in samples:
            record = sample.record
            if sample.task != self.task:
                if self.task is not None:
                    self.tasks_done += 1
                self.task, self.task_noops, self.timeouts_in_a_row = sample.task, 0, 0
                self.task_infrastructure = self.infrastructure_in_a_row = 0
                self._times.clear()
            self.step = record.step + 1
            self.steps_total += 1
            self._times.append(record.t)
            if record.agent_ms is not None:
                self.last_agent_ms = record.agent_ms
            if record.noop_cause:
                self.noops[record.noop_cause] += 1
                self.task_noops += 1
            if record.noop_cause in INFRASTRUCTURE_CAUSES:
                self.infrastructure[record.noop_cause] += 1
                self.task_infrastructure += 1
                self.infrastructure_in_a_row += 1
            else:
                self.infrastructure_in_a_row = 0
                if record.noop_cause:
                    self.behaviour[record.noop_cause] += 1
            if record.no_effect:
                self.no_effect_steps += 1
                self.behaviour.update(f"no_effect.{key}" for key in record.no_effect)
            self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if record.noop_cause == "timeout" else 0
            for event in record.events:
                self.milestones.append((sample.task, str(event.get("identity")), int(event.get("step", record.step))))

    def add_events(self, records: list[EventRecord]) -> None:
        for record in records:
            event = record.event
            if isinstance(event, EvaluationStarted):
                self.tasks_total = len(event.tasks)
            elif isinstance(event, TaskStarted):
                self.tasks_total = event.count
                self.milestone_entries, self.milestones_reachable = event.entries, event.reachable
            elif isinstance(event, InitFailed):
                self.init_failures.append(event)

    def elapsed_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def rate(self, window_steps: int = RATE_WINDOW_STEPS, now: float | None = None) -> tuple[float | None, float]:
        """(steps per minute, span in s) over the last `window_steps` steps of this task, measured up to now while it
        runs, so a stall lowers the rate at once instead of freezing it; once it ended, up to its last step (its pace
        does not decay while the view waits for other arms)."""
        if len(self._times) < 2:
            return None, 0.0
        window = list(self._times)[-(window_steps + 1) :]
        if self.finished is not None:
            now = window[-1]
        now = time.time() if now is None else now
        span = max(now, window[-1]) - window[0]
        return (60.0 * (len(window) - 1) / span if span > 0 else None), span

    def steps_per_minute(self) -> float | None:
        return self.rate()[0]

    def median_steps_per_minute(self) -> float | None:
        """The running median rate of this task, from its step intervals."""
        if len(self._times) < RATE_WINDOW_STEPS + 1:
            return None
        times = list(self._times)
        median = statistics.median(b - a for a, b in pairwise(times))
        return 60.0 / median if median > 0 else None

    def done_share(self) -> float:
        """The share of its steps this episode has done (all its tasks, each run to max_steps at most)."""
        tasks = self.tasks_total or 1
        return (
            min((self.tasks_done * self.max_steps + self.step) / (tasks * self.max_steps), 1.0)
            if self.max_steps
            else 0.0
        )

    def eta_s(self) -> float | None:
        """Seconds to the end at the current rate, assuming every remaining task runs all its steps."""
        rate = self.steps_per_minute()
        if not rate or self.task is None:
            return None
        remaining = max(self.max_steps - self.step, 0)
        if self.tasks_total is not None:
            remaining += max(self.tasks_total - self.tasks_done - 1, 0) * self.max_steps
        return 60.0 * remaining / rate
