"""The supervisor's parts on their own: tailing steps.jsonl, alerts, links, stopping a process group, dry runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from cli_support import invoke
from run_helpers import alive, write_arm

from mcu_arms.arms.plan import plan_arms
from mcu_arms.contracts.agent_report import AgentSettings, EpisodeReport, TurnRecord, summarise
from mcu_arms.contracts.settings import Overrides
from mcu_arms.contracts.steps import StepProgress
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, repoint_links
from mcu_arms.process.procs import stop_process_group, verified_process
from mcu_arms.supervise.alerts import AlertMonitor
from mcu_arms.supervise.progress import ArmProgress, StepSample, StepsTail
from mcu_arms.supervise.readiness import listens_in_tree
from mcu_arms.supervise.runner import describe_exit

# Ignores SIGTERM, starts a child that also ignores it, prints both pids, then waits forever.
STUBBORN = """
import os, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal,sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); sys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(os.getpid(), child.pid, flush=True)
sys.stdin.read()
"""


def sample(task: str, step: int, t: float, noop: str | None, agent_ms: float | None, events: list) -> StepSample:
    return StepSample(task, StepProgress(step=step, t=t, noop_cause=noop, agent_ms=agent_ms, events=events))


def _record(step: int, t: float, noop: str | None = None, events: list | None = None) -> str:
    return json.dumps({"step": step, "t": t, "noop_cause": noop, "agent_ms": 1.5, "events": events or []}) + "\n"


def test_steps_tail_reads_only_new_complete_lines(tmp_path: Path) -> None:
    log = tmp_path / "green" / "craft_x" / "steps.jsonl"
    log.parent.mkdir(parents=True)
    tail = StepsTail(tmp_path / "green")
    assert tail.poll() == []
    first, second = _record(0, 1.0), _record(1, 2.0, "timeout")
    log.write_text(first + second[:10])
    assert [s.record.step for s in tail.poll()] == [0]
    with log.open("a") as handle:
        handle.write(second[10:])
    samples = tail.poll()
    assert [(s.task, s.record.step, s.record.noop_cause) for s in samples] == [("craft_x", 1, "timeout")]
    assert tail.poll() == []


def _progress_with(samples: list[StepSample]) -> tuple[ArmProgress, list[str], AlertMonitor]:
    progress = ArmProgress("arm", max_steps=1000)
    raised: list[str] = []
    monitor = AlertMonitor(progress, Path("/nonexistent"), raised.append)
    progress.add_steps(samples)
    return progress, raised, monitor


def test_noops_past_five_percent_and_timeouts_in_a_row_are_alerted_once() -> None:
    samples = [sample("t", i, 100.0 + i, "timeout" if i >= 37 else None, 5.0, []) for i in range(40)]
    progress, raised, monitor = _progress_with(samples)
    monitor.check_progress(now=140.0)
    monitor.check_progress(now=140.0)
    assert len(raised) == 2, raised
    assert any("3 of 40 steps were noops (> 5%; by cause so far: timeout 3)" in a for a in raised)
    assert any("3 agent timeouts in a row" in a for a in raised)
    assert progress.alerts == raised


def test_a_sharp_slowdown_without_errors_is_alerted() -> None:
    samples = [sample("t", i, 1000.0 + i, None, 5.0, []) for i in range(60)]  # one step a second
    progress, raised, monitor = _progress_with(samples)
    monitor.check_progress(now=1060.0)
    assert raised == []
    progress.add_steps([sample("t", 60, 1100.0, None, 40000.0, [])])  # then 40 s for one step
    monitor.check_progress(now=1160.0)  # and a minute with no step at all
    assert len(raised) == 1 and "below 1/3 of its running median 60.00 steps/min" in raised[0]


def test_milestones_keep_their_step() -> None:
    event = {"identity": "mine_log", "step": 7}
    progress, _, _ = _progress_with([sample("t", 7, 1.0, None, 1.0, [event])])
    assert progress.milestones == [("t", "mine_log", 7)]


def _write_agent_report(directory: Path, payloads_mb: list[float], warnings: list[str] = ()) -> None:
    """A codex agent's typed report whose turns sent `payloads_mb`, as the purple writes it after every turn."""
    turns = [
        TurnRecord(
            turn=i,
            step=i,
            session=1,
            thread_id="t",
            resumed=i > 0,
            outcome="ok",
            rc=0,
            latency_s=1.0,
            prompt_bytes=1,
            frame_bytes=1,
            rollout_bytes_before=0,
            rollout_bytes_after=0,
            payload_bytes=int(size * 1_000_000),
            frames_in_session=i + 1,
            actions_queued=1,
            compactions_in_thread=0,
        )
        for i, size in enumerate(payloads_mb)
    ]
    episode = EpisodeReport(
        task_dir=str(directory / "task_01"), task="t", started_at="now", turn_records=turns, warnings=list(warnings)
    )
    settings = AgentSettings(
        kind="worldmodel",
        session_turns=20,
        compact_limit=None,
        step_timeout=60,
        turn_timeout=50,
        model=None,
        provider_base_url=None,
        provider_wire_api=None,
        camera_quantised=False,
        codex_executable="codex",
        codex_version="x",
        codex_home="h",
        codex_home_audit={},
    )
    path = directory / "worldmodel_report.json"
    path.write_text(summarise(settings, [episode]).model_dump_json())
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + len(payloads_mb)))  # a new mtime each rewrite


