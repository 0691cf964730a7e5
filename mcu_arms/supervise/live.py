"""Watching arms run: a rich Live table (one row per arm, ~2 refreshes a second) on a terminal, and plain
timestamped lines (on every state change and alert, and a progress line every N seconds) everywhere else.

Both read the ArmProgress objects the arm threads update; neither touches the processes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from mcu_arms.contracts.states import NO_EFFECT_LABEL, NO_EFFECT_PREFIX
from mcu_arms.contracts.text import MAX_LOG_LINE_CHARS, MAX_REASON_CHARS, shown_text
from mcu_arms.contracts.timestamps import log_stamp, terminal_stamp
from mcu_arms.environment import fits
from mcu_arms.supervise.progress import ArmProgress

REFRESH_PER_SECOND = 2
STATE_STYLES = {
    "planning": "dim",
    "queued": "dim",
    "starting": "yellow",
    "ready": "cyan",
    "running": "bold cyan",
    "finished": "green",
    "failed": "bold red",
    "interrupted": "magenta",
}


class View(Protocol):
    def line(self, arm: str, text: str, *, alert: bool = False) -> None: ...

    def refresh(self, arms: Sequence[ArmProgress], summary: str | None = None) -> None: ...

    def close(self, arms: Sequence[ArmProgress]) -> None: ...


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _milestones(progress: ArmProgress) -> str:
    """Every milestone reached in the current task, with a count against the task's total (and what this simulator
    can reach at all, when that is less)."""
    reached = [(identity, step) for task, identity, step in progress.milestones if task == progress.task]
    count = str(len(reached))
    if progress.milestone_entries:
        count += f"/{progress.milestone_entries}"
        if progress.milestones_reachable is not None and progress.milestones_reachable < progress.milestone_entries:
            count += f" ({progress.milestones_reachable} reachable here)"
    if not reached:
        return count if progress.milestone_entries else "-"
    return f"{count}: " + ", ".join(f"{identity}@{step}" for identity, step in reached)


def _noops(progress: ArmProgress) -> str:
    """Infrastructure trouble (what can fail the arm) apart from behaviour (shown, never alerted)."""
    infrastructure = sum(progress.infrastructure.values())
    parts = []
    if infrastructure:
        share = f" ({infrastructure / progress.steps_total:.0%})" if progress.steps_total else ""
        causes = ", ".join(f"{cause} {count}" for cause, count in progress.infrastructure.most_common())
        parts.append(f"infra {infrastructure}{share}: {causes}")
    invalid = sum(count for cause, count in progress.behaviour.items() if not cause.startswith(NO_EFFECT_PREFIX))
    if invalid:
        parts.append(f"invalid {invalid}")
    return "; ".join(parts) or "0"


def _trouble(progress: ArmProgress) -> str:
    """The noops, then the inputs without effect (not noops: the step ran, one key of it could not be carried out)."""
    no_effect = f"; {NO_EFFECT_LABEL} {progress.no_effect_steps}" if progress.no_effect_steps else ""
    return _noops(progress) + no_effect


def progress_line(progress: ArmProgress) -> str:
    """One arm's progress as a plain line (used without a terminal and in the final summary)."""
    rate = progress.steps_per_minute()
    parts = [
        f"{progress.arm}: {progress.state}",
        f"task {progress.task or '-'}",
        f"step {progress.step}/{progress.max_steps}",
        f"{rate:.0f} steps/min" if rate else "- steps/min",
        f"milestones {_milestones(progress)}",
        f"noops {_trouble(progress)}",
        f"agent {progress.last_agent_ms:.0f} ms" if progress.last_agent_ms is not None else "agent - ms",
        f"elapsed {_duration(progress.elapsed_s())}",
    ]
    if progress.state == "running":
        parts.append(f"eta {_duration(progress.eta_s())}")
    if progress.alerts:
        parts.append(f"alerts {len(progress.alerts)}")
    return ", ".join(parts)


def _rate(progress: ArmProgress) -> str:
    rate = progress.steps_per_minute()
    return f"{rate:.0f}" if rate else "-"


