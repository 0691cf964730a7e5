"""Keeping the private record of what we started (contracts/started.py): one file per episode in `<state dir>/started`,
0700 and owned by this user, every file 0600, nothing opened through a link.

Written when something is started or submitted, read by `stop`, `status`, the scheduler and `run-episode`, and
dropped once what it names is gone. Updates of one episode (a supervisor recording a child while its submitter
records the job id) are serialised by a lock on the directory.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from mcu_arms.atomic import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, LinkRefused, open_dir_nofollow
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.started import EpisodeRecord, StartedProcess, SubmittedJob
from mcu_arms.layout import STATE_DIR_ENV, prepared_state_dir, state_dir

RECORDS_DIR = "started"
RECORD_SUFFIX = ".json"
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def episode_key(episode_dir: Path | str) -> str:
    """How an episode is named in the record: its directory, resolved once."""
    return os.path.realpath(episode_dir)


def _file_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32] + RECORD_SUFFIX


def records_dir(env: Mapping[str, str]) -> Path:
    """Where the record is kept (what a message about it names)."""
    return state_dir(env) / RECORDS_DIR


def _refused(path: Path, why: str) -> UserError:
    return UserError(f"the private record of started processes {why}", path=path, key=STATE_DIR_ENV)


def _records_dir(env: Mapping[str, str], *, create: bool) -> int | None:
    """A descriptor of the records directory (None when there is none and `create` is false), checked: a directory,
    not a link, this user's, writable by nobody else."""
    root = state_dir(env)
    if create:
        prepared_state_dir(root)
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(root, "cannot be kept here: the state directory is a link or not a directory") from None
        raise _refused(root, f"cannot be opened: {error.strerror or error}") from None
    try:
        fd = open_dir_nofollow(RECORDS_DIR, dir_fd=root_fd, create_mode=PRIVATE_DIR_MODE if create else None)
    except FileNotFoundError:
        return None
    except LinkRefused:
        raise _refused(root / RECORDS_DIR, "is a link or not a directory; it is never followed") from None
    finally:
        os.close(root_fd)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        os.close(fd)
        raise _refused(
            root / RECORDS_DIR,
            "belongs to another user or others can write it: its records cannot be "
            "trusted; remove it (nothing it names is signalled meanwhile)",
        )
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        os.fchmod(fd, PRIVATE_DIR_MODE)
    return fd


def _read(fd: int, name: str) -> EpisodeRecord | None:
    """One record, or None when it is not there, not a plain file of ours, or not a record."""
    try:
        file_fd = os.open(name, os.O_RDONLY | _OPEN_FLAGS, dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(file_fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        try:
            return EpisodeRecord.model_validate_json(file.read())
        except (ValidationError, ValueError):
            return None


def _write(fd: int, name: str, record: EpisodeRecord) -> None:
    temporary = f".{name}.{uuid.uuid4().hex}.tmp"
    file_fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, PRIVATE_FILE_MODE, dir_fd=fd)
    try:
        with os.fdopen(file_fd, "w", encoding="utf-8") as file:
            file.write(record.model_dump_json())
        os.replace(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=fd)
        except OSError:
            pass
        raise


@contextmanager
def _locked(env: Mapping[str, str]) -> Iterator[int]:
    fd = _records_dir(env, create=True)
    assert fd is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _update(
    env: Mapping[str, str], episode_dir: Path | str, arm: str, episode: int, change: Callable[[EpisodeRecord], None]
) -> None:
    key = episode_key(episode_dir)
    name = _file_name(key)
    with _locked(env) as fd:
        record = _read(fd, name)
        if record is None or record.episode_dir != key:
            record = EpisodeRecord(episode_dir=key, arm=arm, episode=episode)
        change(record)
        if record.processes or record.slurm is not None:
            _write(fd, name, record)
        else:
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass


def record_started(
    env: Mapping[str, str], episode_dir: Path | str, arm: str, episode: int, process: StartedProcess
) -> None:
    """Keep what was just started for the episode (its role replaces an earlier one of the same role)."""

    def add(record: EpisodeRecord) -> None:
        record.processes[process.role] = process

    _update(env, episode_dir, arm, episode, add)


def record_submitted(
    env: Mapping[str, str], episode_dir: Path | str, arm: str, episode: int, job: SubmittedJob
) -> None:
    """Keep the Slurm submission of the episode: its job token's hash, and the job id once there is one."""

    def submitted(record: EpisodeRecord) -> None:
        record.slurm = job

    _update(env, episode_dir, arm, episode, submitted)


def forget_started(env: Mapping[str, str], episode_dir: Path | str, roles: list[str]) -> None:
    """Drop processes that are gone (the record file goes with its last entry)."""

    def drop(record: EpisodeRecord) -> None:
        for role in roles:
            record.processes.pop(role, None)

    record = episode_record(env, episode_dir)
    if record is not None:
        _update(env, episode_dir, record.arm, record.episode, drop)


def forget_submission(env: Mapping[str, str], episode_dir: Path | str) -> None:
    """Drop the Slurm submission of an episode whose report is final."""

    def drop(record: EpisodeRecord) -> None:
        record.slurm = None

    record = episode_record(env, episode_dir)
    if record is not None:
        _update(env, episode_dir, record.arm, record.episode, drop)


def episode_record(env: Mapping[str, str], episode_dir: Path | str) -> EpisodeRecord | None:
    """What we started for this episode directory, or None."""
    key = episode_key(episode_dir)
    fd = _records_dir(env, create=False)
    if fd is None:
        return None
    try:
        record = _read(fd, _file_name(key))
    finally:
        os.close(fd)
    return record if record is not None and record.episode_dir == key else None


def recorded_episodes(env: Mapping[str, str], arm_dir: Path | None = None) -> list[EpisodeRecord]:
    """Every episode with a record (of the arm whose output directory is `arm_dir`, when given), by episode."""
    fd = _records_dir(env, create=False)
    if fd is None:
        return []
    try:
        names = [name for name in os.listdir(fd) if name.endswith(RECORD_SUFFIX) and not name.startswith(".")]
        records = [record for name in names if (record := _read(fd, name)) is not None]
    finally:
        os.close(fd)
    if arm_dir is not None:
        parent = episode_key(arm_dir)
        records = [record for record in records if os.path.dirname(record.episode_dir) == parent]
    return sorted(records, key=lambda record: (record.arm, record.episode))


def started_processes(records: list[EpisodeRecord]) -> list[tuple[int, StartedProcess]]:
    """(episode number, process) for every process the records name."""
    return [(record.episode, process) for record in records for process in record.processes.values()]
