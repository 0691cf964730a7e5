"""`mcu-arms run` when things go wrong: a busy port, a purple that dies mid-run, Ctrl-C. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from run_helpers import Started, alive, cli_env, report, run_cli, running_with_steps, wait_for, write_arm

HOST = "127.0.0.1"
LISTENER = (
    "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); "
    "print(s.getsockname()[1], flush=True); sys.stdin.read()"
)


def test_a_busy_port_aborts_the_run_naming_who_holds_it_and_the_holders_live_on(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    held = socket.socket()
    held.bind((HOST, 0))
    held.listen()
    holder = subprocess.Popen(
        [sys.executable, "-c", LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        holder_port = int(holder.stdout.readline())
        write_arm(project, "blocked", green=held.getsockname()[1], purple=holder_port)

        done = run_cli(project, state, "run", "--arm", "blocked")

        assert done.returncode == 2, done.stdout + done.stderr
        assert f"port {held.getsockname()[1]}" in done.stderr and f"pid {os.getpid()}" in done.stderr
        assert f"port {holder_port}" in done.stderr and f"pid {holder.pid}" in done.stderr
        assert "nothing was signalled" in done.stderr
        assert holder.poll() is None, "the process holding the port was touched"
        with socket.create_connection((HOST, holder_port), timeout=5):
            pass
        with socket.create_connection(held.getsockname(), timeout=5):
            pass
        assert not (project / "output" / "blocked").exists(), "an aborted run created an episode"
    finally:
        held.close()
        holder.stdin.close()
        holder.wait(timeout=10)


@pytest.mark.slow
def test_a_purple_that_dies_mid_run_fails_its_arm_naming_purple_while_the_other_arm_finishes(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "victim", agent="random", steps=5000, step_timeout=5)
    write_arm(project, "bystander", agent="noop", steps=40)
    run = Started(project, state, "run", "--arm", "victim", "--arm", "bystander")
    try:
        started = wait_for(lambda: running_with_steps(project, "victim"), "the victim arm to run")
        purple = started["processes"]["purple"]
        victim = psutil.Process(purple["pid"])
        assert abs(victim.create_time() - purple["create_time"]) < 0.01, "the recorded pid is not that purple"
        family = run.remember_family()
        assert victim.pid in {p.pid for p in family}, "the recorded purple is not ours"
        victim.send_signal(signal.SIGKILL)

        code = run.wait(timeout=120)

        assert code == 1, run.output
        failed = report(project, "victim")
        assert failed["status"] == "failed"
        assert failed["failure"]["process"] == "purple"
        assert "SIGKILL" in failed["failure"]["reason"] and "while the evaluation ran" in failed["failure"]["reason"]
        assert failed["failure"]["exit_code"] == -signal.SIGKILL
        assert failed["processes"]["purple"]["signal"] == "SIGKILL"
        assert failed["steps_run"] and failed["steps_run"] >= 3
        assert report(project, "bystander")["status"] == "finished"
        assert alive(family) == [], "children outlived the run"
        assert "victim: failed: purple was killed by SIGKILL" in run.output
    finally:
        run.kill_if_running()


@pytest.mark.slow
def test_sigint_stops_every_child_and_marks_the_report_interrupted(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "long", agent="random", steps=5000, step_timeout=5)
    run = Started(project, state, "run", "--arm", "long")
    try:
        wait_for(lambda: running_with_steps(project, "long"), "the arm to run")
        family = run.remember_family()
        assert len(family) >= 3, "green, purple and client should be running"

        run.popen.send_signal(signal.SIGINT)
        code = run.wait(timeout=90)

        assert code == 130, run.output
        data = report(project, "long")
        assert data["status"] == "interrupted"
        assert "SIGINT" in data["failure"]["reason"]
        assert data["finished_at"] and data["steps_run"]
        assert "transport_error" not in data["noops"], "steps taken while stopping (purple gone) were logged as noops"
        assert all(data["processes"][role]["exit_code"] is not None for role in ("green", "purple", "client"))
        assert alive(family) == [], "children outlived the run"
        assert "interrupted by SIGINT" in run.output
    finally:
        run.kill_if_running()


def _status_processes(project: Path, state: Path, arm: str) -> dict[str, dict]:
    done = run_cli(project, state, "status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    shown = next(entry for entry in json.loads(done.stdout)["arms"] if entry["arm"] == arm)
    return {process["role"]: process for process in shown["processes"]}


def test_each_child_s_exit_code_signal_and_last_status_are_kept_and_shown(tmp_path: Path) -> None:
    """A finished run: the client exited 0 on its own (no signal); the servers were seen running, then stopped by
    the supervisor's SIGTERM. A purple SIGKILLed mid-run: its signal is recorded. `status --json` shows the same."""
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "calm", agent="noop", steps=5)
    assert run_cli(project, state, "run", "--arm", "calm").returncode == 0
    calm = report(project, "calm")["processes"]
    assert (calm["client"]["exit_code"], calm["client"]["signal"]) == (0, None), calm["client"]
    for role in ("green", "purple", "client"):
        assert calm[role]["last_status"] in {psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING, psutil.STATUS_ZOMBIE}
    for role in ("green", "purple"):
        assert (calm[role]["exit_code"] == 0) == (calm[role]["signal"] is None), calm[role]
    shown = _status_processes(project, state, "calm")
    assert (shown["client"]["exit_code"], shown["client"]["signal"]) == (0, None)

    write_arm(project, "killed", agent="random", steps=5000, step_timeout=5)
    run = Started(project, state, "run", "--arm", "killed")
    try:
        purple = wait_for(lambda: running_with_steps(project, "killed"), "the arm to run")["processes"]["purple"]
        victim = psutil.Process(purple["pid"])
        assert abs(victim.create_time() - purple["create_time"]) < 0.01, "the recorded pid is not that purple"
        victim.send_signal(signal.SIGKILL)
        assert run.wait(timeout=120) == 1, run.output
    finally:
        run.kill_if_running()
    killed = report(project, "killed")["processes"]["purple"]
    assert (killed["exit_code"], killed["signal"]) == (-signal.SIGKILL, "SIGKILL"), killed
    assert killed["last_status"] in {psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING, psutil.STATUS_ZOMBIE}
    assert _status_processes(project, state, "killed")["purple"]["signal"] == "SIGKILL"


