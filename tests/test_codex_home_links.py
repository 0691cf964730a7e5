"""The CODEX_HOME builder never follows a link: a link planted at the home, `sqlite/`, `home/`, a stub or ROOT/arm
leaves its target byte- and mode-identical; special files at stub names are replaced; the credential must be a
regular file; a locked session store is left alone, a malformed one moved aside with its sidecars; one purple per
home."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from run_helpers import wait_for

from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation import codex_home
from mcu_arms.isolation.codex_home import PERSONAL_CONFIG_STUBS, build_codex_home, hold_codex_home

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def local_dir(tmp_path):
    """A scratch dir on local disk outside /tmp (codex homes are refused under /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="mcu-arms-links-", dir="/var/tmp"))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def auth(tmp_path) -> Path:
    path = tmp_path / "auth.json"
    path.write_text('{"tokens": {}}')
    path.chmod(0o600)
    return path


def precious(directory: Path) -> Path:
    """A directory the user cares about: files with content, modes that are not 0700/0600."""
    directory.mkdir(parents=True)
    (directory / "AGENTS.md").write_text("my personal instructions\n")
    (directory / "notes.txt").write_text("keep me\n")
    (directory / "AGENTS.md").chmod(0o644)
    directory.chmod(0o755)
    return directory


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under `root` (and root itself): its mode and, for files, its bytes."""
    entries = {".": (os.lstat(root).st_mode, None)}
    for path in root.rglob("*"):
        info = os.lstat(path)
        entries[str(path.relative_to(root))] = (info.st_mode, path.read_bytes() if stat.S_ISREG(info.st_mode) else None)
    return entries


def test_a_home_that_is_a_link_is_refused_and_its_target_untouched(local_dir, auth):
    target = precious(local_dir / "my-real-codex")
    before = snapshot(target)
    (local_dir / "codex").mkdir()
    (local_dir / "codex" / "arm1").symlink_to(target)
    with pytest.raises(UserError, match="never followed through a link") as refused:
        build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert str(target) in str(refused.value)
    assert snapshot(target) == before


def test_root_arm_linked_into_tmp_is_refused_and_nothing_is_created_there(local_dir, auth):
    with tempfile.TemporaryDirectory(dir="/tmp") as elsewhere:
        before = snapshot(Path(elsewhere))
        (local_dir / "codex").mkdir()
        (local_dir / "codex" / "arm1").symlink_to(elsewhere)
        with pytest.raises(UserError, match="link"):
            build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
        assert snapshot(Path(elsewhere)) == before


@pytest.mark.parametrize("inner", ["sqlite", "home"])
def test_a_linked_sqlite_or_pinned_home_is_refused_and_its_target_untouched(local_dir, auth, inner):
    build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    target = precious(local_dir / f"my-{inner}")
    before = snapshot(target)
    home = local_dir / "codex" / "arm1"
    subprocess.run(["rm", "-rf", str(home / inner)], check=True)
    (home / inner).symlink_to(target)
    with pytest.raises(UserError, match=f"{inner} is a symbolic link"):
        build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert snapshot(target) == before


def test_a_stub_linked_to_a_file_is_replaced_and_the_file_keeps_bytes_and_mode(local_dir, auth):
    target = precious(local_dir / "mine")
    before = snapshot(target)
    home = local_dir / "codex" / "arm1"
    home.mkdir(parents=True)
    (home / "AGENTS.md").symlink_to(target / "AGENTS.md")
    (home / "lessons.md").symlink_to(target)  # a link to a directory at a stub name
    built = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert snapshot(target) == before
    for name in ("AGENTS.md", "lessons.md"):
        info = os.lstat(home / name)
        assert stat.S_ISREG(info.st_mode) and info.st_size == 0 and stat.S_IMODE(info.st_mode) == 0o600
    assert any("AGENTS.md was a symbolic link" in action for action in built.actions)


def test_special_files_at_stub_names_are_replaced_by_empty_files(local_dir, auth):
    home = local_dir / "codex" / "arm1"
    home.mkdir(parents=True)
    os.mkfifo(home / "AGENTS.md")
    (home / "RTK.md").mkdir()
    (home / "RTK.md" / "inside").write_text("a directory at a stub name")
    built = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)  # a FIFO opened for reading would hang
    for name in PERSONAL_CONFIG_STUBS:
        info = os.lstat(home / name)
        assert stat.S_ISREG(info.st_mode) and info.st_size == 0, name
    assert any("AGENTS.md was a FIFO" in action for action in built.actions)
    (aside,) = home.glob("RTK.md.moved-*")
    assert (aside / "inside").read_text() == "a directory at a stub name"


def test_the_credential_must_be_a_regular_file(local_dir, tmp_path):
    credential_dir = tmp_path / "auth.json"
    credential_dir.mkdir()
    with pytest.raises(UserError, match="not a regular file") as refused:
        build_codex_home("arm1", local_dir / "codex", credential_dir, {}, NOW)
    assert refused.value.key == "codex.auth"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(UserError, match="does not exist"):
        build_codex_home("arm1", local_dir / "codex", dangling, {}, NOW)
    assert not (local_dir / "codex").exists()


def test_a_codex_root_that_is_a_file_or_a_lock_that_loops_is_a_clear_error(local_dir, auth):
    (local_dir / "file-root").write_text("not a directory")
    with pytest.raises(UserError) as refused:
        build_codex_home("arm1", local_dir / "file-root", auth, {}, NOW)
    assert refused.value.key == "codex.root" and "file-root" in refused.value.render()
    root = local_dir / "codex"
    root.mkdir()
    (root / ".arm1.lock").symlink_to(root / ".arm1.lock")
    with pytest.raises(UserError, match="symbolic links") as looped:
        build_codex_home("arm1", root, auth, {}, NOW)
    assert ".arm1.lock" in looped.value.render()


WRITER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
connection.execute("INSERT INTO t VALUES (2)")
print("locked", flush=True)
sys.stdin.readline()
connection.execute("COMMIT")
print(connection.execute("PRAGMA integrity_check").fetchone()[0], flush=True)
"""


