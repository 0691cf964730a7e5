"""User-facing errors: bad input is reported with its file, line and key, never a traceback.

Also the one translator from a pydantic ValidationError to those errors, and the one TOML line locator (tomllib
keeps no positions), so every file format and flag reports its mistakes the same way.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# What a file whose arrays or objects are nested beyond what a parser can follow is told (instead of RecursionError).
NESTED_TOO_DEEPLY = "nested too deeply to read: arrays or tables within each other thousands of levels deep"


ENVIRONMENT_VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*")


def key_kind(key: str) -> str:
    """What an error names: a command-line flag as a flag, an environment variable as a variable, else a key."""
    if key.startswith("-"):
        return "flag"
    return "variable" if ENVIRONMENT_VARIABLE.fullmatch(key) else "key"


class UserError(Exception):
    """An error the user can fix. The CLI prints it without a traceback and exits 2.

    `path` (and `line`) name the file and `key` the setting, so the message points at what to change.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        key: str | None = None,
        allowed: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.key = key
        self.allowed = allowed
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.path:
            where = self.path + (f":{self.line}" if self.line else "")
        parts = [p for p in (where, f"{key_kind(self.key)} '{self.key}'" if self.key else "") if p]
        head = ": ".join(parts)
        text = f"{head}: {self.message}" if head else self.message
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        return text

    def at(self, *, path: Path | str | None = None, line: int | None = None, key: str | None = None) -> UserError:
        """The same error pointed at another place (e.g. the arm file whose setting caused it)."""
        return UserError(
            self.message,
            path=path if path is not None else self.path,
            line=line if line is not None else self.line,
            key=key if key is not None else self.key,
            allowed=self.allowed,
        )


@dataclass(frozen=True)
class Problem:
    """One validation error: where (a dotted key such as `ports.green` or `participants[1].role`), and what."""

    key: str
    message: str
    allowed: str | None = None
    kind: str = ""


def did_you_mean(word: object, candidates: Iterable[str]) -> str:
    """` (did you mean 'steps'?)` when `word` is close to one of `candidates`, else "": the usual typo named."""
    close = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def dotted(location: tuple[Any, ...] | list[Any]) -> str:
    """`("participants", 1, "role")` -> `participants[1].role`."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def key_parts(dotted_key: str) -> tuple[str | int, ...]:
    """The inverse of `dotted`: `participants[1].role` -> `("participants", 1, "role")`."""
    return tuple(int(part) if part.isdigit() else part for part in re.findall(r"[^.\[\]]+", dotted_key))


def plain_problem(error: Mapping[str, Any]) -> Problem:
    """A pydantic error as a Problem: its location as a dotted key and its message without pydantic's prefix."""
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return Problem(key=dotted(tuple(error.get("loc", ()))), message=message, kind=str(error.get("type", "")))


Describe = Callable[[Mapping[str, Any]], Problem]


def problems(error: ValidationError, describe: Describe = plain_problem) -> list[Problem]:
    return [describe(item) for item in error.errors()]


def validation_summary(error: ValidationError, *, limit: int = 8) -> str:
    """The first `limit` problems on one line, for a protocol reply: `key: message; key: message`."""
    return "; ".join(f"{p.key or 'value'}: {p.message}" for p in problems(error)[:limit])


def user_error(
    error: ValidationError,
    *,
    path: Path | str | None = None,
    text: str | None = None,
    line_of: Callable[[str], int | None] | None = None,
    key_of: Callable[[str], str] = lambda key: key,
    describe: Describe = plain_problem,
    every: bool = False,
) -> UserError:
    """The UserError for a ValidationError: the first problem (or `every` one, a line each) with its file line.

    `text` is the TOML the data came from (its lines are looked up), or `line_of` finds a key's line in another
    format; `key_of` renames a key for the user, e.g. a field to its `--flag`, or `max_steps` to `config.max_steps`.
    """
    if line_of is None and text is not None:
        line_of = partial(toml_line, text)
    found = problems(error, describe) if every else problems(error, describe)[:1]
    rendered = [_as_user_error(problem, path, line_of, key_of) for problem in found]
    if len(rendered) == 1:
        return rendered[0]
    return UserError("\n".join(item.render() for item in rendered))


def _as_user_error(
    problem: Problem,
    path: Path | str | None,
    line_of: Callable[[str], int | None] | None,
    key_of: Callable[[str], str],
) -> UserError:
    key = key_of(problem.key) if problem.key else ""
    line = line_of(key) if line_of is not None and key else None
    return UserError(problem.message, path=path, line=line, key=key or None, allowed=problem.allowed)


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"\s-]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z0-9_.\"\s-]+?)\s*=")
_INDEXED = re.compile(r"^([^\[]+)\[(\d+)\]$")


def _split_key(raw: str) -> tuple[str, ...]:
    return tuple(part.strip().strip('"') for part in raw.split("."))


def _parse_path(dotted_key: str) -> tuple[tuple[str, ...], int]:
    """`participants[1].role` -> (("participants", "role"), 1); the index is of the array-of-tables entry."""
    parts: list[str] = []
    index = 0
    for part in dotted_key.split("."):
        indexed = _INDEXED.match(part)
        if indexed:
            part, index = indexed.group(1), int(indexed.group(2))
        parts.append(part)
    return tuple(parts), index


def toml_line(text: str | None, dotted_key: str) -> int | None:
    """The line where `dotted_key` is set in TOML `text` (`ports.green`, `env.NAME`, `participants[1].endpoint`),
    else the line of the nearest enclosing table header or key, else None."""
    if not text or not dotted_key:
        return None
    wanted, wanted_index = _parse_path(dotted_key)
    table: tuple[str, ...] = ()
    seen: dict[tuple[str, ...], int] = {}
    fallback: int | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(raw)
        if header:
            table = _split_key(header.group(2))
            seen[table] = seen.get(table, -1) + 1
            if table == wanted[: len(table)] and seen[table] == (wanted_index if header.group(1) == "[[" else 0):
                if table == wanted:
                    return number
                fallback = number
            continue
        assignment = _ASSIGNMENT.match(raw)
        if not assignment:
            continue
        if table and seen.get(table, 0) != (wanted_index if wanted[: len(table)] == table else 0):
            continue
        full = table + _split_key(assignment.group(1))
        if full == wanted:
            return number
        if full == wanted[: len(full)] and fallback is None:
            fallback = number
    return fallback


def toml_decode_line(error: Exception) -> int | None:
    """The line a tomllib.TOMLDecodeError points at."""
    found = re.search(r"line (\d+)", str(error))
    return int(found.group(1)) if found else None


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """A TOML file's text as a table; text that is not TOML is a UserError at the line tomllib names."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"not valid TOML: {error}", path=path, line=toml_decode_line(error)) from None
    except RecursionError:
        raise UserError(NESTED_TOO_DEEPLY, path=path) from None
