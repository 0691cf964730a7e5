"""User-facing errors: bad input is reported with its file, line and key, never a traceback.

Also the one translator from a pydantic ValidationError to those errors, so every file format and flag reports its
mistakes the same way (a TOML file's lines: toml_text.py).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
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
    line_of: Callable[[str], int | None] | None = None,
    key_of: Callable[[str], str] = lambda key: key,
    describe: Describe = plain_problem,
    every: bool = False,
) -> UserError:
    """The UserError for a ValidationError: the first problem (or `every` one, a line each) with its file line.

    `line_of` finds a key's line (toml_text.toml_line for TOML); `key_of` renames a key for the user, e.g. a field
    to its `--flag`, or `max_steps` to `config.max_steps`.
    """
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
