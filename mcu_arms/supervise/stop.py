"""`stop`: stopping an arm's own recorded processes.

Only pids recorded in an arm's report are ever signalled, each after re-checking its create_time. Stopping prefers
asking the supervising `mcu-arms run` (SIGTERM when it runs nothing else, a stop request file otherwise), so that it
finalises the report itself; when it is gone, the processes are stopped here and the report is marked interrupted.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Literal

from pydantic import BaseModel

from mcu_arms.atomic import write_json_atomic
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import Failure, RunReport, read_report
from mcu_arms.contracts.states import STOP_ORDER, SUPERVISOR_ROLE
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, RunOnDisk, arm_runs, known_arms, selected_arms
from mcu_arms.procs import DEFAULT_STOP_GRACE_S, stop_process_group, supervisor_alive, verified_process

# How long `stop` waits for the supervisor to finalise the report before stopping the processes itself.
SUPERVISOR_FINALISE_MARGIN_S = 20.0

StopAction = Literal["not running", "supervisor finalised", "stopped here"]


class StopResult(BaseModel):
    arm: str
    action: StopAction
    message: str
    stopped: list[str] = []  # roles whose processes were stopped here
    survivors: list[int] = []


def _latest_with_report(env: Environment, arm: str) -> RunOnDisk | None:
    return next((run for run in arm_runs(env.output_dir / arm) if run.report is not None), None)


def _same_supervisor(report: RunReport, other: RunReport) -> bool:
    mine, theirs = report.processes.get(SUPERVISOR_ROLE), other.processes.get(SUPERVISOR_ROLE)
    return bool(mine and theirs and mine.pid == theirs.pid and mine.create_time == theirs.create_time)


def _ask_supervisor(env: Environment, episode: RunOnDisk, names: list[str]) -> str:
    """SIGTERM the supervising run when it runs only arms being stopped; otherwise leave a stop request file."""
    report = episode.report
    assert report is not None
    others = []
    for arm in known_arms(env.output_dir):
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
    write_json_atomic(episode.run_dir.stop_request, {"requested_by": f"mcu-arms stop (pid {os.getpid()})"})
    return f"asked its mcu-arms run (pid {record.pid}, also running {', '.join(others)}) to stop this arm"


def _wait_finalised(run_dir: RunDir, deadline: float) -> bool:
    pause = threading.Event()
    while time.monotonic() < deadline:
        try:
            if read_report(run_dir.report).status != "started":
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
    if report.status == "started" and supervisor_alive(report):
        asked = _ask_supervisor(env, episode, names)
        if _wait_finalised(episode.run_dir, time.monotonic() + grace_s + SUPERVISOR_FINALISE_MARGIN_S):
            return StopResult(arm=arm, action="supervisor finalised", message=f"{asked}; report now interrupted")
        asked += "; it did not finalise in time, so its processes are stopped here"
    elif report.status == "started":
        asked = "its mcu-arms run is gone (stale report)"
    else:
        asked = f"report is {report.status}"
    stopped, survivors = [], []
    for role in STOP_ORDER:
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
        report.finished_at = iso_seconds(env.clock())
        episode.run_dir.write_report(report)
    if not stopped and not was_started:
        return StopResult(arm=arm, action="not running", message=f"{asked}; none of its processes is alive")
    shown = ", ".join(stopped) or "none alive"
    return StopResult(
        arm=arm, action="stopped here", message=f"{asked}; stopped: {shown}", stopped=stopped, survivors=survivors
    )


def stop_arms(env: Environment, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> list[StopResult]:
    if not names:
        raise UserError(
            "name the arm(s) to stop", key="--arm", allowed=", ".join(known_arms(env.output_dir)) or "none yet"
        )
    return [stop_arm(env, arm, names, grace_s) for arm in selected_arms(env.output_dir, names)]