def test_a_locked_session_store_is_waited_for_reported_and_left_under_its_writer(local_dir, auth, monkeypatch):
    monkeypatch.setattr(codex_home, "SESSION_STORE_BUSY_WAIT_S", 0.5)
    built = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    store = built.sqlite_dir / "thread_history_1.sqlite"
    connection = sqlite3.connect(store)
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "locked"
        assert Path(f"{store}-journal").exists()
        again = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
        assert store.exists() and Path(f"{store}-journal").exists()
        assert not list(built.sqlite_dir.glob("*.corrupt-*"))
        assert any("held by a live writer" in warning and "left as it is" in warning for warning in again.warnings)
        writer.stdin.write("\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "ok"  # its transaction was never disturbed
    finally:
        writer.kill()
        writer.wait(timeout=10)


def test_a_malformed_store_moves_aside_with_its_wal_shm_and_journal(local_dir, auth):
    built = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    store = built.sqlite_dir / "thread_history_9.sqlite"
    store.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{store}{suffix}").write_bytes(b"sidecar " + suffix.encode())
    again = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    aside = built.sqlite_dir / "thread_history_9.sqlite.corrupt-20261130T120000"
    assert aside.exists() and not store.exists()
    for suffix in ("-wal", "-shm", "-journal"):
        assert not Path(f"{store}{suffix}").exists()
        assert Path(f"{aside}{suffix}").read_bytes() == b"sidecar " + suffix.encode()
    assert any("malformed" in warning for warning in again.warnings)


HOLDER = """
import sys
from pathlib import Path
from mcu_arms.isolation.codex_home import hold_codex_home
with hold_codex_home(Path(sys.argv[1])):
    print("holding", flush=True)
    sys.stdin.readline()
"""


def test_one_purple_per_home_and_the_builder_leaves_a_home_in_use_alone(local_dir, auth):
    built = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(built.home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(UserError, match=f"in use by another purple \\(pid {holder.pid}\\)"):
            with hold_codex_home(built.home):
                pass
        with pytest.raises(UserError, match=f"in use by a running purple \\(pid {holder.pid}\\)"):
            build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    wait_for(lambda: holder.poll() is not None, "the holder to exit", timeout=10)
    with hold_codex_home(built.home):  # the kernel dropped the dead holder's lock
        pass
    build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
