"""`status` and `stop`: what each arm's latest episode is doing, and stopping an arm's own recorded processes.

Only pids recorded in an arm's report are ever signalled, each after re-checking its create_time. Stopping prefers
asking the supervising `mcu-arms run` (SIGTERM when it runs nothing else, a stop request file otherwise), so that it
finalises the report itself; when it is gone, the processes are stopped here and the report is marked interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from mcu_arms.environment import Environment
from mcu_arms.contracts.errors import UserError
from mcu_arms.atomic import write_json_atomic
from mcu_arms.report.run_report import Episode, Failure, RunReport, arm_episodes, write_report
from mcu_arms.supervise.reruns import STOP_REQUEST, SUPERVISOR_ROLE, supervisor_alive
from mcu_arms.procs import DEFAULT_STOP_GRACE_S, stop_process_group, verified_process

STALE = "stale (supervisor gone)"
# How long `stop` waits for the supervisor to finalise the report before stopping the processes itself.
SUPERVISOR_FINALISE_MARGIN_S = 20.0
# The green first: stepping on without its purple, it would log every remaining step as a transport-error noop.
CHILD_ROLES = ("green", "purple", "client")


class ProcessState(BaseModel):
    role: str
    pid: int | None
    create_time: float | None
    alive: bool


class ArmState(BaseModel):
    arm: str
    state: str  # the report's status, "stale (supervisor gone)", "no report" or "unreadable report"
    episode: int | None = None
    episode_dir: str | None = None
    result_path: str | None = None
    fingerprint: str | None = None
    task: str | None = None
    step: int | None = None
    max_steps: int | None = None
    milestones: list[str] = []  # "identity@step"
    started_at: str | None = None
    finished_at: str | None = None
    score: float | None = None
    max_score: float | None = None
    failure: str | None = None
    alerts: int = 0
    processes: list[ProcessState] = []


def known_arms(env: Environment) -> list[str]:
    if not env.output_dir.is_dir():
        return []
    return sorted(p.name for p in env.output_dir.iterdir() if p.is_dir() and any(p.glob("episode_*")))


def _selected(env: Environment, names: list[str]) -> list[str]:
    known = known_arms(env)
    for name in names:
        if name not in known:
            raise UserError(
                f"no runs of arm '{name}' in {env.output_dir}", key="--arm", allowed=", ".join(known) or "none yet"
            )
    return names or known


def steps_progress(green_dir: Path) -> tuple[str | None, int | None, list[str]]:
    """(latest task, steps done in it, milestones 'identity@step') from the green's steps.jsonl files."""
    files = sorted(green_dir.glob("*/steps.jsonl"), key=lambda p: p.stat().st_mtime) if green_dir.is_dir() else []
    task, step, milestones = None, None, []
    for path in files:
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            if b'"events":[]' in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            milestones += [f"{event.get('identity')}@{event.get('step')}" for event in record.get("events") or []]
        for line in reversed(lines):
            try:
                task, step = path.parent.name, int(json.loads(line)["step"]) + 1
                break
            except (ValueError, KeyError, TypeError):
                continue
    return task, step, milestones


def _state_of(arm: str, episode: Episode) -> ArmState:
    report = episode.report
    task, step, milestones = steps_progress(episode.path / "green")
    base = ArmState(
        arm=arm, state="no report", episode=episode.number, episode_dir=str(episode.path), task=task, step=step,
        milestones=milestones,
    )  # fmt: skip
    if episode.report_error:
        return base.model_copy(update={"state": "unreadable report", "failure": episode.report_error})
    if report is None:
        return base
    state = report.status
    if state == "started" and not supervisor_alive(report):
        state = STALE
    processes = [
        ProcessState(
            role=role,
            pid=record.pid,
            create_time=record.create_time,
            alive=verified_process(record.pid, record.create_time) is not None,
        )
        for role, record in report.processes.items()
    ]
    if report.status != "started" and report.milestones:
        milestones = [f"{m.identity}@{m.step}" for m in report.milestones if m.step is not None]
    return base.model_copy(
        update={
            "state": state,
            "result_path": str(episode.path / "result.json"),
            "fingerprint": report.fingerprint,
            "max_steps": report.settings.steps,
            "milestones": milestones,
            "started_at": report.started_at,
            "finished_at": report.finished_at,
            "score": report.score,
            "max_score": report.max_score,
            "failure": f"{report.failure.process or 'mcu-arms'}: {report.failure.reason}" if report.failure else None,
            "alerts": len(report.alerts),
            "processes": processes,
        }
    )


