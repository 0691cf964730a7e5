"""File locks that never follow a link, and exclusive holds that say who holds them.

A lock is flock(2) on a file opened with O_NOFOLLOW and never truncated: the kernel drops it when its holder dies,
even by SIGKILL, so a crash never leaves an arm locked, and a link planted at a lock's path is an error, not a file
of the user's that gets opened (or emptied) through it. A hold is such a lock taken without waiting, with the
holder's pid written beside it for the message whoever is refused gets: one `mcu-arms run` per arm, one purple per
CODEX_HOME. Check-then-act races (two starts of one arm at the same instant) end here: the second is refused.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mcu_arms.atomic import PRIVATE_FILE_MODE, write_text_atomic
from mcu_arms.contracts.errors import UserError


def _open_lock(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)


def try_lock(path: Path) -> int | None:
    """The descriptor holding `path`'s lock, or None when another holds it. OSError when `path` cannot be opened
    (a link, a loop, a missing or read-only directory)."""
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold `path`'s lock for the block, waiting for it when another holds it."""
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        unlock(fd)


def _owner_path(lock: Path) -> Path:
    return lock.with_name(lock.name + ".owner")


def holder_of(lock: Path) -> str:
    """'pid N' of the process that last took the hold, when it said so."""
    try:
        return f"pid {_owner_path(lock).read_text(encoding='utf-8').strip()}"
    except OSError:
        return "another process"


@contextmanager
def held_exclusively(lock: Path, *, refused: Callable[[str], UserError], key: str) -> Iterator[None]:
    """Hold `lock` for as long as the block runs. `refused(holder)` is raised when another process holds it; an
    OSError (a link, a loop, a read-only or missing directory) is a UserError naming the file and `key`."""
    try:
        fd = try_lock(lock)
    except OSError as error:
        raise UserError(f"cannot take the lock: {error.strerror or error}", path=lock, key=key) from None
    if fd is None:
        raise refused(holder_of(lock))
    try:
        try:
            write_text_atomic(_owner_path(lock), f"{os.getpid()}\n")
        except OSError as error:  # a full or read-only state dir: said in one line, before anything starts
            raise UserError(
                f"cannot write who holds the lock: {error.strerror or error}", path=_owner_path(lock), key=key
            ) from None
        yield
    finally:
        unlock(fd)


def is_held(lock: Path) -> str | None:
    """Who holds `lock` now, or None when nobody does (a probe: taken and released at once; no file, no holder)."""
    if not os.path.lexists(lock):
        return None
    fd = try_lock(lock)
    if fd is None:
        return holder_of(lock)
    unlock(fd)
    return None
