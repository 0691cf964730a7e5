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


@pytest.mark.slow
def test_toml_nested_a_hundred_thousand_deep(tmp_path: Path):
    path = arm_file(tmp_path, extra="deep = " + "[" * 100_000 + "]" * 100_000)
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert str(path) in error and "nested too deeply" in error
    scenario = tmp_path / "scenario.toml"
    scenario.write_text("[config]\ndeep = " + "[" * 100_000 + "]" * 100_000)
    error = refused(tmp_path, tmp_path / "state", "evaluate", str(scenario))
    assert str(scenario) in error and "nested too deeply" in error


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
@pytest.mark.slow
def test_an_infinite_or_nan_step_timeout_is_refused_in_the_file_and_on_the_command_line(tmp_path: Path, value: str):
    arm_file(tmp_path, extra=f"step_timeout = {value}")
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert "key 'step_timeout'" in error and "a.toml:5" in error
    arm_file(tmp_path, "b")
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "b", "--step-timeout", value)
    assert "flag '--step-timeout'" in error


def test_a_nul_byte_in_an_env_value_is_refused_at_plan_without_showing_the_value(tmp_path: Path):
    arm_file(tmp_path, tables='[env]\nDB_PASS = "hunter2\\u0000rest"\n')
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert "key 'env.DB_PASS'" in error and "NUL byte" in error and "hunter2" not in error


@pytest.mark.slow
def test_an_output_that_is_a_file_is_a_clear_error(tmp_path: Path):
    arm_file(tmp_path)
    (tmp_path / "output").write_text("not a directory")
    error = refused(tmp_path, tmp_path / "state", "run", "--arm", "a")
    assert error.count("\n") == 1 and "output: is a file, not a directory" in error, error


@pytest.mark.parametrize("where", ["logs", "output/a"])
@pytest.mark.slow
def test_a_file_where_a_directory_must_be_is_one_line_before_anything_starts(tmp_path: Path, where: str):
    arm_file(tmp_path)
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text("not a directory")
    error = refused(tmp_path, tmp_path / "state", "run", "--arm", "a")
    assert error.count("\n") == 1 and f"{where}: is a file, not a directory" in error, error
    assert not (tmp_path / "output" / "a" / "episode_001").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only tmpfs needs root (permissions do not bind root)")
@pytest.mark.slow
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
    assert "variable 'MCU_ARMS_STATE_DIR'" in error and str(state) in error


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
        arm_file(tmp_path).write_text(
            ARM.format(extra="", ports="", tables="").replace('"random"', '"prolong"')
            + f'\n[codex]\nroot = "{root_file}"\nauth = "{auth}"\n'
        )
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
    assert any(
        flag["kind"] == "unreadable_run" and "episode 1 skipped" in flag["message"] for flag in comparison["flags"]
    )
    asked = run_cli(tmp_path, tmp_path / "state", "compare", "a", "--run", "1")
    assert asked.returncode == 2 and "not a readable run report" in asked.stderr


SEEDS_PAST_THE_LIMIT = "seeds = [" + ", ".join(str(seed) for seed in range(100_000)) + "]"
ENV_PAST_THE_LIMIT = "[env]\n" + "\n".join(f'V{index} = "x"' for index in range(1_001)) + "\n"


@pytest.mark.parametrize(
    ("extra", "tables", "key", "line", "said"),
    [
        ("seed = 9223372036854775808", "", "seed", 5, "9223372036854775807"),
        ("seeds = [1, 99999999999999999999]", "", "seeds", 5, "2^63"),
        (SEEDS_PAST_THE_LIMIT, "", "seeds", 5, "at most 10000"),
        ("replicates = 100000000", "", "replicates", 5, "from 1 to 10000"),
        ("seed = 9223372036854775800\nreplicates = 100", "", "replicates", 6, "past 2^63"),
        ("steps = 2000000", "", "steps", 4, "from 1 to 1000000"),
        ("step_timeout = 1e-300", "", "step_timeout", 5, "from 0.1 to 86400"),
        ("step_timeout = 1e9", "", "step_timeout", 5, "from 0.1 to 86400"),
        ("", ENV_PAST_THE_LIMIT, "env", 10, "at most 1000"),
        ("", '[env]\nBIG = "' + "x" * 40_000 + '"\n', "env.BIG", 11, "at most 32768 bytes"),
    ],
    ids=[
        "seed",
        "seeds-big",
        "seeds-many",
        "replicates",
        "replicates-past",
        "steps",
        "timeout-tiny",
        "timeout-huge",
        "env-keys",
        "env-value",
    ],
)
@pytest.mark.slow
def test_each_limit_is_refused_at_its_line_naming_the_limit(
    tmp_path: Path, extra: str, tables: str, key: str, line: int, said: str
):
    path = arm_file(tmp_path, extra="" if extra.startswith("steps") else extra, tables=tables)
    if extra.startswith("steps"):
        path.write_text(path.read_text().replace("steps = 5", extra))
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "--arm", "a")
    assert f"a.toml:{line}" in error and f"key '{key}'" in error and said in error, error
    assert len(error) < 2_000, "the error quotes the value whole"


CAMPAIGN_HEAD = """name = "big"
{seeds}

[baseline]
arm = "a"
"""


@pytest.mark.parametrize(
    ("seeds", "variants", "key", "line", "said"),
    [
        ("replicates = 100000000", 0, "replicates", 2, "from 1 to 10000"),
        (SEEDS_PAST_THE_LIMIT, 0, "seeds", 2, "at most 10000"),
        ("replicates = 2", 1_001, "variants", 7, "at most 1000"),
        ("replicates = 10000", 20, "replicates", 2, "at most 100000 episodes"),
    ],
    ids=["replicates", "seeds", "variants", "episodes"],
)
def test_a_campaign_past_a_limit_is_refused_at_its_line(
    tmp_path: Path, seeds: str, variants: int, key: str, line: int, said: str
):
    arm_file(tmp_path)
    variant = '[[variants]]\nname = "v{index}"\ndiffers_in = ["steps"]\nsteps = {steps}\n'
    body = (
        CAMPAIGN_HEAD.format(seeds=seeds)
        + "\n"
        + "".join(variant.format(index=index, steps=6 + index) for index in range(variants))
    )
    (tmp_path / "campaigns").mkdir()
    (tmp_path / "campaigns" / "big.toml").write_text(body)
    error = refused(tmp_path, tmp_path / "state", "plan", "--dry-run", "campaigns/big.toml")
    assert f"big.toml:{line}" in error and f"key '{key}'" in error and said in error, error


def test_a_scenario_past_a_limit_is_refused_at_its_line(tmp_path: Path):
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(
        '[green_agent]\nendpoint = "http://127.0.0.1:9"\n\n[[participants]]\nrole = "agent"\n'
        'endpoint = "http://127.0.0.1:9"\n\n[config]\ntask_category = "crafting"\n'
        "step_timeout = 1e-300\n"
    )
    error = refused(tmp_path, tmp_path / "state", "evaluate", str(scenario))
    assert "scenario.toml:10" in error and "step_timeout" in error and "0.1" in error, error
