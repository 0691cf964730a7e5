"""The one way a file under output/ is read: everything there is untrusted input, however it got there.

Every file is opened without following a link, must be a regular file, and is read up to its bound (contracts/
limits.py), never whole past it; every number is finite and bounded; every string has its control characters made
visible escapes (contracts/text.py), so text from a file is data, never terminal control; every path a file names
resolves inside the episode directory that holds it. What breaks a rule is a UserError naming the file, the key and
the rule, which readers turn into "excluded: <reason>" for that episode alone.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from mcu_arms.contracts.errors import NESTED_TOO_DEEPLY, UserError
from mcu_arms.contracts.limits import MAX_NUMBER_MAGNITUDE
from mcu_arms.contracts.text import neutralised

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def size_text(count: int) -> str:
    return f"{count // (1024 * 1024)} MiB" if count >= 1024 * 1024 else f"{count} bytes"


def open_untrusted(path: Path, what: str) -> BinaryIO:
    """`path` opened for reading as untrusted: a regular file reached without a link on its last component (a FIFO
    or a device would block or never end); a UserError naming it otherwise."""
    try:
        descriptor = os.open(path, _READ_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UserError(f"the {what} is a link; mcu-arms follows no link under output/", path=path) from None
        raise UserError(f"cannot read the {what}: {error.strerror or error}", path=path) from None
    handle = os.fdopen(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        handle.close()
        raise UserError(f"the {what} is not a regular file", path=path)
    return handle


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, a regular file reached without a link, at most `limit` of them: a larger file is refused
    from its size, before any of it is read (and a file growing past the limit while read is refused too)."""
    with open_untrusted(path, what) as handle:
        found = os.fstat(handle.fileno())
        if found.st_size > limit:
            raise UserError(f"the {what} is {size_text(found.st_size)}, over the {size_text(limit)} read", path=path)
        data = handle.read(found.st_size + 1)  # its size, not the bound: no buffer of the bound's size per read
        if len(data) > found.st_size:  # it grew while read
            data += handle.read(limit + 1 - len(data))
    if len(data) > limit:
        raise UserError(f"the {what} grew past the {size_text(limit)} read", path=path)
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number mcu-arms reads")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    if abs(value) > MAX_NUMBER_MAGNITUDE:
        raise ValueError(f"{text[:40]} is out of range (at most {MAX_NUMBER_MAGNITUDE:.3g} in magnitude)")
    return value


def _bounded_int(text: str) -> int:
    value = int(text)
    if len(text) > 18 and abs(value) > MAX_NUMBER_MAGNITUDE:
        raise ValueError(f"{text[:40]} is out of range (at most {MAX_NUMBER_MAGNITUDE:.3g} in magnitude)")
    return value


def _needs_walk(text: str) -> bool:
    """Whether a parsed JSON text may hold a string to neutralise: strict JSON holds no raw control character but DEL,
    so an ASCII text without DEL and without a \\u escape holds none (most reports: the walk costs five parses)."""
    return not text.isascii() or "\\u" in text or "\x7f" in text


def _checked(value: Any, key: str) -> Any:
    """`value` with every string neutralised and every number in bounds; a ValueError naming the key otherwise."""
    if isinstance(value, str):
        return neutralised(value, one_line=False)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER_MAGNITUDE:
            raise ValueError(f"key '{key}': {value!r} is out of range (finite, at most {MAX_NUMBER_MAGNITUDE:.3g})")
        return value
    if isinstance(value, list):
        return [_checked(item, f"{key}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {
            neutralised(name, one_line=False): _checked(item, f"{key}.{name}" if key else name)
            for name, item in value.items()
        }
    return value


def checked_json(data: bytes | str, path: Path, what: str) -> Any:
    """JSON read as untrusted: no NaN or Infinity, numbers bounded, strings neutralised; a UserError otherwise."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        parsed = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
        return _checked(parsed, "") if _needs_walk(text) else parsed
    except RecursionError:
        raise UserError(f"not a readable {what}: {NESTED_TOO_DEEPLY}", path=path) from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, a number out of range
        text = str(error)
        key = text[5 : text.index("'", 5)] if text.startswith("key '") else None
        message = text.split(": ", 1)[1] if key else text
        raise UserError(f"not a readable {what}: {message}", path=path, key=key or None) from None


def read_json(path: Path, limit: int, what: str) -> Any:
    """A bounded, checked JSON file (read_bounded, then checked_json)."""
    return checked_json(read_bounded(path, limit, what), path, what)


def stored_path_problem(stored: str) -> str | None:
    """Why a path stored in a file under output/ may not be followed (None: it is relative and stays down)."""
    if "\0" in stored:
        return "a path holding a NUL byte"
    if stored.startswith("/"):
        return "an absolute path"
    if ".." in stored.split("/"):
        return "a path that climbs out with '..'"
    return None


def _link_on_the_way(root: Path, parts: list[str]) -> bool:
    """Whether a link is among the components of root/parts below root (one lstat each; a missing one ends it)."""
    probe = root
    for part in parts:
        probe = probe / part
        try:
            if stat.S_ISLNK(os.lstat(probe).st_mode):
                return True
        except OSError:
            return False
    return False


def inside(root: Path, stored: str, *, what: str, key: str | None = None, source: Path | None = None) -> Path:
    """`stored` (a path a file in `root` names) as a path inside `root`: relative, no `..`, and no link on the way
    that leads out of `root`; else a UserError naming the file that named it."""
    problem = stored_path_problem(stored)
    named = f"the {what} names {stored!r}"
    if problem is not None:
        raise UserError(f"{named}: {problem}; paths in output/ stay inside their episode", path=source, key=key)
    path = root / stored
    if not _link_on_the_way(root, [part for part in stored.split("/") if part not in ("", ".")]):
        return path  # relative, no `..`, no link below root: inside, whatever root itself is reached through
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UserError(
            f"{named}: a link leads out of the episode; paths in output/ stay inside it", path=source, key=key
        )
    return path
