"""Marking an arm's processes by something they cannot drop, where the host allows it.

Process groups and the owner token (an environment variable) find what a child starts, unless it leaves its
session and scrubs its environment (`env -i setsid -f ...`). Two marks survive that:

- a cgroup v2 per child (`<our cgroup>/mcu-arms/<role>-<fresh id>`), when the unified hierarchy is writable: membership
  is inherited by every descendant and an unprivileged process cannot leave it, so `stop` finds the daemon even
  after the supervising `mcu-arms run` itself was SIGKILLed. A fresh marker is written into it at creation (an
  extended attribute, or where the host has none its inode number) and kept in the private record: a cgroup is
  emptied only while it still carries the marker the record names;
- PR_SET_CHILD_SUBREAPER on the supervisor (Linux): orphans are re-parented to it instead of to init, so while it
  lives everything the arms left behind is still its descendant.

What this host offers is said by `doctor` (`containment_support`); what is missing only narrows what can be found.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_PARENT = "mcu-arms"
_CHILD_CGROUP_NAME = re.compile(r"[a-z]+-[0-9a-f]{32}")
# An empty child cgroup older than this is left over (its processes ended without a stop that removes it, e.g. after
# the run was SIGKILLed): it has nothing left to find, and is removed when the next one is made. Younger ones may be
# another run's, made an instant before its child joins.
EMPTY_CGROUP_AGE_S = 300.0
_PR_SET_CHILD_SUBREAPER = 36
MARKER_ATTRIBUTE = "user.mcu_arms.marker"
_INODE_MARKER = "inode:"


def _made_here(path: Path) -> bool:
    """The shape of a child cgroup made here: `.../mcu-arms/<role>-<id>`."""
    return path.parent.name == CGROUP_PARENT and _CHILD_CGROUP_NAME.fullmatch(path.name) is not None


def _marker_of(path: Path) -> str | None:
    """The marker the cgroup carries: its extended attribute, or its inode where the host keeps no attribute."""
    try:
        return os.getxattr(path, MARKER_ATTRIBUTE, follow_symlinks=False).decode("ascii", errors="replace")
    except OSError as error:
        if error.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
    try:
        return f"{_INODE_MARKER}{os.lstat(path).st_ino}"
    except OSError:
        return None


def _write_marker(path: Path) -> str:
    marker = uuid.uuid4().hex
    try:
        os.setxattr(path, MARKER_ATTRIBUTE, marker.encode("ascii"), follow_symlinks=False)
    except OSError:
        return f"{_INODE_MARKER}{os.lstat(path).st_ino}"
    return marker


@dataclass(frozen=True)
class Cgroup:
    """One child's cgroup: every process in it was started by that child, or by its descendants."""

    path: Path
    marker: str

    @classmethod
    def verified(cls, path: str, marker: str) -> Cgroup | None:
        """The cgroup the private record names, while it is still the one made then: the shape of one made here and
        the marker written into it at creation. Any other cgroup (another arm's, one a file names) is None."""
        candidate = Path(path)
        if not _made_here(candidate) or _marker_of(candidate) != marker:
            return None
        return cls(candidate, marker)

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n", encoding="ascii")

    def pids(self) -> list[int]:
        """The processes in it now ([] once it is gone)."""
        try:
            text = (self.path / "cgroup.procs").read_text(encoding="ascii")
        except OSError:
            return []
        return [int(line) for line in text.split() if line.isdigit()]

    def remove(self) -> bool:
        """Remove it when empty; False while a process is still in it."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return True
        except OSError as error:
            if error.errno == errno.EBUSY:
                return False
            raise
        return True


def _unified_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if " - cgroup2 " in line and len(fields) > 4:
            return Path(fields[4])
    return None


def _own_cgroup() -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def cgroup_parent() -> Path | None:
    """The directory this process's children's cgroups go in (`<own cgroup>/mcu-arms`), or None without v2."""
    mount, own = _unified_mount(), _own_cgroup()
    if mount is None or own is None:
        return None
    return mount / own.lstrip("/") / CGROUP_PARENT


def create_cgroup(role: str) -> Cgroup | None:
    """A new cgroup for one child (named by its role and a fresh id, never by its owner token: cgroup paths are
    world-readable), or None where the host does not let us make one (read-only, not delegated)."""
    parent = cgroup_parent()
    if parent is None:
        return None
    path = parent / f"{role}-{uuid.uuid4().hex}"
    try:
        parent.mkdir(exist_ok=True)
        path.mkdir()
        marker = _write_marker(path)
    except OSError:
        return None
    _remove_left_over(parent)
    return Cgroup(path, marker)


def _remove_left_over(parent: Path) -> None:
    now = time.time()
    for entry in parent.iterdir():
        try:
            old = now - entry.stat().st_mtime > EMPTY_CGROUP_AGE_S
        except OSError:
            continue
        cgroup = Cgroup(entry, "")
        if _made_here(entry) and old and not cgroup.pids():
            try:
                cgroup.remove()
            except OSError:
                continue


def become_subreaper() -> bool:
    """Make orphaned descendants this process's children instead of init's (Linux); False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class ContainmentSupport:
    cgroup: Path | None  # where children's cgroups would go, when they can be made and joined
    cgroup_reason: str  # why not, when they cannot
    subreaper: bool


def containment_support() -> ContainmentSupport:
    """What this host offers, probed without moving any process: a cgroup made and removed again."""
    parent = cgroup_parent()
    reason = ""
    if parent is None:
        reason = "no cgroup v2 hierarchy is mounted"
    else:
        probe = create_cgroup("probe")
        if probe is None:
            reason = f"cannot create a cgroup under {parent}"
        else:
            writable = os.access(probe.path / "cgroup.procs", os.W_OK) and os.access(
                parent.parent / "cgroup.procs", os.W_OK
            )
            probe.remove()
            if not writable:
                reason = f"cannot move processes into cgroups under {parent}"
    libc_ok = sys.platform.startswith("linux")
    return ContainmentSupport(cgroup=None if reason else parent, cgroup_reason=reason, subreaper=libc_ok)
