"""Driving the CLI in-process with a substituted Environment (console, env vars, clock, project dir).

The consoles are the real ones (`console_for`) on a string buffer: what a test reads is what a pipe gets.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from mcu_arms.cli import app
from mcu_arms.environment import Environment, console_for

REPO = Path(__file__).resolve().parents[1]
# The arm files this repository ships (arms/ also holds the user's own: a test never reads those).
SHIPPED_ARMS = ("demo", "demo_random", "dm_pl", "dm_wm", "dm_wmc", "planned_chat", "planned_kev", "planned_mineflayer")


def with_shipped_arms(project: Path) -> Path:
    """`project` with a copy of the shipped arm files in its arms/, and nothing else there."""
    (project / "arms").mkdir(parents=True, exist_ok=True)
    for name in SHIPPED_ARMS:
        (project / "arms" / f"{name}.toml").write_text((REPO / "arms" / f"{name}.toml").read_text(encoding="utf-8"))
    return project


FIXED_NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@dataclass
class Outcome:
    exit_code: int
    out: str
    err: str


def make_environment(cwd: Path, env: dict[str, str]) -> tuple[Environment, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    environment = Environment(
        console=console_for(out, color_system=None),
        err_console=console_for(err, color_system=None),
        variables=env,
        clock=lambda: FIXED_NOW,
        cwd=cwd,
    )
    return environment, out, err


def invoke(cwd: Path, env: dict[str, str], *args: str) -> Outcome:
    environment, out, err = make_environment(cwd, env)
    result = CliRunner().invoke(app, list(args), obj=environment, catch_exceptions=False)
    return Outcome(result.exit_code, out.getvalue() + result.stdout, err.getvalue())


def summary_rows(text: str) -> dict[str, tuple[str, str]]:
    """`plan --dry-run` / `run --dry-run` summary as printed to a pipe: arm label -> (will, why)."""
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    return {row[0]: (row[7], row[8]) for row in rows if len(row) == 9}
