"""Port checks (a real socket, a real child process: both survive) and the per-arm CODEX_HOME."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
from cli_support import invoke

from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation.codex_home import PERSONAL_CONFIG_STUBS, audit_codex_home, build_codex_home
from mcu_arms.isolation.ports import PortRegistry, busy_reason

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

ARM = """\
agent = "noop"
task = "crafting"
simulator = "embedded"

[ports]
green = {green}
purple = "auto"
"""


@pytest.fixture
def local_dir(tmp_path):
    """A scratch dir on local disk outside /tmp (codex homes are refused under /tmp)."""
    path = Path("/var/tmp") / f"mcu-arms-test-{os.getpid()}-{tmp_path.name}"
    path.mkdir(parents=True)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def env(local_dir, tmp_path):
    return {
        "PATH": os.environ["PATH"],
        "USER": "tester",
        "MCU_ARMS_STATE_DIR": str(local_dir / "state"),
        "MCU_CODEX_ROOT": str(local_dir / "codex"),
        "MCU_CODEX_AUTH": str(tmp_path / "auth.json"),
    }


def test_a_port_held_by_a_socket_aborts_the_plan(tmp_path, env):
    (tmp_path / "arms").mkdir()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        (tmp_path / "arms" / "a.toml").write_text(ARM.format(green=port))
        outcome = invoke(tmp_path, env, "plan", "--arm", "a")
        assert outcome.exit_code == 2
        assert f"port {port}" in outcome.err and f"pid {os.getpid()}" in outcome.err
        assert "nothing was signalled" in outcome.err
        assert holder.fileno() != -1  # still ours, still listening
        assert busy_reason("127.0.0.1", port) is not None
    assert not (tmp_path / "output").exists()


def test_a_port_held_by_a_child_process_aborts_and_the_child_survives(tmp_path, env):
    (tmp_path / "arms").mkdir()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,sys,time\ns=socket.socket();s.bind(('127.0.0.1',0));s.listen()\n"
            "print(s.getsockname()[1],flush=True)\ntime.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(child.stdout.readline())
        (tmp_path / "arms" / "a.toml").write_text(ARM.format(green=port))
        outcome = invoke(tmp_path, env, "plan", "--arm", "a")
        assert outcome.exit_code == 2
        assert f"pid {child.pid}" in outcome.err
        assert child.poll() is None and psutil.Process(child.pid).is_running()
    finally:
        child.kill()
        child.wait()


def test_a_reserved_port_is_refused_to_another_process(local_dir):
    env = {"MCU_ARMS_STATE_DIR": str(local_dir / "state")}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "import sys\nfrom mcu_arms.isolation.ports import PortRegistry\n"
        "from mcu_arms.contracts.errors import UserError\n"
        f"try:\n  PortRegistry({env!r}).reserve('127.0.0.1', {{{port}: 'green'}}, 'other').__enter__()\n"
        "except UserError as e:\n  print(e); sys.exit(3)\n"
    )
    with PortRegistry(env).reserve("127.0.0.1", {port: "green"}, owner="mine"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3 and "reserved by mcu-arms pid" in done.stdout
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr  # released when the block ended


def make_auth(tmp_path: Path) -> Path:
    auth = tmp_path / "auth.json"
    auth.write_text('{"tokens": {}}')
    os.chmod(auth, 0o600)
    return auth


def test_home_layout_modes_link_and_stubs(local_dir, tmp_path):
    auth = make_auth(tmp_path)
    home = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert home.home == local_dir / "codex" / "arm1"
    assert stat.S_IMODE(home.home.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.sqlite_dir.stat().st_mode) == 0o700
    assert home.auth_link.is_symlink() and Path(os.readlink(home.auth_link)) == auth
    for name in PERSONAL_CONFIG_STUBS:
        stub = home.home / name
        assert stub.is_file() and not stub.is_symlink() and stub.stat().st_size == 0
    assert home.environment()["CODEX_SQLITE_HOME"] == str(home.sqlite_dir)
    audit = audit_codex_home(home.home)
    assert audit["auth_is_symlink"] and audit["stubs_empty"] and audit["private_mode"] and not audit["under_tmp"]
    again = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert again.actions == [] and again.warnings == []  # idempotent


def test_a_symlinked_stub_is_replaced_never_written_through(local_dir, tmp_path):
    auth = make_auth(tmp_path)
    personal = tmp_path / "my_AGENTS.md"
    personal.write_text("my personal instructions")
    home_dir = local_dir / "codex" / "arm1"
    home_dir.mkdir(parents=True)
    (home_dir / "AGENTS.md").symlink_to(personal)
    home = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert personal.read_text() == "my personal instructions"
    assert not (home.home / "AGENTS.md").is_symlink() and (home.home / "AGENTS.md").stat().st_size == 0
    assert any("AGENTS.md was a symbolic link" in action for action in home.actions)


def test_a_copied_credential_is_moved_aside_and_linked(local_dir, tmp_path):
    auth = make_auth(tmp_path)
    home_dir = local_dir / "codex" / "arm1"
    home_dir.mkdir(parents=True)
    (home_dir / "auth.json").write_text("a stale copy")
    home = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert home.auth_link.is_symlink()
    assert (home_dir / "auth.json.copy-20261130T120000").read_text() == "a stale copy"


def test_home_under_tmp_is_refused(tmp_path):
    auth = make_auth(tmp_path)
    with pytest.raises(UserError, match="helper binaries"):
        build_codex_home("arm1", Path("/tmp/codex-root"), auth, {}, NOW)
    with pytest.raises(UserError, match="temporary directory"):
        build_codex_home("arm1", Path("/var/tmp/x"), auth, {"TMPDIR": "/var/tmp"}, NOW)
    assert not Path("/tmp/codex-root").exists()


def test_missing_credential_is_a_clear_error(local_dir, tmp_path):
    with pytest.raises(UserError, match="codex login"):
        build_codex_home("arm1", local_dir / "codex", tmp_path / "missing.json", {}, NOW)


def test_corrupt_thread_history_is_moved_aside(local_dir, tmp_path):
    auth = make_auth(tmp_path)
    home = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    good = home.sqlite_dir / "thread_history_2.sqlite"
    connection = sqlite3.connect(good)
    connection.execute("create table t (x)")
    connection.commit()
    connection.close()
    bad = home.sqlite_dir / "thread_history_1.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    again = build_codex_home("arm1", local_dir / "codex", auth, {}, NOW)
    assert not bad.exists()
    assert (home.sqlite_dir / "thread_history_1.sqlite.corrupt-20261130T120000").exists()
    assert good.exists()
    assert any("thread_history_1.sqlite is malformed" in warning for warning in again.warnings)


def test_codex_home_exports_evaluated_in_a_shell_give_the_purple_its_run_environment(env, tmp_path):
    make_auth(tmp_path)
    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "arm1.toml").write_text(ARM.format(green=9500).replace('"noop"', '"worldmodel"'))
    outcome = invoke(tmp_path, env, "codex-home", "arm1")
    assert outcome.exit_code == 0, outcome.err
    assert "# replaces codex-home.sh's CODEX_RUNTIME_HOME" in outcome.out
    assert "# replaces codex-home.sh's CODEX_SQLITE_DIR" in outcome.out

    names = ("CODEX_HOME", "CODEX_SQLITE_HOME", "HOME")
    script = f'eval "$("{sys.executable}" -m mcu_arms codex-home arm1)" && printf "%s\\n" ' + " ".join(
        f'"${name}"' for name in names
    )
    shell = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.returncode == 0, shell.stderr
    evaluated = dict(zip(names, shell.stdout.splitlines(), strict=True))

    planned = invoke(tmp_path, env, "plan", "--dry-run", "--json", "--arm", "arm1")
    assert planned.exit_code == 0, planned.err
    purple = next(p for p in json.loads(planned.out)["plans"][0]["processes"] if p["role"] == "purple")
    assert evaluated == {name: purple["env"][name] for name in names}
    assert evaluated["HOME"] == f"{env['MCU_CODEX_ROOT']}/arm1/home"


def test_codex_home_blames_the_flag_or_variable_its_refused_value_came_from(env, tmp_path):
    make_auth(tmp_path)
    from_flag = invoke(tmp_path, env, "codex-home", "arm1", "--root", "/tmp/nope")
    assert from_flag.exit_code == 2 and "flag '--root'" in from_flag.err and "codex.root" not in from_flag.err
    assert "Refusing to create helper binaries" in from_flag.err
    from_variable = invoke(tmp_path, {**env, "MCU_CODEX_ROOT": "/tmp/nope"}, "codex-home", "arm1")
    assert from_variable.exit_code == 2 and "variable 'MCU_CODEX_ROOT'" in from_variable.err
    no_credential = invoke(tmp_path, env, "codex-home", "arm1", "--auth", str(tmp_path / "missing.json"))
    assert no_credential.exit_code == 2 and "flag '--auth'" in no_credential.err


def test_new_arm_from_template_keeps_comments_and_never_overwrites(tmp_path, env):
    outcome = invoke(tmp_path, env, "new", "trial", "--agent", "random", "--task", "combat")
    assert outcome.exit_code == 0, outcome.err
    text = (tmp_path / "arms" / "trial.toml").read_text()
    assert 'name = "trial"' in text and 'agent = "random"' in text and 'task = "combat"' in text
    assert "# Seconds the green waits for each action" in text
    again = invoke(tmp_path, env, "new", "trial")
    assert again.exit_code == 2 and "exists already" in again.err
    assert (tmp_path / "arms" / "trial.toml").read_text() == text
    bad = invoke(tmp_path, env, "new", "wrong", "--task", "building")
    assert bad.exit_code == 2 and not (tmp_path / "arms" / "wrong.toml").exists()


def test_new_arm_from_another_copies_its_settings_and_reports_a_broken_source_at_its_own_line(tmp_path, env):
    source = tmp_path / "source.toml"
    source.write_text(ARM.format(green=9500).replace('"embedded"', '"embedded"\nsteps = 77'))
    outcome = invoke(tmp_path, env, "new", "copy", "--from", str(source))
    assert outcome.exit_code == 0, outcome.err
    text = (tmp_path / "arms" / "copy.toml").read_text()
    assert 'name = "copy"' in text and "steps = 77" in text and "# Seconds the green waits" in text
    missing = invoke(tmp_path, env, "new", "other", "--from", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 2 and "nope.toml: no such arm file" in missing.err
    source.write_text(source.read_text().replace("steps = 77", "stepz = 77"))
    broken = invoke(tmp_path, env, "new", "other", "--from", str(source))
    assert broken.exit_code == 2 and "source.toml:" in broken.err and "'stepz'" in broken.err
    directory = invoke(tmp_path, env, "new", "other", "--from", str(tmp_path))
    assert directory.exit_code == 2 and "cannot read the arm file" in directory.err
    assert not (tmp_path / "arms" / "other.toml").exists()


def test_new_from_an_arm_name_gets_auto_ports_and_plans_at_once_beside_its_source(tmp_path, env):
    (tmp_path / "arms").mkdir()
    fixed = (
        ARM.format(green=9500).replace('purple = "auto"', "purple = 9501").replace("[ports]", "steps = 77\n\n[ports]")
    )
    (tmp_path / "arms" / "fixed.toml").write_text(fixed)
    outcome = invoke(tmp_path, env, "new", "copy", "--from", "fixed")
    assert outcome.exit_code == 0, outcome.err
    assert outcome.out.strip() == "wrote arms/copy.toml; check it with: mcu-arms plan --dry-run arms/copy.toml"
    text = (tmp_path / "arms" / "copy.toml").read_text()
    lines = text.splitlines()
    assert 'green = "auto"' in lines and 'purple = "auto"' in lines
    # steps fills the template's own commented line, under its explanation, not a line appended at the end
    assert lines[lines.index("steps = 77") - 1].startswith("# categories at 1200")
    assert "# steps = 12000" not in text and text.count("steps = ") == 1
    planned = invoke(tmp_path, env, "plan", "--dry-run", "--json", "--arm", "fixed", "--arm", "copy")
    assert planned.exit_code == 0, planned.err
    source, copy = json.loads(planned.out)["plans"]
    assert copy["ports_auto"] == ["green", "purple"] and {copy["green_port"], copy["purple_port"]}.isdisjoint(
        {9500, 9501}
    )
    assert copy["fingerprint"] == source["fingerprint"]

    # a source silent on a key the template sets (simulator: minestudio by default; seed beside seeds) is copied
    # silent too, so that the copy runs what its source runs
    (tmp_path / "arms" / "terse.toml").write_text(
        'agent = "noop"\ntask = "crafting"\nseeds = [1, 2]\n\n[ports]\ngreen = "auto"\npurple = "auto"\n'
    )
    assert invoke(tmp_path, env, "new", "terse_copy", "--from", "terse").exit_code == 0
    both = invoke(tmp_path, env, "plan", "--dry-run", "--json", "--arm", "terse", "--arm", "terse_copy")
    assert both.exit_code == 0, both.err
    plans = json.loads(both.out)["plans"]
    assert {(p["settings"]["simulator"], p["fingerprint"]) for p in plans} == {("minestudio", plans[0]["fingerprint"])}

    asked = invoke(tmp_path, env, "new", "pinned", "--from", "copy", "--green-port", "9600", "--purple-port", "9601")
    assert asked.exit_code == 0, asked.err
    assert "green = 9600" in (tmp_path / "arms" / "pinned.toml").read_text()
    unknown = invoke(tmp_path, env, "new", "other", "--from", "nope")
    assert unknown.exit_code == 2 and "no arm named 'nope'" in unknown.err and "--from" in unknown.err
    assert "allowed: copy, fixed, pinned, terse, terse_copy" in unknown.err


def test_doctor_reports_missing_pieces_without_failing_hard(tmp_path, env):
    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "ms.toml").write_text(ARM.format(green=9500).replace('"embedded"', '"minestudio"'))
    outcome = invoke(
        tmp_path, {**env, "PATH": "/nonexistent", "MINESTUDIO_DIR": str(tmp_path / "ms")}, "doctor", "--json"
    )
    assert outcome.exit_code == 1

    checks = json.loads(outcome.out)["checks"]
    minestudio = " | ".join(c["detail"] for c in checks if c["needed_by"] == ["ms"] and c["status"] == "fail")
    assert "xvfb-run and Xvfb not on PATH" in minestudio and "java is not on PATH" in minestudio
    assert "xauth is not on PATH" in minestudio and "mcprec-6.13.jar" in minestudio
    assert any(c["name"] == "memory" and c["status"] in ("ok", "warn") for c in checks)


def test_doctor_checks_codex_its_credential_and_the_root_disk(tmp_path, env, local_dir):
    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "wm.toml").write_text(ARM.format(green=9500).replace('"noop"', '"worldmodel"'))
    missing = invoke(tmp_path, {**env, "PATH": "/nonexistent"}, "doctor", "--json")
    assert missing.exit_code == 1
    checks = {c["name"]: c for c in json.loads(missing.out)["checks"]}
    assert checks["codex CLI"]["status"] == "fail" and checks["codex credential"]["status"] == "fail"
    assert checks[f"codex root {local_dir / 'codex'}"]["status"] == "ok"

    make_auth(tmp_path)
    fake_codex = Path(__file__).parent / "fake_codex"
    versions = tmp_path / "versions.jsonl"
    user_home = tmp_path / "user"
    user_home.mkdir()
    ready = invoke(
        tmp_path,
        {
            **env,
            "PATH": f"{fake_codex}:{os.environ['PATH']}",
            "HOME": str(user_home),
            "FAKE_CODEX_VERSION_LOG": str(versions),
        },
        "doctor",
        "--json",
    )
    checks = {c["name"]: c for c in json.loads(ready.out)["checks"]}
    assert checks["codex CLI"]["status"] == "ok" and str(fake_codex / "codex") in checks["codex CLI"]["detail"]
    assert checks["codex credential"]["status"] == "ok" and "(0o600)" in checks["codex credential"]["detail"]
    assert ready.exit_code == 0, ready.out
    (asked,) = [json.loads(line) for line in versions.read_text().splitlines()]
    scratch = Path(asked["CODEX_HOME"])
    assert scratch.parent == local_dir / "codex" or local_dir in scratch.parents, "a scratch home by the codex root"
    assert asked["HOME"] == str(scratch) and not scratch.exists(), "removed afterwards"
    assert not (user_home / ".codex").exists()


@pytest.mark.parametrize(
    ("fstype", "refused"),
    [("nfs4", True), ("cifs", True), ("fuse.sshfs", True), ("ext4", False), ("overlay", False)],
)
def test_sqlite_paths_on_a_network_filesystem_are_refused(fstype, refused, tmp_path):
    from collections import namedtuple

    from mcu_arms.isolation.host import network_filesystem_reason

    Partition = namedtuple("Partition", "mountpoint fstype")
    partitions = [Partition("/", "ext4"), Partition("/var", fstype), Partition(str(tmp_path), "ext4")]
    reason = network_filesystem_reason(Path("/var/tmp/mcu-codex-x/arm"), partitions)  # not there yet: its parent
    assert (reason is not None) == refused
    if refused:
        assert fstype in reason and "local disk" in reason
    partitions[0] = Partition("/", fstype)
    assert network_filesystem_reason(tmp_path / "home", partitions) is None  # the longest mount wins


def test_doctor_says_whether_every_process_of_an_arm_can_be_found(tmp_path, env, monkeypatch):
    import mcu_arms.doctor as doctor
    from mcu_arms.process.containment import ContainmentSupport, containment_support

    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "a.toml").write_text(ARM.format(green=9500))
    host = containment_support()
    checks = {c["name"]: c for c in json.loads(invoke(tmp_path, env, "doctor", "--json").out)["checks"]}
    assert checks["process containment"]["status"] == ("ok" if host.cgroup is not None else "warn")
    monkeypatch.setattr(
        doctor, "containment_support", lambda: ContainmentSupport(None, "no cgroup v2 hierarchy is mounted", True)
    )
    lacking = {c["name"]: c for c in json.loads(invoke(tmp_path, env, "doctor", "--json").out)["checks"]}
    row = lacking["process containment"]
    assert row["status"] == "warn" and "no cgroup v2 hierarchy is mounted" in row["detail"]
    assert "scrubs its environment" in row["detail"] and "subreaper" in row["detail"]
