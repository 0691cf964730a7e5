"""Live progress of one arm, fed by tailing the green's `<task>/steps.jsonl` files (only new bytes are read) and by
the green's status lines that the client prints. Cheap enough to poll twice a second for many arms.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Steps that make up the "recent" rate window, and how many step intervals the running median looks back on.
RATE_WINDOW_STEPS = 20
MEDIAN_HISTORY_STEPS = 2000
TASK_COUNT = re.compile(r"with (\d+) tasks?")


@dataclass
class StepSample:
    task: str
    step: int
    t: float
    noop_cause: str | None
    agent_ms: float | None
    events: list[dict[str, Any]]


class StepsTail:
    """Reads new complete lines from every `<green_dir>/<task>/steps.jsonl`, remembering its offset in each."""

    def __init__(self, green_dir: Path) -> None:
        self.green_dir = green_dir
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}

    def poll(self) -> list[StepSample]:
        samples: list[StepSample] = []
        if not self.green_dir.is_dir():
            return samples
        for path in sorted(self.green_dir.glob("*/steps.jsonl"), key=_mtime):
            samples += self._read_new(path)
        return samples

    def _read_new(self, path: Path) -> list[StepSample]:
        offset = self._offsets.get(path, 0)
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        except OSError:
            return []
        if not chunk:
            return []
        self._offsets[path] = offset + len(chunk)
        data = self._partial.pop(path, b"") + chunk
        lines = data.split(b"\n")
        if lines[-1]:
            self._partial[path] = lines[-1]
        samples = []
        for line in lines[:-1]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            samples.append(
                StepSample(
                    task=path.parent.name,
                    step=int(record.get("step", 0)),
                    t=float(record.get("t", 0.0)),
                    noop_cause=record.get("noop_cause"),
                    agent_ms=record.get("agent_ms"),
                    events=list(record.get("events") or []),
                )
            )
        return samples


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@dataclass
class ArmProgress:
    """What the live view shows for one arm; updated by the arm's own thread, read by the view."""

    arm: str
    max_steps: int
    state: str = "planning"
    task: str | None = None
    step: int = 0  # steps done in the current task
    tasks_total: int | None = None
    tasks_done: int = 0
    steps_total: int = 0  # over all tasks
    milestones: list[tuple[str, str, int]] = field(default_factory=list)  # (task, identity, step)
    noops: Counter[str] = field(default_factory=Counter)
    task_noops: int = 0
    timeouts_in_a_row: int = 0
    last_agent_ms: float | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    alerts: list[str] = field(default_factory=list)
    _times: deque[float] = field(default_factory=lambda: deque(maxlen=MEDIAN_HISTORY_STEPS + 1))

    def add_steps(self, samples: list[StepSample]) -> None:
        for sample in samples:
            if sample.task != self.task:
                if self.task is not None:
                    self.tasks_done += 1
                self.task, self.task_noops, self.timeouts_in_a_row = sample.task, 0, 0
                self._times.clear()
            self.step = sample.step + 1
            self.steps_total += 1
            self._times.append(sample.t)
            if sample.agent_ms is not None:
                self.last_agent_ms = sample.agent_ms
            if sample.noop_cause:
                self.noops[sample.noop_cause] += 1
                self.task_noops += 1
            self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if sample.noop_cause == "timeout" else 0
            for event in sample.events:
                self.milestones.append((sample.task, str(event.get("identity")), int(event.get("step", sample.step))))

    def add_client_line(self, line: str) -> None:
        """The green's streamed status says how many tasks the evaluation runs (for the ETA)."""
        if (match := TASK_COUNT.search(line)) and self.tasks_total is None:
            self.tasks_total = int(match.group(1))

    def elapsed_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def rate(self, window_steps: int = RATE_WINDOW_STEPS, now: float | None = None) -> tuple[float | None, float]:
        """(steps per minute, span in s) over the last `window_steps` steps of this task, measured up to now, so a
        stall lowers the rate at once instead of freezing it."""
        if len(self._times) < 2:
            return None, 0.0
        now = time.time() if now is None else now
        window = list(self._times)[-(window_steps + 1) :]
        span = max(now, window[-1]) - window[0]
        return (60.0 * (len(window) - 1) / span if span > 0 else None), span

    def steps_per_minute(self) -> float | None:
        return self.rate()[0]

    def median_steps_per_minute(self) -> float | None:
        """The running median rate of this task, from its step intervals."""
        if len(self._times) < RATE_WINDOW_STEPS + 1:
            return None
        times = list(self._times)
        median = statistics.median(b - a for a, b in zip(times, times[1:]))
        return 60.0 / median if median > 0 else None

    def eta_s(self) -> float | None:
        """Seconds to the end at the current rate, assuming every remaining task runs all its steps."""
        rate = self.steps_per_minute()
        if not rate or self.task is None:
            return None
        remaining = max(self.max_steps - self.step, 0)
        if self.tasks_total is not None:
            remaining += max(self.tasks_total - self.tasks_done - 1, 0) * self.max_steps
        return 60.0 * remaining / rate
