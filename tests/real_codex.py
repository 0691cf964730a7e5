"""The real codex CLI for tests: installed from npm into a cache directory once, under a file lock.

    found = codex_cli()     # Path to the `codex` wrapper, or a str saying why not (for pytest.skip)

The cache is $MCU_ARMS_CODEX_CACHE, else ~/.cache/mcu-arms/codex-npm/<version>. $MCU_ARMS_REAL_CODEX names an
executable to use instead (a codex the machine already has). The version is pinned: the behaviour the tests hold
codex to was measured on it (see README, "Running the codex agents for real").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from filelock import FileLock

CODEX_PACKAGE = "@openai/codex"
CODEX_VERSION = "0.171.0"
NPM_TIMEOUT_S = 600
VERSION_TIMEOUT_S = 30


def cache_dir() -> Path:
    if os.environ.get("MCU_ARMS_CODEX_CACHE"):
        return Path(os.environ["MCU_ARMS_CODEX_CACHE"])
    return Path.home() / ".cache" / "mcu-arms" / "codex-npm" / CODEX_VERSION


def codex_version(executable: Path) -> str | None:
    """`codex --version` in a scratch CODEX_HOME (under /var/tmp: codex refuses helpers under /tmp)."""
    scratch = Path(tempfile.mkdtemp(prefix="codex-version-", dir="/var/tmp"))
    env = {"PATH": os.environ.get("PATH", ""), "CODEX_HOME": str(scratch), "HOME": str(scratch)}
    try:
        done = subprocess.run(
            [str(executable), "--version"],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=VERSION_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = done.stdout.strip()
    return text if done.returncode == 0 and text.startswith("codex-cli") else None


def codex_cli() -> Path | str:
    """The codex wrapper of the pinned version, installed with npm first if the cache lacks it; else why not."""
    explicit = os.environ.get("MCU_ARMS_REAL_CODEX")
    if explicit:
        return (
            Path(explicit) if codex_version(Path(explicit)) else f"MCU_ARMS_REAL_CODEX={explicit} answers no --version"
        )
    if shutil.which("npm") is None or shutil.which("node") is None:
        return "npm and node are needed to install the real codex CLI (@openai/codex) and are not on PATH"
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    wrapper = cache / "node_modules" / ".bin" / "codex"
    with FileLock(str(cache / ".install.lock")):
        if wrapper.exists() and codex_version(wrapper) == f"codex-cli {CODEX_VERSION}":
            return wrapper
        command = [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(cache),
            f"{CODEX_PACKAGE}@{CODEX_VERSION}",
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=NPM_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return f"`{' '.join(command)}` took over {NPM_TIMEOUT_S} s: is the npm registry reachable?"
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return f"`npm install {CODEX_PACKAGE}@{CODEX_VERSION}` failed (rc={done.returncode}): " + " | ".join(
                lines[:3]
            )
        if codex_version(wrapper) != f"codex-cli {CODEX_VERSION}":
            return (
                f"{CODEX_PACKAGE}@{CODEX_VERSION} installed under {cache}, but `codex --version` fails "
                "(no binary for this platform?)"
            )
    return wrapper
