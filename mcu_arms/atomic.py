"""Writing files that someone may be reading at the same moment (a live view, `status`, a crash mid-write).

Every write goes to a temporary file beside the target, flushed to disk, then takes the target's name: a reader never
sees half a file. `replace` writes (reports that are rewritten as a run goes) rename over the old file; `exclusive`
writes (results, which are never overwritten) link the name and fail if it appeared meanwhile.

A file's mode is decided by what it holds, never left to the temporary file's 0600: results, reports and plans are
readable by anyone who can read the directory (0644, like their neighbours written with open()); a caller writing
something private (a conversation) passes 0o600.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

SHARED_MODE = 0o644


class AlreadyExists(FileExistsError):
    """An exclusive write found its target already there: nothing was replaced."""


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
