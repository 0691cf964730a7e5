"""Processes stay ours, and visible: after a SIGKILLed `mcu-arms run` a rerun refuses, `status` lists the orphans of
every episode and `stop` ends them (and nothing else); two starts of one codex arm at the same instant give one
run and one refusal, and one purple per CODEX_HOME; a purple's daemon that left its session and scrubbed its
environment is still found, by its cgroup, and stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest
from run_helpers import Started, alive, cli_env, report, run_cli, running_with_steps, wait_for, write_arm
from server_procs import free_port

from mcu_arms.process.containment import containment_support

pytestmark = pytest.mark.slow

FAKE_CODEX_DIR = Path(__file__).parent / "fake_codex"
CODEX_ARM = """agent = "prolong"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = {steps}
step_timeout = 15
save_frames = false

[ports]
green = "auto"
purple = "auto"

[env]
FAKE_CODEX_MODE = "{mode}"
"""
needs_cgroups = pytest.mark.skipif(
    containment_support().cgroup is None,
    reason=f"this host gives no writable cgroup v2 ({containment_support().cgroup_reason}): a process that leaves "
    "its session and scrubs its environment can only be found while `mcu-arms run` lives (subreaper)",
)


def _status(project: Path, state: Path, *args: str) -> dict[str, dict]:
    done = run_cli(project, state, "status", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {arm["arm"]: arm for arm in json.loads(done.stdout)["arms"]}


@pytest.fixture
def bystander():
    """A process this project did not start (same user, same host): nothing may signal it."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    yield process
    process.kill()
    process.wait(timeout=10)


def test_after_a_sigkilled_run_a_rerun_refuses_status_lists_and_stop_ends_the_orphans_of_any_episode(
    tmp_path: Path, bystander
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "arm", agent="random", steps=5000, step_timeout=5)
    run = Started(project, state, "run", "--arm", "arm")
    try:
        started = wait_for(lambda: running_with_steps(project, "arm"), "the arm to run")
        family = run.remember_family()
        run.popen.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        orphans = {role: started["processes"][role]["pid"] for role in ("green", "purple")}
        assert len(alive([psutil.Process(pid) for pid in orphans.values()])) == 2

        rerun = run_cli(project, state, "run", "--arm", "arm")
        assert rerun.returncode == 2, rerun.stdout + rerun.stderr
        assert "has live processes" in rerun.stderr and "mcu-arms stop --arm arm" in rerun.stderr
        assert f"green pid {orphans['green']}" in rerun.stderr and "Traceback" not in rerun.stderr
        assert not (project / "output" / "arm" / "episode_002").exists()  # no episode beside the orphans

        (project / "output" / "arm" / "episode_002").mkdir()  # a newer episode: the orphans are not in it
        done = run_cli(project, state, "status", "--json", "--arm", "arm")
        by_episode = {arm["episode"]: arm for arm in json.loads(done.stdout)["arms"]}
        assert by_episode[2]["state"] == "no report" and by_episode[1]["state"] == "stale (supervisor gone)"
        shown = {(p["role"], p["pid"]) for p in by_episode[1]["processes"] if p["alive"]}
        shown |= {(p["role"], p["pid"]) for p in by_episode[2]["live_elsewhere"] if p["episode"] == 1}
        assert {("green", orphans["green"]), ("purple", orphans["purple"])} <= shown

        stopped = run_cli(project, state, "stop", "--arm", "arm", "--grace", "5")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "episode_001 green" in stopped.stdout and "stale report" in stopped.stdout
        assert alive(family) == []
        assert bystander.poll() is None, "stop signalled a process it did not start"
        assert report(project, "arm")["status"] == "interrupted"
        assert _status(project, state, "--arm", "arm")["arm"]["live_elsewhere"] == []

        again = run_cli(project, state, "run", "--arm", "arm", "--steps", "5")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        run.kill_if_running()