def arm_states(env: Environment, names: list[str]) -> list[ArmState]:
    """Each arm's latest episode: its state, progress and recorded processes (alive or not)."""
    states = []
    for arm in _selected(env, names):
        found = arm_episodes(env.output_dir / arm)
        if found:
            states.append(_state_of(arm, found[0]))
    return states


class StopResult(BaseModel):
    arm: str
    action: str  # "not running" | "supervisor finalised" | "stopped here"
    message: str
    stopped: list[str] = []  # roles whose processes were stopped here
    survivors: list[int] = []


def _latest_with_report(env: Environment, arm: str) -> Episode | None:
    return next((e for e in arm_episodes(env.output_dir / arm) if e.report is not None), None)


def _same_supervisor(report: RunReport, other: RunReport) -> bool:
    mine, theirs = report.processes.get(SUPERVISOR_ROLE), other.processes.get(SUPERVISOR_ROLE)
    return bool(mine and theirs and mine.pid == theirs.pid and mine.create_time == theirs.create_time)


def _ask_supervisor(env: Environment, episode: Episode, names: list[str]) -> str:
    """SIGTERM the supervising run when it runs only arms being stopped; otherwise leave a stop request file."""
    report = episode.report
    assert report is not None
    others = []
    for arm in known_arms(env):
        latest = _latest_with_report(env, arm)
        if arm not in names and latest and latest.report and latest.report.status == "started":
            if _same_supervisor(report, latest.report):
                others.append(arm)
    record = report.processes[SUPERVISOR_ROLE]
    if not others:
        process = verified_process(record.pid, record.create_time)
        if process is not None:
            process.send_signal(signal.SIGTERM)  # psutil re-checks the pid's identity before signalling
            return f"sent SIGTERM to its mcu-arms run (pid {record.pid})"
    request = episode.path / STOP_REQUEST
    write_json_atomic(request, {"requested_by": f"mcu-arms stop (pid {os.getpid()})"})
    return f"asked its mcu-arms run (pid {record.pid}, also running {', '.join(others)}) to stop this arm"


def _wait_finalised(path: Path, deadline: float) -> bool:
    from mcu_arms.report.run_report import read_report

    pause = threading.Event()
    while time.monotonic() < deadline:
        try:
            if read_report(path).status != "started":
                return True
        except (OSError, UserError):  # not there or not a report (yet): ask again until the deadline
            pass
        pause.wait(0.2)
    return False


def stop_arm(env: Environment, arm: str, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> StopResult:
    episode = _latest_with_report(env, arm)
    if episode is None or episode.report is None:
        return StopResult(arm=arm, action="not running", message="no report: nothing was started for it")
    report = episode.report
    result_path = episode.path / "result.json"
    if report.status == "started" and supervisor_alive(report):
        asked = _ask_supervisor(env, episode, names)
        if _wait_finalised(result_path, time.monotonic() + grace_s + SUPERVISOR_FINALISE_MARGIN_S):
            return StopResult(arm=arm, action="supervisor finalised", message=f"{asked}; report now interrupted")
        asked += "; it did not finalise in time, so its processes are stopped here"
    elif report.status == "started":
        asked = "its mcu-arms run is gone (stale report)"
    else:
        asked = f"report is {report.status}"
    stopped, survivors = [], []
    for role in CHILD_ROLES:
        record = report.processes.get(role)
        if record is None:
            continue
        outcome = stop_process_group(record.pid, record.create_time, grace_s=grace_s, token=record.owner_token)
        if outcome.was_running:
            stopped.append(role)
            survivors += outcome.survivors
    was_started = report.status == "started"
    if was_started:
        report.status = "interrupted"
        report.failure = Failure(process=None, reason=f"stopped by mcu-arms stop (pid {os.getpid()}): {asked}")
        report.finished_at = env.clock().isoformat(timespec="seconds")
        write_report(report, result_path)
    if not stopped and not was_started:
        return StopResult(arm=arm, action="not running", message=f"{asked}; none of its processes is alive")
    shown = ", ".join(stopped) or "none alive"
    return StopResult(
        arm=arm, action="stopped here", message=f"{asked}; stopped: {shown}", stopped=stopped, survivors=survivors
    )


def stop_arms(env: Environment, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> list[StopResult]:
    if not names:
        raise UserError("name the arm(s) to stop", key="--arm", allowed=", ".join(known_arms(env)) or "none yet")
    return [stop_arm(env, arm, names, grace_s) for arm in _selected(env, names)]
