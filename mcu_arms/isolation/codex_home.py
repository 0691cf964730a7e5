"""One CODEX_HOME per arm, built idempotently. Each rule here is a failure that really happened, silently:

- a private session store: six arms sharing one thread_history sqlite corrupted it, breaking `codex exec resume`
  for every process on the host;
- the credential is a symlink, never a copy: copies share a single-use refresh token, and the second arm to refresh
  gets 401 on every later turn;
- empty real files at the personal-instruction names: otherwise a wrapper links ~/.codex/AGENTS.md and friends in,
  and codex prepends them to every turn (24 KB ahead of the agent's own prompt);
- never under /tmp: codex refuses to create its helper binaries under a temporary directory.
"""

from __future__ import annotations

import getpass
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.timestamps import file_stamp

PERSONAL_CONFIG_STUBS = ("AGENTS.md", "AGENTS.override.md", "lessons.md", "RTK.md")
CODEX_CONFIG_NAME = "config.toml"
CODEX_CONFIG_HEADER = "# Written by mcu-arms: this arm's model provider. Rewritten at every episode; edits are lost.\n"
BASE_BYTES = 6 * 1024 * 1024
BYTES_PER_TURN = 20 * 1024
STEPS_PER_TURN = 6  # a planning turn queues several actions; 12,000 steps took 1,500-2,000 turns


class CodexHome(BaseModel):
    """Where an arm's codex state lives, and what building it did."""

    arm: str
    home: Path
    sqlite_dir: Path
    pinned_home: Path
    auth_link: Path
    auth_target: Path
    actions: list[str] = []
    warnings: list[str] = []

    def environment(self) -> dict[str, str]:
        """The variables a codex-driven purple runs with: its own home, sqlite dir and a pinned HOME."""
        return {
            "CODEX_HOME": str(self.home),
            "CODEX_SQLITE_HOME": str(self.sqlite_dir),
            "HOME": str(self.pinned_home),
        }


def default_root(env: Mapping[str, str]) -> Path:
    if env.get("MCU_CODEX_ROOT"):
        return Path(env["MCU_CODEX_ROOT"])
    user = env.get("USER") or getpass.getuser()
    return Path("/var/tmp") / f"mcu-codex-{user}"


def default_auth(env: Mapping[str, str]) -> Path:
    if env.get("MCU_CODEX_AUTH"):
        return Path(env["MCU_CODEX_AUTH"])
    return Path(env.get("HOME", str(Path.home()))) / ".codex" / "auth.json"


def temporary_dir_reason(
    path: Path, env: Mapping[str, str], *, set_by: str = "[codex] root or MCU_CODEX_ROOT"
) -> str | None:
    """Why `path` is refused as a codex root (it is under /tmp or $TMPDIR), or None; `set_by` says where to fix it."""
    resolved = Path(os.path.realpath(path))
    for temp in {"/tmp", env.get("TMPDIR") or "/tmp"}:
        temp_real = Path(os.path.realpath(temp))
        if resolved == temp_real or temp_real in resolved.parents:
            return (
                f"{path} is under the temporary directory {temp}: codex refuses to create its helper binaries "
                "there (\"Refusing to create helper binaries under temporary dir\"); use local disk such as "
                f"/var/tmp (set {set_by})"
            )
    return None


def plan_codex_home(arm: str, root: Path, auth: Path) -> CodexHome:
    """The paths an arm's home will have, without touching anything (for plan --dry-run)."""
    home = root / arm
    return CodexHome(
        arm=arm,
        home=home,
        sqlite_dir=home / "sqlite",
        pinned_home=home / "home",
        auth_link=home / "auth.json",
        auth_target=auth,
    )


def _database_is_sound(path: Path) -> bool:
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = connection.execute("PRAGMA integrity_check").fetchall()
        finally:
            connection.close()
    except sqlite3.DatabaseError:
        return False
    return rows == [("ok",)]


def _move_aside(path: Path, now: datetime) -> Path:
    target = path.with_name(f"{path.name}.corrupt-{file_stamp(now)}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            sidecar.rename(target.with_name(target.name + suffix))
    return target


def build_codex_home(
    arm: str,
    root: Path,
    auth: Path,
    env: Mapping[str, str],
    now: datetime,
    expected_turns: int = 0,
) -> CodexHome:
    """Create or repair the arm's CODEX_HOME under a file lock. Safe to run again: it converges."""
    reason = temporary_dir_reason(root, env)
    if reason:
        raise UserError(reason, key="codex.root")
    if not auth.exists():
        raise UserError(
            f"the codex credential {auth} does not exist: log in with `codex login`, or point [codex] auth / "
            "MCU_CODEX_AUTH at the auth.json to share",
            key="codex.auth",
        )
    result = plan_codex_home(arm, root, auth)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{arm}.lock")):
        for directory in (result.home, result.sqlite_dir, result.pinned_home):
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o700)
        _link_credential(result, now)
        _write_stubs(result, now)
        _check_session_store(result, now)
    _check_disk(result, expected_turns)
    return result