def _agent_ms(progress: ArmProgress) -> str:
    return f"{progress.last_agent_ms:.0f}" if progress.last_agent_ms is not None else "-"


def _eta(progress: ArmProgress) -> str:
    return _duration(progress.eta_s()) if progress.state == "running" else "-"


def _state(progress: ArmProgress) -> str:
    style = STATE_STYLES.get(progress.state, "")
    return f"[{style}]{progress.state}[/]" if style else progress.state


def _latest_alert(progress: ArmProgress) -> str:
    if not progress.alerts:
        return ""
    return f"[bold yellow]{escape(shown_text(progress.alerts[-1], MAX_REASON_CHARS))}[/] ({len(progress.alerts)})"


def _wide_table(arms: Sequence[ArmProgress]) -> Table:
    """One column per value: for a terminal wide enough to show each in full."""
    table = Table(expand=False, show_lines=False)
    arm_width = max((len(progress.arm) for progress in arms), default=3)
    table.add_column("arm", no_wrap=True, min_width=arm_width)
    table.add_column("state", no_wrap=True, min_width=len("interrupted"))
    table.add_column("task", no_wrap=True)
    for column in ("step", "/min"):
        table.add_column(column, no_wrap=True)
    table.add_column("milestones@step", max_width=40)
    table.add_column("noops", max_width=30)
    for column in ("agent ms", "elapsed", "ETA"):
        table.add_column(column, no_wrap=True)
    table.add_column("alerts", max_width=40)
    for progress in arms:
        table.add_row(
            progress.arm,
            _state(progress),
            escape(progress.task or "-"),
            f"{progress.step}/{progress.max_steps}",
            _rate(progress),
            escape(_milestones(progress)),
            escape(_trouble(progress)),
            _agent_ms(progress),
            _duration(progress.elapsed_s()),
            _eta(progress),
            _latest_alert(progress),
        )
    return table


def _stacked_table(arms: Sequence[ArmProgress]) -> Table:
    """The same values stacked in three columns, so that a narrow terminal (80 columns) cuts none of them short."""
    table = Table(expand=False, show_lines=True)
    table.add_column("arm", no_wrap=True)
    table.add_column("progress", no_wrap=True)
    table.add_column("task, milestones@step, noops, alerts", overflow="fold")
    for progress in arms:
        details = [
            escape(progress.task or "-"),
            f"milestones {escape(_milestones(progress))}",
            f"noops {escape(_trouble(progress))}",
        ]
        if progress.alerts:
            details.append(_latest_alert(progress))
        table.add_row(
            f"{escape(progress.arm)}\n{_state(progress)}",
            f"step {progress.step}/{progress.max_steps}\n{_rate(progress)} steps/min\nagent {_agent_ms(progress)} ms\n"
            f"{_duration(progress.elapsed_s())}, ETA {_eta(progress)}",
            "\n".join(details),
        )
    return table


GRID_FROM_EPISODES = 4  # more episodes than this, of arms running several seeds: the arm x seed grid
GRID_MARKS = {
    "planning": "·",
    "queued": "·",
    "starting": "…",
    "ready": "…",
    "running": "▶",
    "finished": "✓",
    "failed": "✗",
    "interrupted": "■",
}


def _cell(progress: ArmProgress) -> str:
    """One episode in a word: its state's mark, and its step while it runs or its milestones once it ended."""
    mark = f"[{STATE_STYLES.get(progress.state, 'default')}]{GRID_MARKS.get(progress.state, '?')}[/]"
    if progress.state == "running":
        return f"{mark} {progress.step}/{progress.max_steps}"
    if progress.state in ("finished", "failed", "interrupted"):
        reached = len({(task, identity) for task, identity, _ in progress.milestones})
        return f"{mark} {reached}m"
    return mark


