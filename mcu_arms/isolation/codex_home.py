"""One CODEX_HOME per arm, built idempotently. Each rule here is a failure that really happened, silently:

- a private session store: six arms sharing one thread_history sqlite corrupted it, breaking `codex exec resume`
  for every process on the host;
- the credential is a symlink, never a copy: copies share a single-use refresh token, and the second arm to refresh
  gets 401 on every later turn;
- empty real files at the personal-instruction names: otherwise a wrapper links ~/.codex/AGENTS.md and friends in,
  and codex prepends them to every turn (24 KB ahead of the agent's own prompt);
- never under /tmp: codex refuses to create its helper binaries under a temporary directory.

Nothing is ever followed through a link: every component the builder creates or changes is opened through its
parent's descriptor with O_NOFOLLOW (or lstat'ed first). A link where the home, `sqlite/` or `home/` should be is
refused; a link, FIFO, socket or device at a stub name is replaced by an empty file. One purple at a time serves
from a home: it holds the home's lock while it runs, and the builder will not touch a home whose lock is held.
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
from typing import Literal

from pydantic import BaseModel

from mcu_arms.atomic import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, LinkRefused, open_dir_nofollow
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.timestamps import file_stamp
from mcu_arms.isolation.locks import held_exclusively, is_held, locked

PERSONAL_CONFIG_STUBS = ("AGENTS.md", "AGENTS.override.md", "lessons.md", "RTK.md")
CODEX_CONFIG_NAME = "config.toml"
CODEX_CONFIG_HEADER = "# Written by mcu-arms: this arm's model provider. Rewritten at every episode; edits are lost.\n"
BASE_BYTES = 6 * 1024 * 1024
BYTES_PER_TURN = 20 * 1024
STEPS_PER_TURN = 6  # a planning turn queues several actions; 12,000 steps took 1,500-2,000 turns
# The lock a purple holds in its home while it serves.
PURPLE_LOCK = ".purple.lock"
# How long a session store held by a live writer is waited for before it is reported as locked (and left alone).
SESSION_STORE_BUSY_WAIT_S = 5.0
SESSION_STORE_SIDECARS = ("-wal", "-shm", "-journal")
StoreState = Literal["sound", "malformed", "locked", "unreadable"]
_MALFORMED_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_LOCKED_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


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
                'there ("Refusing to create helper binaries under temporary dir"); use local disk such as '
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


def _store_state(path: Path) -> tuple[StoreState, str]:
    """What a session store is: sound, malformed (moved aside), locked by a live writer, or unreadable (why).

    A read-only reader waits for a live writer, then says BUSY: locked. It cannot roll back a hot journal (an
    interrupted write, so no live writer holds it): then the file itself is checked as it stands (`immutable`)."""
    state, detail = _checked(path, "mode=ro")
    if state == "unreadable":
        as_it_stands, why = _checked(path, "mode=ro&immutable=1")
        if as_it_stands != "unreadable":
            return as_it_stands, why or detail
    return state, detail


def _checked(path: Path, options: str) -> tuple[StoreState, str]:
    try:
        connection = sqlite3.connect(f"file:{path}?{options}", uri=True, timeout=SESSION_STORE_BUSY_WAIT_S)
        try:
            rows = connection.execute("PRAGMA integrity_check").fetchall()
        finally:
            connection.close()
    except sqlite3.Error as error:
        code = getattr(error, "sqlite_errorcode", -1) & 0xFF
        if code in _LOCKED_CODES:
            return "locked", str(error)
        if code in _MALFORMED_CODES:
            return "malformed", str(error)
        return "unreadable", str(error)
    if rows == [("ok",)]:
        return "sound", ""
    return "malformed", "; ".join(str(row[0]) for row in rows[:3])


def _move_aside(path: Path, now: datetime) -> Path:
    target = path.with_name(f"{path.name}.corrupt-{file_stamp(now)}")
    path.rename(target)
    for suffix in SESSION_STORE_SIDECARS:
        sidecar = path.with_name(path.name + suffix)
        if os.path.lexists(sidecar):
            sidecar.rename(target.with_name(target.name + suffix))
    return target


def _credential_target(auth: Path) -> Path:
    """The credential to link: it must resolve to a regular file (a directory or a dangling link is refused)."""
    try:
        found = auth.stat()
    except FileNotFoundError:
        raise UserError(
            f"the codex credential {auth} does not exist: log in with `codex login`, or point [codex] auth / "
            "MCU_CODEX_AUTH at the auth.json to share",
            key="codex.auth",
        ) from None
    except OSError as error:
        raise UserError(f"the codex credential {auth} cannot be read: {error.strerror}", key="codex.auth") from None
    if not stat.S_ISREG(found.st_mode):
        raise UserError(
            f"the codex credential {auth} is not a regular file; point [codex] auth / MCU_CODEX_AUTH at auth.json",
            key="codex.auth",
        )
    return Path(os.path.abspath(auth))


def build_codex_home(
    arm: str,
    root: Path,
    auth: Path,
    env: Mapping[str, str],
    now: datetime,
    expected_turns: int = 0,
) -> CodexHome:
    """Create or repair the arm's CODEX_HOME under a file lock. Safe to run again: it converges.

    Refused (UserError) when the root is under /tmp, the home or one of its directories is a link, the credential
    is not a regular file, or a live purple serves from the home."""
    reason = temporary_dir_reason(root, env)
    if reason:
        raise UserError(reason, key="codex.root")
    target = _credential_target(auth)
    result = plan_codex_home(arm, root, target)
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not root.is_dir():
            raise UserError("the codex root is not a directory", path=root, key="codex.root")
        with locked(root / f".{arm}.lock"):
            root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                home_fd = _private_dir(root_fd, arm, result.home, result)
            finally:
                os.close(root_fd)
            try:
                _build_inside(home_fd, result, env, now)
            finally:
                os.close(home_fd)
    except OSError as error:
        where = error.filename or root
        raise UserError(
            f"cannot build the codex home: {error.strerror or error}", path=where, key="codex.root"
        ) from None
    _check_disk(result, expected_turns)
    return result


def _build_inside(home_fd: int, result: CodexHome, env: Mapping[str, str], now: datetime) -> None:
    reason = temporary_dir_reason(result.home, env)
    if reason:
        raise UserError(reason, key="codex.root")
    _refuse_a_home_in_use(result.home)
    for name, path in (("sqlite", result.sqlite_dir), ("home", result.pinned_home)):
        os.close(_private_dir(home_fd, name, path, result))
    _link_credential(home_fd, result, now)
    _write_stubs(home_fd, result, now)
    _check_session_store(result, now)


def _private_dir(parent_fd: int, name: str, path: Path, result: CodexHome) -> int:
    """A descriptor of the 0700 directory `name` in `parent_fd`, made if missing; a link there is refused."""
    try:
        fd = open_dir_nofollow(name, dir_fd=parent_fd, create_mode=PRIVATE_DIR_MODE)
    except LinkRefused:
        if os.path.islink(path):
            shown = f"a symbolic link (-> {os.readlink(path)})"
        else:
            shown = "not a directory"
        raise UserError(
            f"{path} is {shown}: a CODEX_HOME is never followed through a link, and nothing was changed; remove it "
            "or point [codex] root at a real directory",
            key="codex.root",
        ) from None
    if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_DIR_MODE:
        os.fchmod(fd, PRIVATE_DIR_MODE)
        result.actions.append(f"{path.name}/ made private (0700)")
    return fd


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _kind(found: os.stat_result) -> str:
    mode = found.st_mode
    for test, name in (
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "device"),
        (stat.S_ISBLK, "device"),
    ):
        if test(mode):
            return name
    return "regular file"


def _set_aside(home_fd: int, name: str, suffix: str, now: datetime) -> str:
    aside = f"{name}.{suffix}-{file_stamp(now)}"
    os.rename(name, aside, src_dir_fd=home_fd, dst_dir_fd=home_fd)
    return aside


def _link_credential(home_fd: int, result: CodexHome, now: datetime) -> None:
    target = str(result.auth_target)
    found = _lstat("auth.json", home_fd)
    if found is not None and stat.S_ISLNK(found.st_mode):
        if os.readlink("auth.json", dir_fd=home_fd) == target:
            return
        os.unlink("auth.json", dir_fd=home_fd)
        result.actions.append(f"auth.json pointed elsewhere; relinked to {target}")
    elif found is not None:
        kind = _kind(found)
        aside = _set_aside(home_fd, "auth.json", "copy", now)
        why = (
            "a copy of a credential (copies break on the single-use refresh token)"
            if kind == "regular file"
            else f"a {kind}"
        )
        result.warnings.append(f"auth.json was {why}; moved to {result.home / aside}")
    os.symlink(target, "auth.json", dir_fd=home_fd)
    result.actions.append(f"auth.json -> {target}")


def _write_stubs(home_fd: int, result: CodexHome, now: datetime) -> None:
    """Each personal-instruction name holds a regular, empty, 0600 file: links and special files are replaced (never
    written through), content and directories are moved aside."""
    for name in PERSONAL_CONFIG_STUBS:
        found = _lstat(name, home_fd)
        if found is not None and stat.S_ISREG(found.st_mode) and found.st_size == 0:
            _make_private_file(home_fd, name)
            continue
        if found is not None:
            kind = _kind(found)
            if kind in ("regular file", "directory"):
                aside = _set_aside(home_fd, name, "moved", now)
                what = "had content (sent ahead of every turn)" if kind == "regular file" else "was a directory"
                result.warnings.append(f"{name} {what}; moved to {result.home / aside}")
            else:
                os.unlink(name, dir_fd=home_fd)
                result.actions.append(f"{name} was a {kind}; replaced by an empty file")
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE, dir_fd=home_fd
        )
        os.fchmod(fd, PRIVATE_FILE_MODE)
        os.close(fd)


def _make_private_file(home_fd: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=home_fd)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)


def _check_session_store(result: CodexHome, now: datetime) -> None:
    """Only a malformed store is moved aside (with its -wal, -shm and -journal); one a live writer holds is waited
    for, then reported and left alone."""
    for directory in (result.home, result.sqlite_dir):
        for database in sorted(directory.glob("thread_history_*.sqlite")):
            if database.is_symlink():
                result.warnings.append(f"{database} is a symbolic link: not opened, not checked, left as it is")
                continue
            state, detail = _store_state(database)
            if state == "malformed":
                aside = _move_aside(database, now)
                result.warnings.append(
                    f"{database.name} is malformed ({detail}); moved to {aside.name} (codex rebuilds it)"
                )
            elif state == "locked":
                result.warnings.append(
                    f"{database.name} is held by a live writer (waited {SESSION_STORE_BUSY_WAIT_S:g} s: {detail}); "
                    "left as it is, not checked"
                )
            elif state == "unreadable":
                result.warnings.append(f"{database.name} could not be checked ({detail}); left as it is")


def _refuse_a_home_in_use(home: Path) -> None:
    """A home a live purple serves from is not rebuilt under it (its session store, stubs and link are in use)."""
    holder = is_held(home / PURPLE_LOCK)
    if holder is not None:
        raise UserError(
            f"CODEX_HOME {home} is in use by a running purple ({holder}): stop that arm first "
            "(`mcu-arms status`, `mcu-arms stop --arm ARM`)",
            key="codex.root",
        )


def hold_codex_home(home: Path):  # a context manager
    """Hold `home` for one purple for as long as the block runs; a second purple in the same home is refused."""
    return held_exclusively(
        home / PURPLE_LOCK,
        refused=lambda holder: UserError(
            f"CODEX_HOME {home} is in use by another purple ({holder}); one home serves one purple at a time",
            key="CODEX_HOME",
        ),
        key="CODEX_HOME",
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
        "stubs_empty": all(_is_empty_regular_file(home / name) for name in PERSONAL_CONFIG_STUBS),
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


def _is_empty_regular_file(path: Path) -> bool:
    try:
        found = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == 0
