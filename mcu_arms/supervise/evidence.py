"""Blame by evidence: when an arm fails, the process that stopped answering and how, or the disk that filled, rather
than the first process that noticed (a client that gave up waiting on a frozen green says only "exited with code 1").

The supervisor looks at each child every poll (`ChildWatch.observe`): its state as the OS reports it (psutil: a
stopped process is in state T), since when it has been so, its exit code and the signal that ended it; the report
keeps them per process (`ChildWatch.state_of`). When a write fails, the filesystem it was on is asked how much room
it has left.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from mcu_arms.contracts.states import SERVER_ROLES, ProcessRole
from mcu_arms.process.procs import Child

# A server stopped (state T) this long fails its arm: nothing it serves can answer, and the client would only notice
# at its stream's read timeout, naming itself.
STOPPED_LIMIT_S = 20.0
# A filesystem with less than this left is full for our purposes: a step record, a report or a frame does not fit.
DISK_FULL_BELOW_BYTES = 1024 * 1024
NO_SPACE = re.compile(r"No space left on device(?:: '([^']+)')?")


@dataclass(frozen=True)
class ChildState:
    """One child as the report keeps it: psutil's status when last seen running, its exit code, and the signal that
    ended it (by name)."""

    last_status: str | None
    exit_code: int | None
    signal: str | None


@dataclass
class ChildWatch:
    """What the supervisor has seen of its children's states, and since when."""

    stopped_since: dict[str, float] = field(default_factory=dict)
    last_status: dict[str, str] = field(default_factory=dict)

    def observe(self, children: Mapping[ProcessRole, Child]) -> None:
        now = time.monotonic()
        for role, child in children.items():
            status = _status(child)
            if status is not None:
                self.last_status[role] = status
            if status in STOPPED_STATUSES:
                self.stopped_since.setdefault(role, now)
            else:
                self.stopped_since.pop(role, None)

    def state_of(self, role: str, child: Child) -> ChildState:
        code = child.poll()
        return ChildState(last_status=self.last_status.get(role), exit_code=code, signal=signal_text(code))

    def stopped_for(self, role: str) -> float | None:
        since = self.stopped_since.get(role)
        return None if since is None else time.monotonic() - since

    def frozen_server(self, children: Mapping[ProcessRole, Child]) -> tuple[ProcessRole, str] | None:
        """A server stopped past STOPPED_LIMIT_S, and what to say of it."""
        for role in SERVER_ROLES:
            stopped = self.stopped_for(role)
            if role in children and stopped is not None and stopped >= STOPPED_LIMIT_S:
                return role, stopped_text(role, stopped)
        return None


def stopped_text(role: str, seconds: float) -> str:
    return f"{role} stopped (SIGSTOP or SIGTSTP: process state T) for {seconds:.0f} s, answering nothing"


STOPPED_STATUSES = frozenset({psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP})


def _status(child: Child) -> str | None:
    """psutil's status of the child while it is there and ours; None once it has gone."""
    process = child.process()
    if process is None:
        return None
    try:
        return str(process.status())
    except psutil.Error:
        return None


def signal_text(code: int | None) -> str | None:
    """The signal that ended a process, from its exit code (negative for Popen)."""
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def disk_full(run_path: Path, log_tails: Sequence[str], shown: Path) -> str | None:
    """ "disk full writing <file>" when a log says ENOSPC or the episode's filesystem has no room left; else None.
    `shown` is the directory paths are shown relative to (the project)."""
    found = [match for line in log_tails if (match := NO_SPACE.search(line))]
    named = next((match for match in reversed(found) if match.group(1)), found[-1] if found else None)
    try:
        free = os.statvfs(run_path)
        room = free.f_bavail * free.f_frsize
    except OSError:
        room = None
    if named is None and (room is None or room >= DISK_FULL_BELOW_BYTES):
        return None
    where = Path(named.group(1)) if named is not None and named.group(1) else run_path
    if where.is_absolute() and where.is_relative_to(shown):
        where = where.relative_to(shown)
    left = f" ({room} bytes left on its filesystem)" if room is not None else ""
    return f"disk full writing {where}{left}"


def culprit(
    children: Mapping[ProcessRole, Child], watch: ChildWatch, run_path: Path, shown: Path
) -> tuple[ProcessRole | None, str] | None:
    """Who or what the evidence blames, in the order a cause precedes its symptoms: an episode directory deleted
    under the run, a full disk, then a stopped server, then a server ended by a signal; None when there is no such
    evidence."""
    if not os.path.isdir(run_path):
        where = run_path.relative_to(shown) if run_path.is_absolute() and run_path.is_relative_to(shown) else run_path
        return None, f"the episode directory {where} was deleted (or moved) while the episode ran"
    tails = [line for child in children.values() for line in child.log_tail(wait_s=0)]
    full = disk_full(run_path, tails, shown)
    if full is not None:
        return None, full
    for role in SERVER_ROLES:
        if role not in children:
            continue
        stopped = watch.stopped_for(role)
        if stopped is not None:
            return role, stopped_text(role, stopped)
        ended_by = watch.state_of(role, children[role]).signal
        if ended_by is not None:
            return role, f"{role} was killed by {ended_by}"
    return None
