"""Which mcu-arms is running: its version (written by the build from git: mcu_arms/_version.py), and
whether it runs from a wheel or from a checkout — and then at which commit, and whether that checkout had changes.

Standard library only, and nothing run until asked: `mcu-arms --version` is answered before the CLI is imported.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcu_arms import __version__

GIT_TIMEOUT_S = 10
PACKAGE_DIR = Path(__file__).resolve().parent

InstallKind = Literal["wheel", "checkout"]


@dataclass(frozen=True)
class ToolIdentity:
    """The tool that made a result: two results made by different ones are flagged when compared."""

    version: str
    install: InstallKind
    commit: str | None = None  # from a checkout only: the wheel's version already names the commit it was built at
    dirty: bool | None = None

    def describe(self) -> str:
        if self.install == "wheel":
            return f"{self.version} (installed package)"
        state = f"commit {self.commit[:12]}" if self.commit else "no git history"
        return f"{self.version} (checkout {PACKAGE_DIR.parent}, {state}{', dirty' if self.dirty else ''})"

    def same_code(self, other: ToolIdentity) -> bool:
        return (self.version, self.commit, self.dirty) == (other.version, other.commit, other.dirty)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR.parent), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _is_checkout() -> bool:
    """The package is imported from its own source tree (an editable install, or PYTHONPATH) and not from an
    installed copy: the folder above it is the project, with its pyproject.toml beside it."""
    return (PACKAGE_DIR.parent / "pyproject.toml").is_file() and "site-packages" not in PACKAGE_DIR.parts


@functools.cache
def tool_identity() -> ToolIdentity:
    if not _is_checkout():
        return ToolIdentity(version=__version__, install="wheel")
    commit = _git("rev-parse", "HEAD")
    changes = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return ToolIdentity(
        version=__version__,
        install="checkout",
        commit=commit,
        dirty=bool(changes) if changes is not None else None,
    )
