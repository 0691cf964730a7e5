"""What another program's A2A purple runs (agent = "a2a"): its code identity, and whether its command can start.

The code identity is what makes two such arms the same experiment: the git commit of the repository holding the
command's working directory plus a hash of its uncommitted changes (a dirty tree is recorded as such, never equal to
its commit), or, where that directory is no git repository, a hash of the files the arm's `identity` globs match.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from mcu_arms.contracts.errors import UserError

GIT_TIMEOUT_S = 10.0
NO_IDENTITY = "unknown (no git repository and no identity globs)"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        return subprocess.run(
            [git, "-C", str(cwd), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False, env=_git_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _git_env() -> dict[str, str]:
    """git's environment: the caller's, without what would point it at another repository."""
    return {key: value for key, value in os.environ.items() if not key.startswith("GIT_")} | {"LC_ALL": "C"}


def git_identity(cwd: Path) -> str | None:
    """ "git COMMIT" or "git COMMIT dirty HASH" for the repository holding `cwd`; None where there is none."""
    head = _git(cwd, "rev-parse", "HEAD")
    if head is None or head.returncode != 0:
        return None
    commit = head.stdout.decode().strip()
    diff = _git(cwd, "diff", "HEAD", "--binary")
    untracked = _git(cwd, "ls-files", "--others", "--exclude-standard", "-z")
    if diff is None or untracked is None or diff.returncode != 0 or untracked.returncode != 0:
        return f"git {commit} dirty unknown"
    digest = hashlib.sha256(diff.stdout)
    names = sorted(name for name in untracked.stdout.decode(errors="replace").split("\0") if name)
    for name in names:
        digest.update(b"\0untracked\0" + name.encode())
        digest.update(_file_bytes(cwd / name))  # ls-files names them relative to cwd
    if not diff.stdout and not names:
        return f"git {commit}"
    return f"git {commit} dirty {digest.hexdigest()[:16]}"


def _file_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else b""
    except OSError:
        return b""


def files_identity(cwd: Path, globs: list[str]) -> str:
    """ "files HASH" over the files `globs` match under `cwd` (their relative names and contents)."""
    matched = sorted({path for pattern in globs for path in cwd.glob(pattern) if path.is_file()})
    digest = hashlib.sha256()
    for path in matched:
        digest.update(str(path.relative_to(cwd)).encode() + b"\0")
        digest.update(_file_bytes(path) + b"\0")
    return f"files {digest.hexdigest()[:16]} ({len(matched)} files)"


def code_identity(cwd: Path, globs: list[str] | None) -> str:
    """The code identity of a purple started in `cwd`: its identity globs' hash where given, else its git state."""
    if globs:
        return files_identity(cwd, globs)
    return git_identity(cwd) or NO_IDENTITY


def command_problem(command: list[str], cwd: Path, env: Mapping[str, str]) -> str | None:
    """Why `command` cannot be started in `cwd` (None: its program is there and executable)."""
    if not cwd.is_dir():
        return f"its working directory {cwd} is no directory"
    program = command[0]
    if "/" not in program:
        if shutil.which(program, path=env.get("PATH")) is None:
            return f"{program!r} is not found on PATH"
        return None
    path = Path(program) if Path(program).is_absolute() else cwd / program
    if not path.is_file():
        return f"{program!r} does not exist (looked for {path})"
    if not os.access(path, os.X_OK):
        return f"{program!r} is not executable ({path})"
    return None


def refuse_unstartable(
    command: list[str], cwd: Path, env: Mapping[str, str], *, source: Path, line: int | None
) -> None:
    """A plan of an arm whose purple cannot start is refused, at the key to fix."""
    problem = command_problem(command, cwd, env)
    if problem is not None:
        raise UserError(
            f"the purple's command cannot start: {problem}",
            path=source,
            line=line,
            key="purple.command" if "directory" not in problem else "purple.cwd",
            allowed="an argv whose first word is a program on PATH or a path to an executable, e.g. "
            '["python", "my_purple.py"]',
        )
