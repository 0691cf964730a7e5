"""Where a result came from: tool and package versions, the git state of the project, the host.

A number is only comparable with another when both were made by the same code; this is what the report records so
that a reader can check.
"""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from mcu_arms.contracts.run_report import Provenance
from mcu_arms.contracts.simulators import simulators
from mcu_arms.version import tool_identity

# the packages every result depends on; each simulator's own (its descriptor's python_modules) come with them
CORE_PACKAGES = (
    "a2a-sdk",
    "numpy",
    "openai",
    "pydantic",
    "psutil",
    "httpx",
    "uvicorn",
    "typer",
    "rich",
)
GIT_TIMEOUT_S = 10


def key_packages() -> list[str]:
    """The core packages and every registered simulator's, each once."""
    simulator_packages = [name for descriptor in simulators().values() for name in descriptor.python_modules]
    return sorted(set(CORE_PACKAGES) | set(simulator_packages))


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.lru_cache(maxsize=8)
def collect_provenance(cwd: Path) -> Provenance:
    """Versions, git SHA and dirty flag of the repo holding `cwd` (None outside one), python, host and platform."""
    sha = _git(cwd, "rev-parse", "HEAD")
    dirty = _git(cwd, "status", "--porcelain", "--untracked-files=no") if sha else None
    tool = tool_identity()
    return Provenance(
        mcu_arms_version=tool.version,
        mcu_arms_install=tool.install,
        mcu_arms_commit=tool.commit,
        mcu_arms_dirty=tool.dirty,
        git_sha=sha.strip() if sha else None,
        git_dirty=bool(dirty.strip()) if dirty is not None else None,
        python=sys.version.split()[0],
        packages={name: package_version(name) for name in key_packages()},
        host=socket.gethostname(),
        platform=platform.platform(),
    )
