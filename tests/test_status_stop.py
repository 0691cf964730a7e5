"""`mcu-arms status` and `mcu-arms stop` against real running arms."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psutil
import pytest
from run_helpers import Started, alive, report, run_cli, running_with_steps, wait_for, write_arm


def _status(project: Path, state: Path, *args: str) -> dict[str, dict]:
    done = run_cli(project, state, "status", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {arm["arm"]: arm for arm in json.loads(done.stdout)["arms"]}


@pytest.mark.slow
def test_stop_one_arm_of_a_run_then_the_last_one_through_the_supervisor(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "first", agent="random", steps=5000, step_timeout=5)
    write_arm(project, "second", agent="noop", steps=5000, step_timeout=5)
    run = Started(project, state, "run", "--arm", "first", "--arm", "second")
    try:
        wait_for(lambda: running_with_steps(project, "first") and running_with_steps(project, "second"), "both arms")
        family = run.remember_family()

        states = _status(project, state)
        assert states["first"]["state"] == "started" and states["first"]["step"] >= 3
        assert {p["role"]: p["alive"] for p in states["first"]["processes"]} == {
            "mcu-arms": True,
            "green": True,
            "purple": True,
            "client": True,
        }

        stopped = run_cli(project, state, "stop", "--arm", "first")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "also running second" in stopped.stdout and "supervisor finalised" in stopped.stdout
        first = report(project, "first")
        assert first["status"] == "interrupted" and "mcu-arms stop" in first["failure"]["reason"]
        assert report(project, "second")["status"] == "started", "stopping one arm stopped the other"
        assert run.popen.poll() is None
        first_pids = [first["processes"][role]["pid"] for role in ("green", "purple", "client")]
        assert alive([p for p in family if p.pid in first_pids]) == []

        stopped = run_cli(project, state, "stop", "--arm", "second")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "sent SIGTERM to its mcu-arms run" in stopped.stdout
        assert run.wait(timeout=60) == 0, "every arm ended as asked: stopped by the user, not interrupted"
        assert "first stopped as asked, by mcu-arms stop (pid" in run.output
        assert "second stopped as asked, by mcu-arms stop (pid" in run.output
        assert report(project, "second")["status"] == "interrupted"
        assert alive(family) == []
    finally:
        run.kill_if_running()


@pytest.mark.slow
def test_a_run_whose_supervisor_died_shows_stale_and_stop_ends_its_orphans(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "orphaned", agent="random", steps=5000, step_timeout=5)
    run = Started(project, state, "run", "--arm", "orphaned")
    try:
        started = wait_for(lambda: running_with_steps(project, "orphaned"), "the arm to run")
        family = run.remember_family()
        run.popen.send_signal(signal.SIGKILL)  # the supervisor dies without cleaning up: its children live on
        run.wait(timeout=30)
        servers = [psutil.Process(started["processes"][role]["pid"]) for role in ("green", "purple")]
        assert len(alive(servers)) == 2  # the client may go too: its stdout was the supervisor's pipe

        states = _status(project, state, "--arm", "orphaned")
        assert states["orphaned"]["state"] == "stale (supervisor gone)"
        liveness = {p["role"]: p["alive"] for p in states["orphaned"]["processes"] if p["role"] != "client"}
        assert liveness == {"mcu-arms": False, "green": True, "purple": True}

        stopped = run_cli(project, state, "stop", "--arm", "orphaned", "--grace", "5")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "stale report" in stopped.stdout and "stopped here" in stopped.stdout
        assert alive(family) == []
        data = report(project, "orphaned")
        assert data["status"] == "interrupted" and "mcu-arms stop" in data["failure"]["reason"]
        assert _status(project, state)["orphaned"]["state"] == "interrupted"

        again = run_cli(project, state, "stop", "--arm", "orphaned")
        assert again.returncode == 0 and "not running" in again.stdout
    finally:
        run.kill_if_running()


@pytest.mark.slow
def test_status_and_stop_refuse_an_unknown_arm_listing_the_known_ones(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    (project / "output" / "known" / "episode_001").mkdir(parents=True)
    for command in ("status", "stop"):
        done = run_cli(project, state, command, "--arm", "unknown")
        assert done.returncode == 2, command
        assert "no runs of arm 'unknown'" in done.stderr and "allowed: known" in done.stderr
    listed = _status(project, state)
    assert listed["known"]["state"] == "no report"


def test_stop_on_an_unreadable_report_says_so(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    episode = project / "output" / "broken" / "episode_001"
    episode.mkdir(parents=True)
    (episode / "result.json").write_text('{"status": "started", "proc')
    done = run_cli(project, state, "stop", "--arm", "broken")
    assert "episode_001 is unreadable" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "nothing was started" not in done.stdout + done.stderr


def test_status_fits_80_columns_with_every_value_shown_and_no_word_split() -> None:
    import io

    from rich.console import Console

    from mcu_arms.cli.status import _render
    from mcu_arms.environment import Environment
    from mcu_arms.report.status import STALE, ArmState, ProcessState

    screen = io.StringIO()
    state = ArmState(
        arm="demo_random",
        state=STALE,
        episode=7,
        task="mine_diamond_from_scratch",
        step=96,
        max_steps=3000,
        milestones=["mine_log@5", "crafting_table@21"],
        failure="purple: was killed by SIGKILL while it ran",
        processes=[ProcessState(role=role, pid=123456, create_time=1.0, alive=False) for role in ("mcu-arms", "green")],
    )
    _render([state], Environment(console=Console(file=screen, width=80, color_system=None)))
    drawn = screen.getvalue()
    assert all(len(line) <= 80 for line in drawn.splitlines()), drawn
    words = {word for line in drawn.splitlines() for word in line.replace(",", " ").split()}
    for shown in ("note", "stale", "(supervisor gone)", "96/3000", "SIGKILL", "123456", "mine_diamond_from_scratch"):
        assert all(part in words for part in shown.split()), f"{shown} split or cut: {drawn}"  # never split at 80
