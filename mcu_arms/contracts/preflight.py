"""One host check's outcome, as the backends' preflights report it and `doctor` (and `plan`) show it.

A check says what it looked at, what it found, and how to fix it when it is not ok, so the same result can refuse a
run, fill a doctor row, or stop a plan. Only pydantic here: light to import.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

CheckStatus = Literal["ok", "warn", "fail"]


class HostCheck(BaseModel):
    name: str  # what was checked, e.g. "java", "xauth", "MINESTUDIO_DIR"
    status: CheckStatus
    detail: str  # what was found
    fix: str = ""  # how to get it, when status is not ok

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def problem(self) -> str:
        """The check as one line: what is wrong and how to fix it."""
        return f"{self.detail}: {self.fix}" if self.fix else self.detail


def failures(checks: list[HostCheck]) -> list[str]:
    """The failed checks, each as one line saying what is wrong and how to fix it."""
    return [check.problem() for check in checks if check.failed]
