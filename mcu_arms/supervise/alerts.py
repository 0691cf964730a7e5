"""Silent degradation made loud while an arm runs.

The failures that cost this project most raised no error: steps that quietly became noops, and an agent whose
session payload grew until each step took ten times longer. Each check here turns one of them into an alert line,
raised once per cause and task, shown in the live view, printed in the run's output and kept in report.alerts.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

from mcu_arms.supervise.progress import ArmProgress

NOOP_FRACTION = 0.05
NOOP_MIN_STEPS = 20
TIMEOUTS_IN_A_ROW = 3
SLOWDOWN_FACTOR = 3.0
SLOWDOWN_WINDOW_STEPS = 5
SLOWDOWN_MIN_SPAN_S = 10.0
PAYLOAD_GROWTH_REPORTS = 3
PAYLOAD_LIMIT_MB = 5.0
PAYLOAD_MB = re.compile(r"payload\D{0,40}?([0-9]+(?:\.[0-9]+)?)\s*MB", re.IGNORECASE)

AlertSink = Callable[[str], None]


class AlertMonitor:
    """Watches one arm's progress, its purple's log lines and its purple's report; raises each alert once."""

    def __init__(self, progress: ArmProgress, purple_dir: Path, sink: AlertSink) -> None:
        self.progress = progress
        self.purple_dir = purple_dir
        self.sink = sink
        self._raised: set[str] = set()
        self._payloads: list[float] = []
        self._report_mtimes: dict[Path, float] = {}
        self._report_warnings: set[str] = set()
        self._lock = threading.Lock()  # log reader threads raise alerts too

    def _raise(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._raised:
                return
            self._raised.add(key)
            self.progress.alerts.append(message)
        self.sink(message)

    def check_progress(self, now: float | None = None) -> None:
        progress, task = self.progress, self.progress.task
        if task is None:
            return
        if progress.step >= NOOP_MIN_STEPS and progress.task_noops > NOOP_FRACTION * progress.step:
            causes = ", ".join(f"{cause} {count}" for cause, count in progress.noops.most_common())
            self._raise(
                f"noops:{task}",
                f"{task}: {progress.task_noops} of {progress.step} steps were noops "
                f"(> {NOOP_FRACTION:.0%}; by cause so far: {causes})",
            )
        if progress.timeouts_in_a_row >= TIMEOUTS_IN_A_ROW:
            self._raise(
                f"timeouts:{task}",
                f"{task}: {progress.timeouts_in_a_row} agent timeouts in a row at step {progress.step} "
                "(each became a noop)",
            )
        median = progress.median_steps_per_minute()
        recent, span = progress.rate(SLOWDOWN_WINDOW_STEPS, now)
        if median and recent is not None and span >= SLOWDOWN_MIN_SPAN_S and recent < median / SLOWDOWN_FACTOR:
            self._raise(
                f"slowdown:{task}",
                f"{task}: {recent:.2f} steps/min over the last {SLOWDOWN_WINDOW_STEPS} steps at step "
                f"{progress.step}, below 1/{SLOWDOWN_FACTOR:g} of its running median {median:.2f} steps/min "
                "(slow without any error)",
            )

    def purple_line(self, line: str) -> None:
        """A purple log line; codex agents log their request payload in MB on lines that say 'payload'."""
        match = PAYLOAD_MB.search(line)
        if not match:
            return
        size = float(match.group(1))
        self._payloads.append(size)
        recent = self._payloads[-(PAYLOAD_GROWTH_REPORTS + 1) :]
        growing = len(recent) > PAYLOAD_GROWTH_REPORTS and all(b > a for a, b in zip(recent, recent[1:]))
        if growing:
            trail = " -> ".join(f"{value:g}" for value in recent)
            self._raise("payload:growing", f"purple session payload keeps growing: {trail} MB")
        if size >= PAYLOAD_LIMIT_MB:
            self._raise(
                "payload:limit",
                f"purple session payload reached {size:g} MB (past ~{PAYLOAD_LIMIT_MB:g} MB a turn takes ~600 s)",
            )

    def check_purple_reports(self) -> None:
        """New `warnings` in E/purple/*_report.json (re-read only when a file changed)."""
        if not self.purple_dir.is_dir():
            return
        for path in sorted(self.purple_dir.glob("*_report.json")):
            try:
                mtime = path.stat().st_mtime
                if self._report_mtimes.get(path) == mtime:
                    continue
                self._report_mtimes[path] = mtime
                warnings = json.loads(path.read_text(encoding="utf-8")).get("warnings") or []
            except (OSError, ValueError, AttributeError):
                continue
            for warning in warnings:
                text = str(warning)
                if text not in self._report_warnings:
                    self._report_warnings.add(text)
                    self._raise(f"report:{path.name}:{text}", f"purple {path.name}: {text}")

    def client_line(self, line: str) -> None:
        if "init failed" in line:
            self._raise(f"init:{line}", f"client: {line.strip()}")
