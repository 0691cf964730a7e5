"""User-facing errors: bad input is reported, never a traceback."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """An error the user can fix. The CLI prints it without a traceback and exits 2.

    `where` names the file (and line) and `key` the setting, so the message points at what to change.
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
        parts = [p for p in (where, f"key '{self.key}'" if self.key else "") if p]
        head = ": ".join(parts)
        text = f"{head}: {self.message}" if head else self.message
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        return text
