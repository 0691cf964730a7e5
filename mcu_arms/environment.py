"""What a command reads from the outside world, passed in so that tests can substitute it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Environment:
    """The console to print to, the environment variables, the clock and the project directory."""

    console: Console = field(default_factory=Console)
    err_console: Console = field(default_factory=lambda: Console(stderr=True))
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Callable[[], datetime] = _utc_now
    monotonic: Callable[[], float] = time.monotonic
    cwd: Path = field(default_factory=Path.cwd)

    @property
    def arms_dir(self) -> Path:
        return self.cwd / "arms"

    @property
    def logs_dir(self) -> Path:
        return self.cwd / "logs"

    @property
    def output_dir(self) -> Path:
        return self.cwd / "output"