def _link_credential(result: CodexHome, now: datetime) -> None:
    link, target = result.auth_link, Path(os.path.abspath(result.auth_target))
    if link.is_symlink():
        if Path(os.readlink(link)) == target:
            return
        link.unlink()
        result.actions.append(f"auth.json pointed elsewhere; relinked to {target}")
    elif link.exists():
        aside = link.with_name(f"auth.json.copy-{file_stamp(now)}")
        link.rename(aside)
        result.warnings.append(
            f"auth.json was a copy of a credential (copies break on the single-use refresh token); moved to {aside}"
        )
    link.symlink_to(target)
    result.actions.append(f"auth.json -> {target}")


def _write_stubs(result: CodexHome, now: datetime) -> None:
    for name in PERSONAL_CONFIG_STUBS:
        stub = result.home / name
        if stub.is_symlink():
            stub.unlink()  # never write through a link into the user's real instructions
            result.actions.append(f"{name} was a symlink; replaced by an empty file")
        elif stub.exists() and stub.stat().st_size > 0:
            aside = stub.with_name(f"{name}.moved-{file_stamp(now)}")
            stub.rename(aside)
            result.warnings.append(f"{name} had content (sent ahead of every turn); moved to {aside}")
        if not stub.exists():
            stub.touch()
            os.chmod(stub, 0o600)


def _check_session_store(result: CodexHome, now: datetime) -> None:
    for directory in (result.home, result.sqlite_dir):
        for database in sorted(directory.glob("thread_history_*.sqlite")):
            if not _database_is_sound(database):
                aside = _move_aside(database, now)
                result.warnings.append(
                    f"{database.name} failed PRAGMA integrity_check; moved to {aside.name} (codex rebuilds it)"
                )


def _check_disk(result: CodexHome, expected_turns: int) -> None:
    needed = BASE_BYTES + BYTES_PER_TURN * expected_turns
    free = shutil.disk_usage(result.home).free
    if free < needed:
        result.warnings.append(
            f"only {free / 1e6:.1f} MB free under {result.home}; the arm needs about {needed / 1e6:.1f} MB "
            f"(6 MB + 20 KB x {expected_turns} turns)"
        )


def audit_codex_home(home: Path) -> dict[str, bool | str]:
    """What a report states about a home: credential linked, stubs empty, not under a temporary dir."""
    auth = home / "auth.json"
    return {
        "auth_is_symlink": auth.is_symlink(),
        "auth_target": os.readlink(auth) if auth.is_symlink() else "",
        "stubs_empty": all(
            (home / name).exists() and not (home / name).is_symlink() and (home / name).stat().st_size == 0
            for name in PERSONAL_CONFIG_STUBS
        ),
        "private_mode": stat.S_IMODE(home.stat().st_mode) == 0o700 if home.exists() else False,
        "under_tmp": temporary_dir_reason(home, os.environ) is not None,
    }


def write_codex_config(home: Path, provider: str | None, table: Mapping[str, str | int], now: datetime) -> str | None:
    """$CODEX_HOME/config.toml holding the arm's model provider, mode 0600: a base URL that carries a credential
    (userinfo, a query parameter) reaches codex through a private file, never a command line anyone can read.

    Without a provider the file is removed. One that mcu-arms did not write (settings codex would apply to every
    turn) or a link in its place is moved aside, never written through; returns the warning saying so, else None.
    """
    import tomlkit

    path = home / CODEX_CONFIG_NAME
    header = CODEX_CONFIG_HEADER.encode()
    warning = None
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as found:
            ours = stat.S_ISREG(os.fstat(found.fileno()).st_mode) and found.read(len(header)) == header
    except FileNotFoundError:
        ours = None
    except OSError:  # ELOOP: a link stands there
        ours = False
    if ours is False:
        aside = path.with_name(f"{CODEX_CONFIG_NAME}.moved-{file_stamp(now)}")
        while os.path.lexists(aside):
            aside = aside.with_name(aside.name + "+")
        path.rename(aside)
        warning = f"{path} was not written by mcu-arms (codex applies it to every turn); moved to {aside}"
    elif ours and provider is None:
        path.unlink()
    if provider is None:
        return warning
    document = tomlkit.document()
    document["model_provider"] = provider
    document["model_providers"] = {provider: dict(table)}
    descriptor, temporary = tempfile.mkstemp(prefix=f".{CODEX_CONFIG_NAME}.", dir=home)  # mode 0600, O_EXCL
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(CODEX_CONFIG_HEADER + tomlkit.dumps(document))
    os.replace(temporary, path)  # replaces a name, never follows one
    return warning
