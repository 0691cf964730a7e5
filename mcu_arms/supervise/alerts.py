"""Silent degradation made loud while an arm runs.

The failures that cost this project most raised no error: steps that quietly became noops, and an agent whose
session payload grew until each step took ten times longer. Each check here turns one of them into an alert line,
raised once per cause and task, shown in the live view, printed in the run's output and kept in report.alerts.
Every check reads typed records (the progress, the purple's own report), never a log line.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from mcu_arms.contracts.agent_report import AGENT_REPORT_SUFFIX, AgentReport, read_agent_report
from mcu_arms.contracts.settings import PAYLOAD_WALL_BYTES
from mcu_arms.supervise.progress import ArmProgress

NOOP_FRACTION = 0.05
NOOP_MIN_STEPS = 20
TIMEOUTS_IN_A_ROW = 3
SLOWDOWN_FACTOR = 3.0
SLOWDOWN_WINDOW_STEPS = 5
SLOWDOWN_MIN_SPAN_S = 10.0
PAYLOAD_GROWTH_TURNS = 3
MB = 1_000_000

AlertSink = Callable[[str], None]


class AlertMonitor:
    """Watches one arm's progress and its purple's report; raises each alert once. Called by the arm's thread."""

    def __init__(self, progress: ArmProgress, purple_dir: Path, sink: AlertSink) -> None:
        self.progress = progress
        self.purple_dir = purple_dir
        self.sink = sink
        self._raised: set[str] = set()
        self._report_mtimes: dict[Path, float] = {}
        self._init_failures_seen = 0

    def _raise(self, key: str, message: str) -> None:
        if key in self._raised:
            return
        self._raised.add(key)
        self.progress.alerts.append(message)
        self.sink(message)

    def check_progress(self, now: float | None = None) -> None:
        progress = self.progress
        for failure in progress.init_failures[self._init_failures_seen :]:
            self._raise(f"init:{failure.task}", f"client: {failure.text()}")
        self._init_failures_seen = len(progress.init_failures)
        task = progress.task
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

    def check_purple_reports(self) -> None:
        """New warnings and payload growth in E/purple/*_report.json (re-read only when a file changed)."""
        if not self.purple_dir.is_dir():
            return
        for path in sorted(self.purple_dir.glob(f"*{AGENT_REPORT_SUFFIX}")):
            try:
                mtime = path.stat().st_mtime
                if self._report_mtimes.get(path) == mtime:
                    continue
                self._report_mtimes[path] = mtime
                report = read_agent_report(path)
            except (OSError, ValueError):
                continue
            if isinstance(report, AgentReport):
                self._check_payloads(report)
            for warning in getattr(report, "warnings", []):
                self._raise(f"report:{path.name}:{warning}", f"purple {path.name}: {warning}")

    def _check_payloads(self, report: AgentReport) -> None:
        """Each turn's request size: a session that keeps growing, or one past the measured ~5 MB wall."""
        for episode in report.episodes:
            sizes = [record.payload_bytes for record in episode.turn_records]
            recent = sizes[-(PAYLOAD_GROWTH_TURNS + 1) :]
            if len(recent) > PAYLOAD_GROWTH_TURNS and all(b > a for a, b in pairwise(recent)):
                trail = " -> ".join(f"{size / MB:.2f}" for size in recent)
                self._raise("payload:growing", f"purple session payload keeps growing: {trail} MB")
            if sizes and max(sizes) >= PAYLOAD_WALL_BYTES:
                self._raise(
                    "payload:limit",
                    f"purple session payload reached {max(sizes) / MB:.2f} MB (past ~{PAYLOAD_WALL_BYTES / MB:g} MB "
                    "a turn takes ~600 s)",
                )