@pytest.fixture
def codex_project(tmp_path: Path):
    root = Path(tempfile.mkdtemp(prefix="mcu-codex-procs-", dir="/var/tmp"))
    project = tmp_path / "project"
    (project / "arms").mkdir(parents=True)
    auth = root / "credential" / "auth.json"
    auth.parent.mkdir()
    auth.write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-test-not-a-key"}')
    env = {
        key: value for key, value in cli_env(tmp_path / "state").items() if not key.startswith(("FAKE_CODEX", "CODEX_"))
    }
    env.update(
        PATH=f"{FAKE_CODEX_DIR}{os.pathsep}{env.get('PATH', '')}",
        MCU_CODEX_ROOT=str(root / "homes"),
        MCU_CODEX_AUTH=str(auth),
    )
    yield project, env, root
    shutil.rmtree(root, ignore_errors=True)


def _start(project: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", *args],
        cwd=project,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_two_simultaneous_starts_of_one_codex_arm_give_one_run_and_one_purple_per_home(codex_project, bystander):
    project, env, root = codex_project
    (project / "arms" / "cx.toml").write_text(CODEX_ARM.format(steps=150, mode="ok"))
    first, second = _start(project, env, "run", "--arm", "cx"), _start(project, env, "run", "--arm", "cx")
    try:
        home = root / "homes" / "cx"
        wait_for(lambda: (home / ".purple.lock.owner").exists(), "the winner's purple to hold the home", timeout=120)
        intruder = subprocess.run(
            [
                sys.executable,
                "-m",
                "mcu_arms",
                "serve",
                "purple",
                "--agent",
                "prolong",
                "--port",
                str(free_port()),
                "--output-dir",
                str(project / "intruder"),
            ],
            cwd=project,
            env={**env, "CODEX_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert first.poll() is None or second.poll() is None, "the winner ended before the intruder was tried"
        outs = [process.communicate(timeout=240) for process in (first, second)]
    finally:
        for process in (first, second):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    codes = sorted(process.returncode for process in (first, second))
    assert codes == [0, 2], outs
    refusal = next(err for (_, err), process in zip(outs, (first, second), strict=True) if process.returncode == 2)
    assert "is being prepared or run by another mcu-arms" in refusal or "has live processes" in refusal
    assert "Traceback" not in refusal
    assert intruder.returncode == 2 and "in use by another purple" in intruder.stderr, intruder.stderr
    episodes = [p for p in (project / "output" / "cx").iterdir() if (p / "result.json").exists()]
    assert len(episodes) == 1 and json.loads((episodes[0] / "result.json").read_text())["status"] == "finished"
    assert bystander.poll() is None


@needs_cgroups
def test_a_purples_daemon_that_scrubbed_its_environment_is_found_by_its_cgroup_and_stopped(codex_project):
    project, env, root = codex_project
    (project / "arms" / "cx.toml").write_text(CODEX_ARM.format(steps=12, mode="daemon"))
    pid_file = root / "homes" / "cx" / "fake_codex_daemon.pid"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mcu_arms", "run", "--arm", "cx"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        daemon = int(pid_file.read_text())
        assert _daemons(pid_file) == []
        alerts = report(project, "cx")["alerts"]
        assert any("found in its cgroup and stopped" in alert and str(daemon) in alert for alert in alerts), alerts
    finally:
        _kill(_daemons(pid_file))


@needs_cgroups
def test_stop_finds_the_daemon_of_a_sigkilled_run_by_its_cgroup(codex_project):
    project, env, root = codex_project
    (project / "arms" / "cx.toml").write_text(CODEX_ARM.format(steps=5000, mode="daemon"))
    run = _start(project, env, "run", "--arm", "cx")
    pid_file = root / "homes" / "cx" / "fake_codex_daemon.pid"
    family: list[psutil.Process] = []
    try:
        wait_for(pid_file.exists, "the daemon to start", timeout=120)
        daemon = psutil.Process(int(pid_file.read_text()))
        assert "MCU_ARMS_OWNER_TOKEN" not in daemon.environ() and os.getsid(daemon.pid) == daemon.pid
        family = psutil.Process(run.pid).children(recursive=True)
        os.killpg(run.pid, signal.SIGKILL)  # the supervisor dies; its children, and the daemon, live on
        run.wait(timeout=30)
        listed = json.loads(
            subprocess.run(
                [sys.executable, "-m", "mcu_arms", "status", "--json"],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )
        processes = listed["arms"][0]["live_elsewhere"]
        assert any(p["pid"] == daemon.pid and p["found_by"] == "cgroup" for p in processes), processes
        stopped = subprocess.run(
            [sys.executable, "-m", "mcu_arms", "stop", "--arm", "cx", "--grace", "5"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"pids [{daemon.pid}] had left its process group and owner token; found in its cgroup" in stopped.stdout
        assert alive([daemon]) == [] and alive(family) == []
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        _kill(_daemons(pid_file) + family)


def _daemons(pid_file: Path) -> list[psutil.Process]:
    """The fake codex's daemon while it runs (found by the pid file's path on its command line, never by name)."""
    try:
        process = psutil.Process(int(pid_file.read_text()))
        return [process] if str(pid_file) in process.cmdline() and alive([process]) else []
    except (OSError, ValueError, psutil.Error):
        return []


def _kill(processes: list[psutil.Process]) -> None:
    """Test cleanup of processes this test started, each through its own psutil handle."""
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            continue


SUBREAPER = """
import json, os, subprocess, sys, time
import psutil
from mcu_arms.process.procs import AdoptedOrphans

adopted = AdoptedOrphans(enabled=True)
assert adopted.enabled, "PR_SET_CHILD_SUBREAPER refused"
ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
subprocess.run(["env", "-i", sys.executable, sys.argv[1], sys.argv[2]], start_new_session=True, check=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
orphan = psutil.Process(int(open(sys.argv[2]).read()))
adopted_by_us = orphan.ppid() == os.getpid()
outcome = adopted.stop_all({ours.pid}, grace_s=5)
print(json.dumps({"adopted_by_us": adopted_by_us, "contained": outcome.contained, "orphan": orphan.pid,
                  "ours_alive": ours.poll() is None, "orphan_gone": not psutil.pid_exists(orphan.pid)}))
ours.kill()
ours.wait()
"""


def test_without_cgroups_the_run_adopts_what_its_arms_left_behind_and_stops_only_that(tmp_path: Path):
    """The fallback for hosts without cgroups: as a subreaper, the orphan of a scrubbed, re-sessioned daemon is
    re-parented to us, stopped at the end and reaped; our own child is left to its owner."""
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER, str(FAKE_CODEX_DIR / "daemonise.py"), str(tmp_path / "daemon.pid")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["adopted_by_us"] and seen["contained"] == [seen["orphan"]] and seen["orphan_gone"]
    assert seen["ours_alive"], "a child started through the run itself was taken for an orphan"


@needs_cgroups
def test_only_a_cgroup_made_here_that_still_carries_its_marker_is_taken():
    """A record can only name a cgroup by its path and the marker written into it at creation: another cgroup (the
    root, a user slice, another arm's cgroup of the right shape) is never taken for it."""
    from mcu_arms.process.containment import Cgroup, create_cgroup

    mine, theirs = create_cgroup("green"), create_cgroup("green")
    try:
        assert Cgroup.verified(str(mine.path), mine.marker) == mine
        assert Cgroup.verified(str(theirs.path), mine.marker) is None, "the right shape, but not the one made then"
        assert Cgroup.verified("/sys/fs/cgroup/unified", mine.marker) is None
        assert Cgroup.verified(str(mine.path.parent / ".." / mine.path.name), mine.marker) is None
    finally:
        mine.remove()
        theirs.remove()


@needs_cgroups
def test_an_empty_left_over_cgroup_is_removed_and_one_with_a_process_is_kept():
    """After a run was SIGKILLed and its processes ended unstopped, their empty cgroups have nothing left to find:
    the next one made removes them once they are old. One that still holds a process stays."""
    import time

    from mcu_arms.process.containment import EMPTY_CGROUP_AGE_S, create_cgroup

    empty, holding = create_cgroup("client"), create_cgroup("green")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        holding.add(sleeper.pid)
        long_ago = time.time() - 2 * EMPTY_CGROUP_AGE_S
        for cgroup in (empty, holding):
            os.utime(cgroup.path, (long_ago, long_ago))
        young = create_cgroup("purple")
        assert not empty.path.exists() and holding.path.exists() and young.path.exists()
        assert holding.pids() == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    for cgroup in (holding, young):
        cgroup.remove()