def campaign_grid(arms: Sequence[ArmProgress]) -> Group:
    """Arms as rows, seeds as columns, an episode a cell (a retried one: its latest attempt); under it one line per
    arm: how many of its episodes ended which way. An episode of an arm without seeds gets a row of its own."""
    cells: dict[str, dict[int, ArmProgress]] = {}
    for progress in arms:
        arm, seed = progress.grid if progress.grid is not None else (progress.arm, 0)
        cells.setdefault(arm, {})[seed] = progress  # in order: a later attempt replaces the earlier
    seeds = sorted({seed for row in cells.values() for seed in row})
    table = Table(expand=False, box=None, padding=(0, 1))
    table.add_column("arm", no_wrap=True)
    for seed in seeds:
        table.add_column(f"s{seed}", no_wrap=True)
    for arm, row in cells.items():
        table.add_row(escape(arm), *(_cell(row[seed]) if seed in row else "" for seed in seeds))
    lines = []
    for arm, row in cells.items():
        counts: dict[str, int] = {}
        for progress in row.values():
            counts[progress.state] = counts.get(progress.state, 0) + 1
        said = ", ".join(f"{count} {state}" for state, count in counts.items())
        lines.append(f"{escape(arm)}: {said}")
    legend = "[dim]▶ step while running; ✓ finished, ✗ failed, ■ interrupted, with the milestones reached (m)[/]"
    return Group(table, legend, *lines)


def progress_table(arms: Sequence[ArmProgress], console: Console) -> Table | Group:
    """One row per arm: one column per value when the console is wide enough to show them all, else stacked; many
    episodes of arms running several seeds as an arm x seed grid (a row of lines per episode would fill the screen)."""
    if len(arms) > GRID_FROM_EPISODES and any(progress.grid is not None for progress in arms):
        return campaign_grid(arms)
    wide = _wide_table(arms)
    return wide if fits(console, wide) else _stacked_table(arms)


class LiveView:
    """The terminal view: a Live table redrawn by `refresh`, with event lines printed above it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._lock = threading.Lock()
        self._live = Live(console=console, auto_refresh=False, transient=False)
        self._summary: str | None = None  # k of n done, ETA: above the table
        self._live.start()

    def line(self, arm: str, text: str, *, alert: bool = False) -> None:
        style = "bold yellow" if alert else "dim"
        label = "ALERT " if alert else ""
        with self._lock:
            shown = escape(shown_text(text, MAX_LOG_LINE_CHARS, one_line=False))
            self.console.print(f"[{style}]{terminal_stamp()} {label}{escape(arm)}: {shown}[/]", highlight=False)

    def refresh(self, arms: Sequence[ArmProgress], summary: str | None = None) -> None:
        self._summary = summary or self._summary
        table = progress_table(arms, self.console)
        with self._lock:
            self._live.update(Group(escape(self._summary), table) if self._summary else table, refresh=True)

    def close(self, arms: Sequence[ArmProgress]) -> None:
        self.refresh(arms)
        self._live.stop()


class PlainView:
    """Without a terminal: the arms' event lines (state changes, alerts) as they come, and every `interval_s` the
    run's summary (k of n done, ETA) and a progress line per running arm."""

    def __init__(self, console: Console, interval_s: float = 30.0) -> None:
        self.console = console
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._last_progress = time.monotonic()
        self._summary: str | None = None

    def _print(self, text: str) -> None:
        with self._lock:
            self.console.out(f"{log_stamp()} {text}", highlight=False)

    def line(self, arm: str, text: str, *, alert: bool = False) -> None:
        self._print(f"{'ALERT ' if alert else ''}{arm}: {shown_text(text, MAX_LOG_LINE_CHARS, one_line=False)}")

    def refresh(self, arms: Sequence[ArmProgress], summary: str | None = None) -> None:
        self._summary = summary or self._summary
        now = time.monotonic()
        if now - self._last_progress >= self.interval_s:
            self._last_progress = now
            if summary:
                self._print(summary)
            for progress in arms:
                if progress.state == "running":
                    self._print(progress_line(progress))

    def close(self, arms: Sequence[ArmProgress]) -> None:
        """Every line is already out but the run's last summary (k of n done)."""
        if self._summary:
            self._print(self._summary)


def make_view(console: Console, interval_s: float) -> View:
    return LiveView(console) if console.is_terminal else PlainView(console, interval_s)
