"""What a command reads from the outside world, passed in so that tests can substitute it.

Consoles are sized here, for every command alike: on a terminal, its width; anywhere else (a pipe, a file, CI) there
is no width to fit, so nothing is wrapped or cut — a table keeps each row on one line for grep and awk.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from rich.console import Console, RenderableType

from mcu_arms.contracts.project import Project

# Wide enough for any table this tool prints; rich needs a number, a pipe has none.
UNBOUNDED_WIDTH = 10_000
OUTPUT_DIR_ENV = "MCU_ARMS_OUTPUT_DIR"
ARMS_DIR_ENV = "MCU_ARMS_ARMS_DIR"
SettingSource = Literal["flag", "environment", "settings file", "default"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream is no terminal
        return False


def console_for(stream: IO[str] | None = None, *, stderr: bool = False, **options: object) -> Console:
    """A console on `stream` (default: stdout, or stderr): the terminal's width on a terminal, unbounded elsewhere."""
    shown = stream if stream is not None else (sys.stderr if stderr else sys.stdout)
    width = None if _is_terminal(shown) else UNBOUNDED_WIDTH
    if stream is None:  # rich follows sys.stdout / sys.stderr as they are swapped (CliRunner does)
        return Console(stderr=stderr, width=width, **options)  # type: ignore[arg-type]
    return Console(file=stream, width=width, **options)  # type: ignore[arg-type]


def fits(console: Console, renderable: RenderableType) -> bool:
    """Whether `renderable` shows whole at the console's width (a measurement is otherwise capped at the width)."""
    unbounded = console.options.update_width(UNBOUNDED_WIDTH)
    return console.measure(renderable, options=unbounded).minimum <= console.width


@dataclass
class Environment:
    """The console to print to, the environment variables, the clock and the project directory.

    The output root and the arms dir are, in order: what the command line gave (`mcu-arms --output-dir DIR`), the
    environment (MCU_ARMS_OUTPUT_DIR, MCU_ARMS_ARMS_DIR), the project's settings file (contracts/project.py), then
    `output/` and `arms/` of the project; relative ones are taken from the current directory (flags, environment)
    or the settings file's folder. Without a settings file, the project is the current directory.
    """

    console: Console = field(default_factory=console_for)
    err_console: Console = field(default_factory=lambda: console_for(stderr=True))
    variables: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Callable[[], datetime] = _utc_now
    monotonic: Callable[[], float] = time.monotonic
    cwd: Path = field(default_factory=Path.cwd)
    output_root: Path | None = None
    arms_root: Path | None = None
    project: Project | None = None  # the settings file in force, found by the CLI (project.find_project)
    set_by_project: frozenset[str] = frozenset()  # the variables of `env` the settings file filled in

    @property
    def project_dir(self) -> Path:
        """The settings file's folder, else the current directory."""
        return self.project.root if self.project is not None else self.cwd

    def located(self, given: Path | None, variable: str, setting: str, default: str) -> tuple[Path, SettingSource]:
        """A directory setting and where it came from: the flag, the environment, the settings file or the default."""
        if given is not None:
            return self.cwd / given.expanduser(), "flag"
        if self.variables.get(variable):
            return self.cwd / Path(self.variables[variable]).expanduser(), "environment"
        chosen = getattr(self.project.settings, setting) if self.project is not None else None
        if self.project is not None and chosen is not None:
            return self.project.path(chosen), "settings file"
        return self.project_dir / default, "default"

    @property
    def arms_dir(self) -> Path:
        return self.located(self.arms_root, ARMS_DIR_ENV, "arms_dir", "arms")[0]

    @property
    def logs_dir(self) -> Path:
        return self.project_dir / "logs"

    @property
    def output_dir(self) -> Path:
        return self.located(self.output_root, OUTPUT_DIR_ENV, "output_dir", "output")[0]

    def shown(self, path: Path | str) -> str:
        """A path as printed for reading: relative to the project when inside it, else as it is."""
        try:
            return str(Path(path).relative_to(self.cwd))
        except ValueError:
            return str(path)
