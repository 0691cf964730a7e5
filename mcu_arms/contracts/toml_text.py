"""Reading TOML text: the table it holds, and the line each key is set on (tomllib keeps no positions), so that a
mistake in any TOML file is reported at its file, line and key (errors.UserError)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from mcu_arms.contracts.errors import NESTED_TOO_DEEPLY, UserError

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
