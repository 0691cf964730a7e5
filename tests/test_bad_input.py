"""Bad input gets exit 2 naming the file and key, never a traceback: deep nesting, infinite numbers, a NUL in an
[env] value, an output/ that cannot hold episodes, a state dir or codex root that is a file, a link loop at a lock,
an address that is not an IP or not this host's; and an older unreadable episode does not hide a newer run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from run_helpers import run_cli, write_arm

from mcu_arms.layout import arm_lock

ARM = """agent = "random"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = 5
{extra}
[ports]
green = "auto"
purple = "auto"
{ports}
{tables}
"""


def arm_file(project: Path, name: str = "a", *, extra: str = "", ports: str = "", tables: str = "") -> Path:
    path = project / "arms" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ARM.format(extra=extra, ports=ports, tables=tables))
    return path


def refused(project: Path, state: Path, *args: str) -> str:
    done = run_cli(project, state, *args, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
    return done.stderr


def test_toml_nested_a_hundred_thousand_deep(tmp_path: Path):
    path = arm_file(tmp_path, extra="deep = " + "[" * 100_000 + "]" * 100_000)
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert str(path) in error and "nested too deeply" in error
    scenario = tmp_path / "scenario.toml"
    scenario.write_text("[config]\ndeep = " + "[" * 100_000 + "]" * 100_000)
    error = refused(tmp_path, tmp_path / "state", "evaluate", str(scenario))
    assert str(scenario) in error and "nested too deeply" in error


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_an_infinite_or_nan_step_timeout_is_refused_in_the_file_and_on_the_command_line(tmp_path: Path, value: str):
    arm_file(tmp_path, extra=f"step_timeout = {value}")
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert "key 'step_timeout'" in error and "a.toml:5" in error
    arm_file(tmp_path, "b")
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "b", "--step-timeout", value)
    assert "key '--step-timeout'" in error


def test_a_nul_byte_in_an_env_value_is_refused_at_plan_without_showing_the_value(tmp_path: Path):
    arm_file(tmp_path, tables='[env]\nDB_PASS = "hunter2\\u0000rest"\n')
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert "key 'env.DB_PASS'" in error and "NUL byte" in error and "hunter2" not in error


def test_an_output_that_is_a_file_is_a_clear_error(tmp_path: Path):
    arm_file(tmp_path)
    (tmp_path / "output").write_text("not a directory")
    error = refused(tmp_path, tmp_path / "state", "run", "--arm", "a")
    assert "output" in error and "cannot create the episode directory" in error


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only tmpfs needs root (permissions do not bind root)")
def test_a_read_only_output_is_a_clear_error(tmp_path: Path):
    arm_file(tmp_path)
    output = tmp_path / "output"
    output.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(output)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        error = refused(tmp_path, tmp_path / "state", "run", "--arm", "a")
        assert "Read-only file system" in error and str(output / "a") in error
    finally:
        subprocess.run(["umount", str(output)], check=True)


def test_a_state_dir_that_is_a_file_is_a_clear_error(tmp_path: Path):
    arm_file(tmp_path)
    state = tmp_path / "state"
    state.write_text("not a directory")
    error = refused(tmp_path, state, "plan", "--arm", "a")
    assert "key 'MCU_ARMS_STATE_DIR'" in error and str(state) in error


def test_a_link_loop_at_the_arm_lock_is_a_clear_error(tmp_path: Path):
    arm_file(tmp_path)
    state = tmp_path / "state"
    lock = arm_lock({"MCU_ARMS_STATE_DIR": str(state)}, tmp_path / "output" / "a")
    lock.parent.mkdir(parents=True)
    lock.symlink_to(lock)
    error = refused(tmp_path, state, "plan", "--arm", "a")
    assert str(lock) in error and "symbolic links" in error


def test_a_codex_root_that_is_a_file_is_a_clear_error(tmp_path: Path):
    root_file = Path(tempfile.mkdtemp(prefix="mcu-arms-bad-", dir="/var/tmp")) / "root"
    try:
        root_file.write_text("not a directory")
        auth = tmp_path / "auth.json"
        auth.write_text("{}")
        arm_file(tmp_path).write_text(ARM.format(extra="", ports="", tables="").replace('"random"', '"prolong"')
                                      + f'\n[codex]\nroot = "{root_file}"\nauth = "{auth}"\n')  # fmt: skip
        error = refused(tmp_path, tmp_path / "state", "plan", "--arm", "a")
        assert str(root_file) in error and "key 'codex.root'" in error
    finally:
        shutil.rmtree(root_file.parent, ignore_errors=True)


@pytest.mark.parametrize(
    ("ports", "said"),
    [
        ('host = ""', "empty address"),
        ('host = "localhost"', "not an IP address"),
        ('host = "0.0.0.0"', "set expose = true"),
        ('host = "192.0.2.77"\nexpose = true', "not an address of this host"),
    ],
)
def test_a_host_that_is_empty_not_an_ip_exposed_unasked_or_not_local_is_refused(tmp_path: Path, ports: str, said: str):
    arm_file(tmp_path, ports=ports)
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert "key 'ports.host'" in error and said in error and "a.toml:" in error


def test_an_exposed_host_is_planned_with_a_warning_and_ipv6_gets_brackets(tmp_path: Path):
    arm_file(tmp_path, "wide", ports='host = "0.0.0.0"\nexpose = true')
    arm_file(tmp_path, "six", ports='host = "::1"')
    done = run_cli(tmp_path, tmp_path / "state", "plan", "--dry-run", "--json", "--arm", "wide", "--arm", "six")
    assert done.returncode == 0, done.stderr
    plans = {plan["arm"]: plan for plan in json.loads(done.stdout)["plans"]}
    assert any("is not loopback (expose = true)" in warning for warning in plans["wide"]["warnings"])
    assert "--expose" in plans["wide"]["processes"][0]["argv"]
    assert plans["wide"]["processes"][0]["url"].startswith("http://127.0.0.1:")
    assert plans["six"]["processes"][0]["url"].startswith("http://[::1]:")
    assert plans["six"]["processes"][1]["argv"][plans["six"]["processes"][1]["argv"].index("--host") + 1] == "::1"


@pytest.mark.slow
def test_an_ipv6_loopback_arm_runs_end_to_end(tmp_path: Path):
    write_arm(tmp_path, "six", steps=5).write_text(
        (tmp_path / "arms" / "six.toml").read_text().replace("[ports]\n", '[ports]\nhost = "::1"\n')
    )
    done = run_cli(tmp_path, tmp_path / "state", "run", "--arm", "six", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["arms"][0]["status"] == "finished"


@pytest.mark.slow
def test_an_older_unreadable_episode_does_not_hide_a_newer_finished_one(tmp_path: Path):
    write_arm(tmp_path, "a", steps=5)
    for args in ((), ("--rerun",)):
        assert run_cli(tmp_path, tmp_path / "state", "run", "--arm", "a", *args).returncode == 0
    (tmp_path / "output" / "a" / "episode_001" / "result.json").write_text("{ torn")
    done = run_cli(tmp_path, tmp_path / "state", "compare", "a", "--json")
    assert done.returncode in (0, 1), done.stderr
    comparison = json.loads(done.stdout)
    assert comparison["arms"][0]["status"] == "finished"
    assert any(flag["kind"] == "unreadable_run" and "episode 1 skipped" in flag["message"] for flag in comparison["flags"])
    asked = run_cli(tmp_path, tmp_path / "state", "compare", "a", "--run", "1")
    assert asked.returncode == 2 and "not a readable run report" in asked.stderr