SIGINT_POINTS = 10


def _interpreter_startup_s() -> float:
    """How long this interpreter takes to reach the first instruction of a script (its own site import: .pth files
    of every installed package), the slowest of three: no handler of ours can exist before then."""
    slowest = 0.0
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        slowest = max(slowest, time.monotonic() - started)
    return slowest


@pytest.mark.slow
def test_sigint_at_any_moment_of_the_first_second_ends_without_a_traceback(tmp_path: Path) -> None:
    """The entry point's own handler is the first thing it installs: Ctrl-C while the CLI is still importing, while
    it plans, or as it exits, is one line and exit 130 (or the command's own end), never a traceback. The moments
    are spread over the first second after the interpreter's own start-up."""
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "a", agent="random", steps=5)
    script = Path(sys.executable).with_name("mcu-arms")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "mcu_arms"]
    startup = _interpreter_startup_s()
    outcomes = []
    for point in range(SIGINT_POINTS):
        delay = startup + point / SIGINT_POINTS
        child = subprocess.Popen(
            [*command, "plan", "--dry-run", "--arm", "a"],
            cwd=project,
            env=cli_env(state),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            child.wait(timeout=delay)  # the moment under test, not a synchronisation: it may have finished by then
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        outcomes.append((round(delay, 2), child.returncode))
        assert "Traceback" not in err + out and "KeyboardInterrupt" not in err, f"at {delay:.2f} s:\n{err}"
        assert child.returncode in (0, 130), (delay, child.returncode, err)
        if child.returncode == 130:
            assert err.strip().endswith("mcu-arms: interrupted"), err
    print(f"interpreter start-up {startup:.2f} s; (moment, exit code): {outcomes}")
    assert any(code == 130 for _, code in outcomes), f"no moment fell while the command ran: {outcomes}"


@pytest.mark.slow
def test_a_stopped_green_is_named_as_such_not_the_client_that_gave_up(tmp_path: Path) -> None:
    """SIGSTOP to the arm's own green (its pid from the report, checked by create_time): the arm fails within the
    supervisor's limit, blaming the green and how it stopped, not the client."""
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "frozen", agent="random", steps=5000, step_timeout=5)
    run = Started(project, state, "run", "--arm", "frozen")
    green = None
    try:
        data = wait_for(lambda: running_with_steps(project, "frozen"), "the arm to run")
        record = data["processes"]["green"]
        green = psutil.Process(record["pid"])
        assert abs(green.create_time() - record["create_time"]) < 1, "not the arm's own green"
        green.send_signal(signal.SIGSTOP)
        code = run.wait(timeout=180)
        assert code == 1, run.output
        failure = report(project, "frozen")["failure"]
        assert failure["process"] == "green", failure
        assert "green stopped (SIGSTOP" in failure["reason"] and "for 2" in failure["reason"], failure
        assert "client exited" not in failure["reason"], failure
        assert report(project, "frozen")["processes"]["green"]["last_status"] == psutil.STATUS_STOPPED
    finally:
        if green is not None and green.is_running():
            green.send_signal(signal.SIGCONT)
        run.kill_if_running()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
@pytest.mark.slow
def test_a_full_disk_is_named_as_such_in_the_report(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    path = write_arm(project, "full", agent="random", steps=100_000, step_timeout=5)
    path.write_text(path.read_text().replace("save_frames = false", "save_frames = true"))
    output = project / "output"
    output.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(output)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        done = run_cli(project, state, "run", "--arm", "full", timeout=300)
        assert done.returncode == 1, done.stdout + done.stderr
        data = report(project, "full")
        assert data is not None, "the final report fits in the space held back for it"
        assert (
            data["status"] == "failed"
            and "disk full writing output/full/episode_001/green/" in data["failure"]["reason"]
        )
        assert "disk full" in done.stdout + done.stderr
        print(data["failure"]["reason"])
    finally:
        subprocess.run(["umount", "-l", str(output)], check=True)