def test_a_growing_purple_payload_and_report_warnings_are_alerted(tmp_path: Path) -> None:
    progress = ArmProgress("arm", max_steps=10)
    raised: list[str] = []
    monitor = AlertMonitor(progress, tmp_path, raised.append)
    _write_agent_report(tmp_path, [0.48, 0.88, 1.28])
    monitor.check_purple_reports()
    assert raised == []
    _write_agent_report(tmp_path, [0.48, 0.88, 1.28, 1.68])
    monitor.check_purple_reports()
    assert raised == ["purple session payload keeps growing: 0.48 -> 0.88 -> 1.28 -> 1.68 MB"]
    _write_agent_report(tmp_path, [0.48, 0.88, 1.28, 1.68, 5.5], warnings=["thread history unreadable"])
    monitor.check_purple_reports()
    monitor.check_purple_reports()
    assert "reached 5.50 MB" in raised[1]
    assert raised[-1] == "purple worldmodel_report.json: task_01: thread history unreadable" and len(raised) == 3


def _plan(tmp_path: Path):
    project = tmp_path / "project"
    write_arm(project, "linked")
    env = Environment(variables={"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, cwd=project)
    return plan_arms([project / "arms" / "linked.toml"], Overrides(), env)[0], project


def test_links_are_repointed_and_a_regular_file_in_the_way_is_left_alone(tmp_path: Path) -> None:
    plan, project = _plan(tmp_path)
    logs = project / "logs"
    logs.mkdir()
    (logs / "linked_green.log").write_text("my own notes")
    (logs / "linked_purple.log").symlink_to("somewhere/old.log")
    warnings: list[str] = []

    repoint_links(plan.links, warnings.append)

    assert (logs / "linked_green.log").read_text() == "my own notes"
    assert len(warnings) == 1 and "regular file" in warnings[0]
    purple = logs / "linked_purple.log"
    assert purple.is_symlink() and purple.resolve() == Path(plan.process("purple").log).resolve()
    assert not os.path.isabs(os.readlink(purple)), "links are relative, so a project can move"
    assert not list(logs.glob(".*tmp")), "a temporary link was left behind"


def test_dry_run_prints_the_plan_and_touches_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_arm(project, "dry")
    done = invoke(
        project, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, "run", "--arm", "dry", "--dry-run", "--verbose"
    )
    assert done.exit_code == 0, done.err
    assert "dry run: nothing was created, reserved or started" in done.out and "serve green" in done.out
    assert sorted(p.name for p in project.iterdir()) == ["arms"]
    assert not (tmp_path / "state").exists()


def test_run_reports_a_bad_arm_name_as_a_user_error(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_arm(project, "exists")
    done = invoke(project, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, "run", "--arm", "missing")
    assert done.exit_code == 2 and "missing" in done.err and "Traceback" not in done.err


def test_stop_kills_a_group_that_ignores_sigterm_with_its_child_and_spares_a_reused_identity() -> None:
    stubborn = subprocess.Popen(
        [sys.executable, "-c", STUBBORN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    leader_pid, child_pid = map(int, stubborn.stdout.readline().split())
    leader, child = psutil.Process(leader_pid), psutil.Process(child_pid)
    try:
        wrong = stop_process_group(leader_pid, leader.create_time() - 5.0, grace_s=0.5)
        assert not wrong.was_running and alive([leader, child]) == [leader_pid, child_pid]

        outcome = stop_process_group(leader_pid, leader.create_time(), grace_s=0.5, popen=stubborn)

        assert outcome.was_running and outcome.killed == 2 and outcome.survivors == []
        assert alive([leader, child]) == []
        assert stubborn.returncode == -signal.SIGKILL
        assert verified_process(leader_pid, leader.create_time()) is None
    finally:
        for process in (child, leader):
            if alive([process]):
                process.kill()


def test_the_listener_check_knows_a_process_tree_from_another_process() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        try:
            assert listens_in_tree(psutil.Process(), port)
            assert not listens_in_tree(psutil.Process(sleeper.pid), port)
        finally:
            sleeper.stdin.close()
            sleeper.wait(timeout=10)


def test_exit_codes_are_described_with_signal_names() -> None:
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(None) == "is still running"


def _stand_ins(plan, green: list[str], purple: list[str]):
    """The plan with stand-in commands for its green and purple."""
    commands = {"green": green, "purple": purple}
    return plan.model_copy(
        update={"processes": [p.model_copy(update={"argv": commands.get(p.role, p.argv)}) for p in plan.processes]}
    )


def _run_plans(tmp_path: Path, project: Path, plans: list, **options):
    import io

    from rich.console import Console

    from mcu_arms.supervise.executors import run_arms
    from mcu_arms.supervise.runner import RunOptions

    out = io.StringIO()
    env = Environment(
        console=Console(file=out, width=200),
        err_console=Console(file=io.StringIO()),
        variables={**os.environ, "MCU_ARMS_STATE_DIR": str(tmp_path / "state")},
        cwd=project,
    )
    outcome = run_arms(plans, env, RunOptions(stop_grace_s=2, **options), env.console)
    return outcome, [json.loads(RunDir(Path(plan.episode_dir)).report.read_text()) for plan in plans], out.getvalue()


def _run_with_commands(tmp_path: Path, green: list[str], purple: list[str], ready_timeout_s: float):
    """One arm through run_arms in-process, with stand-in commands for green and purple."""
    plan, project = _plan(tmp_path)
    outcome, reports, out = _run_plans(
        tmp_path, project, [_stand_ins(plan, green, purple)], ready_timeout_s=ready_timeout_s
    )
    return outcome, reports[0], out


WAITS = [sys.executable, "-c", "import time; print('waiting', flush=True); time.sleep(600)"]


def test_a_child_that_dies_during_start_up_fails_the_arm_at_once_with_its_exit_code_and_log(tmp_path: Path) -> None:
    crashes = [sys.executable, "-c", "import sys; print('cannot load the policy', flush=True); sys.exit(3)"]
    outcome, report, out = _run_with_commands(tmp_path, WAITS, crashes, ready_timeout_s=60)
    assert outcome.exit_code == 1 and outcome.arms[0].status == "failed"
    failure = report["failure"]
    assert failure["process"] == "purple" and failure["exit_code"] == 3
    assert failure["reason"] == "purple exited with code 3 during start-up"
    assert failure["log_tail"] == ["cannot load the policy"]
    green = report["processes"]["green"]
    assert verified_process(green["pid"], green["create_time"]) is None, "the green was left running"
    assert "client" not in report["processes"]
    assert "failed: purple exited with code 3" in out


def test_a_server_that_never_answers_its_card_fails_at_the_ready_timeout(tmp_path: Path) -> None:
    outcome, report, _ = _run_with_commands(tmp_path, WAITS, WAITS, ready_timeout_s=1)
    assert outcome.arms[0].status == "failed"
    assert report["failure"]["process"] == "green"
    assert "not ready within 1 s" in report["failure"]["reason"] and "never answered" in report["failure"]["reason"]
    for role in ("green", "purple"):
        record = report["processes"][role]
        assert verified_process(record["pid"], record["create_time"]) is None, role


def test_an_arm_that_ends_without_an_evaluation_keeps_the_steps_milestones_and_noops_its_green_logged(
    tmp_path: Path,
) -> None:
    plan, project = _plan(tmp_path)
    steps = Path(plan.episode_dir) / "green" / "craft_x" / "steps.jsonl"
    lines = _record(0, 1.0, "timeout") + _record(1, 2.0, events=[{"identity": "mine_log", "step": 1}]) + _record(2, 3.0)
    logs_steps = (
        f"import pathlib; p = pathlib.Path({str(steps)!r}); p.parent.mkdir(parents=True); "
        f"p.write_text({lines!r}); raise SystemExit(1)"
    )
    outcome, reports, _ = _run_plans(
        tmp_path, project, [_stand_ins(plan, [sys.executable, "-c", logs_steps], WAITS)], ready_timeout_s=60
    )
    report = reports[0]
    assert (
        report["status"] == "failed" and report["failure"]["process"] == "green" and report["evaluation_file"] is None
    )
    assert report["steps_run"] == 3
    assert report["milestones"] == [{"task": "craft_x", "identity": "mine_log", "step": 1, "available": True}]
    assert report["noops"] == {"timeout": 1}
    assert outcome.arms[0].milestones_reached == 1


def test_the_terminal_view_shows_one_row_per_arm_with_progress_and_the_latest_alert() -> None:
    import io

    from rich.console import Console

    from mcu_arms.supervise.live import LiveView, PlainView, progress_line

    progress = ArmProgress("arm_a", max_steps=100)
    progress.state = "running"
    progress.add_steps(
        [
            sample(
                "craft_x",
                i,
                10.0 + i,
                "timeout" if i == 3 else None,
                12.0,
                [{"identity": "mine_log", "step": 4}] if i == 4 else [],
            )
            for i in range(10)
        ]
    )
    progress.alerts.append("craft_x: 3 of 40 steps were noops (> 5%; by cause so far: timeout 3)")
    for width in (200, 80):  # one column per value; stacked on a default-size terminal, nothing cut short
        screen = io.StringIO()
        view = LiveView(Console(file=screen, force_terminal=True, width=width, color_system=None))
        queued = ArmProgress("arm_b", max_steps=50, state="queued")
        view.refresh([progress, queued], summary="0 of 2 done, 1 running, 1 queued, 0 failed, 0 retried; ETA 1:00")
        view.close([progress])
        drawn = screen.getvalue()
        for expected in (
            "arm_a",
            "running",
            "craft_x",
            "10/100",
            "mine_log@4",
            "timeout 1",
            "by cause so",
            "arm_b",
            "queued",
            "0 of 2 done",
            "ETA 1:00",
        ):
            assert expected in drawn, (width, expected)
        assert "…" not in drawn, width
    line = progress_line(progress)
    assert "step 10/100" in line and "milestones 1: mine_log@4" in line and "alerts 1" in line
    assert "noops infra 1 (10%): timeout 1" in line

    plain = io.StringIO()
    PlainView(Console(file=plain, width=200), interval_s=0).refresh([progress], summary="0 of 2 done")
    assert "arm_a: running, task craft_x, step 10/100" in plain.getvalue() and "0 of 2 done" in plain.getvalue()


def test_a_tally_gives_k_of_n_done_and_an_eta_from_the_pace_so_far() -> None:
    from mcu_arms.contracts.campaign_run import CampaignTally

    fresh = CampaignTally(total=6, done=0, running=2, queued=4, failed=0, retried=0, ended=0, elapsed_s=30)
    assert fresh.eta_s is None and fresh.text().endswith("ETA after the first episode ends")
    paced = CampaignTally(total=6, done=2, running=2, queued=1, failed=1, retried=1, ended=4, elapsed_s=400)
    assert paced.pace_s == 100 and paced.remaining == 3 and paced.eta_s == 300
    assert paced.text() == (
        "2 of 6 done, 2 running, 1 queued, 1 failed, 1 retried; ETA 5:00 (pace so far 1:40 per episode)"
    )
    assert (
        "ETA"
        not in CampaignTally(total=2, done=2, running=0, queued=0, failed=0, retried=0, ended=2, elapsed_s=9).text()
    )
    halfway = CampaignTally(
        total=4, done=2, running=2, queued=0, failed=0, retried=0, ended=2, in_progress=1.0, elapsed_s=300
    )
    assert halfway.pace_s == 100 and halfway.eta_s == 100, "two running halfway: one episode's worth of work left"


def test_fail_fast_stops_the_other_arms_when_one_fails_and_the_run_exits_1(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_arm(project, "broken")
    write_arm(project, "healthy")
    env = Environment(variables={"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, cwd=project)
    broken, healthy = plan_arms([project / "arms" / "broken.toml", project / "arms" / "healthy.toml"], Overrides(), env)
    crashes = [sys.executable, "-c", "raise SystemExit(4)"]
    plans = [_stand_ins(broken, WAITS, crashes), _stand_ins(healthy, WAITS, WAITS)]

    outcome, reports, _ = _run_plans(tmp_path, project, plans, ready_timeout_s=300, fail_fast=True)

    assert [arm.status for arm in outcome.arms] == ["failed", "interrupted"]
    assert outcome.exit_code == 1
    assert reports[1]["failure"]["reason"] == "stopped by --fail-fast: arm 'broken' failed"
    for role in ("green", "purple"):
        record = reports[1]["processes"][role]
        assert verified_process(record["pid"], record["create_time"]) is None, role


def test_a_failing_view_stops_the_arms_instead_of_leaving_them_running_unwatched(tmp_path: Path, monkeypatch) -> None:

    from mcu_arms.supervise import runner
    from mcu_arms.supervise.live import PlainView

    plan, project = _plan(tmp_path)

    class BrokenView(PlainView):
        def refresh(self, arms, summary=None) -> None:
            """Fails once green and purple are both started (and never ready: they are stand-ins)."""
            try:
                started = json.loads(RunDir(Path(plan.episode_dir)).report.read_text())["processes"]
            except (OSError, ValueError):
                return
            if "green" in started and "purple" in started:
                raise RuntimeError("the terminal went away")

    monkeypatch.setattr(runner, "make_view", lambda console, interval_s: BrokenView(console, interval_s))
    with pytest.raises(RuntimeError, match="terminal went away"):
        _run_plans(tmp_path, project, [_stand_ins(plan, WAITS, WAITS)], ready_timeout_s=300)
    report = json.loads(RunDir(Path(plan.episode_dir)).report.read_text())
    assert report["status"] == "interrupted" and "supervising loop failed" in report["failure"]["reason"]
    for role in ("green", "purple"):
        record = report["processes"][role]
        assert verified_process(record["pid"], record["create_time"]) is None, role


def test_a_purple_that_dies_leaving_a_process_in_its_own_session_gets_that_process_stopped_too(tmp_path: Path) -> None:
    leaves_orphan = [
        sys.executable,
        "-c",
        (
            "import subprocess, sys; orphan = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
            "start_new_session=True); print('orphan', orphan.pid, flush=True); sys.exit(3)"
        ),
    ]
    outcome, report, _ = _run_with_commands(tmp_path, WAITS, leaves_orphan, ready_timeout_s=60)
    assert report["failure"]["process"] == "purple" and report["failure"]["exit_code"] == 3
    try:
        orphan = psutil.Process(int(report["failure"]["log_tail"][0].split()[1]))
    except psutil.NoSuchProcess:
        return
    left = alive([orphan])
    if left:
        orphan.kill()
    assert left == [], "the process the purple left behind lives on"


SHUTS_DOWN_SLOWLY = """
import os, signal, sys, threading
journal = sys.argv[1]
def note(text):
    with open(journal, "a") as handle:
        handle.write(f"{os.environ['ROLE']} {text}\\n")
def on_term(signum, frame):
    note("term")
    threading.Event().wait(0.3)  # a server's own shutdown work
    note("exit")
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
note("ready")
threading.Event().wait(60)
"""


def test_children_stopped_at_once_each_get_their_sigterm_before_any_has_finished_its_shutdown(tmp_path: Path) -> None:
    from run_helpers import wait_for

    from mcu_arms.contracts.settings import ProcessPlan
    from mcu_arms.process.procs import Child
    from mcu_arms.supervise.runner import stopped_at_once

    journal = tmp_path / "journal"
    children = {}
    for role in ("green", "purple"):
        plan = ProcessPlan(
            role=role,
            argv=[sys.executable, "-c", SHUTS_DOWN_SLOWLY, str(journal)],
            env={"ROLE": role},
            cwd=str(tmp_path),
            log=str(tmp_path / f"{role}.log"),
        )
        children[role] = Child(plan, os.environ)
        children[role].start()
    wait_for(lambda: journal.is_file() and journal.read_text().count("ready") == 2, "both children ready", 30)
    outcomes = stopped_at_once(children, grace_s=10)
    assert all(outcome.was_running and outcome.terminated == 1 and not outcome.killed for outcome in outcomes.values())
    lines = [line for line in journal.read_text().splitlines() if not line.endswith("ready")]
    assert sorted(lines[:2]) == ["green term", "purple term"], lines
    assert sorted(lines[2:]) == ["green exit", "purple exit"], lines
    assert {children[role].exit_code for role in children} == {0}
