"""Writing files that someone may be reading at the same moment (a live view, `status`, a crash mid-write), and
making directories that nobody can redirect.

Every write goes to a temporary file beside the target, flushed to disk, then takes the target's name: a reader never
sees half a file. `replace` writes (reports that are rewritten as a run goes) rename over the old file; `exclusive`
writes (results, which are never overwritten) link the name and fail if it appeared meanwhile.

A file's mode is decided by what it holds, never left to the temporary file's 0600: results, reports and plans are
readable by anyone who can read the directory (0644, like their neighbours written with open()); a caller writing
something private (a conversation) passes 0o600. Directories made here are made one component at a time through
directory descriptors with O_NOFOLLOW: a link planted where a directory should be is refused, never followed.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

SHARED_MODE = 0o644
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


class AlreadyExists(FileExistsError):
    """An exclusive write found its target already there: nothing was replaced."""


class LinkRefused(OSError):
    """A link (or something other than a directory) stands where a directory must be; it was not followed."""


def open_dir_nofollow(name: str, *, dir_fd: int, create_mode: int | None = None) -> int:
    """A descriptor of directory `name` inside `dir_fd`, created first (with `create_mode`) when asked. LinkRefused
    when `name` is a symlink or not a directory: nothing is followed, nothing is created through it."""
    if create_mode is not None:
        try:
            os.mkdir(name, create_mode, dir_fd=dir_fd)
        except FileExistsError:
            pass
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LinkRefused(error.errno, "a link or not a directory; it is never followed", name) from None
        raise


def make_dirs_nofollow(root: Path, parts: Sequence[str], mode: int = 0o777) -> Path:
    """Create `root/parts[0]/parts[1]/...` one component at a time without following a link below `root` (`mode`
    less the umask, as mkdir makes them).

    LinkRefused (its filename the offending path) when a component is a link or not a directory."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    path = root
    try:
        for part in parts:
            path = path / part
            try:
                child = open_dir_nofollow(part, dir_fd=fd, create_mode=mode)
            except LinkRefused as refused:
                raise LinkRefused(refused.errno, refused.strerror, str(path)) from None
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return path


def open_log(path: Path, mode: int = SHARED_MODE):  # a text file object
    """Open a log for appending, never through a link; a new one gets `mode` (PRIVATE_FILE_MODE for the log of a
    process that holds a conversation)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    if os.fstat(fd).st_size == 0:
        os.fchmod(fd, mode)  # whatever the umask
    return os.fdopen(fd, "a", encoding="utf-8")


def _json_text(data: BaseModel | Any) -> str:
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
    return text + "\n"


def _temporary_beside(path: Path, text: str, mode: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temporary = Path(name)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def write_text_atomic(path: Path, text: str, *, mode: int = SHARED_MODE) -> None:
    temporary = _temporary_beside(path, text, mode)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: BaseModel | Any, *, mode: int = SHARED_MODE) -> None:
    write_text_atomic(path, _json_text(data), mode=mode)


def write_json_exclusive(path: Path, data: BaseModel | Any, *, mode: int = SHARED_MODE) -> None:
    """Write a result that must never replace another: AlreadyExists if `path` exists, even if it appeared while
    this was being written."""
    temporary = _temporary_beside(path, _json_text(data), mode)
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise AlreadyExists(f"{path} exists already; refusing to overwrite a result") from None
    finally:
        temporary.unlink(missing_ok=True)
