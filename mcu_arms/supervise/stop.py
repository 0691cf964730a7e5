"""`stop`: stopping an arm's own processes, whichever of its episodes started them, or cancelling its own Slurm
jobs.

Only processes an arm's reports account for are ever signalled: recorded pids (create_time re-checked), holders of a
recorded owner token, members of a recorded cgroup. Stopping prefers asking the supervising `mcu-arms run` (SIGTERM
when it runs nothing else, a stop request file otherwise), so that it finalises the report itself; when it is gone,
the processes are stopped here and the report is marked interrupted.

An arm whose episodes are Slurm jobs is stopped by cancelling those jobs, by the ids its episodes recorded (never by
name or user), each after a stop request in the episode: the episode on its node finalises its own report
`interrupted`; one cancelled before it started is marked so here.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Literal

from pydantic import BaseModel

from mcu_arms.cluster.slurm import job_states
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import Failure, RunReport, read_report
from mcu_arms.contracts.states import OPEN_STATUSES, STOP_ORDER, SUPERVISOR_ROLE
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, RunOnDisk, arm_runs, episode_name, known_arms, selected_arms
from mcu_arms.procs import DEFAULT_STOP_GRACE_S, live_processes, stop_recorded, supervisor_alive, verified_process
from mcu_arms.supervise.jobs import OpenJob, cancel_episode, finalised, open_jobs, report_of_ended_job

# How long `stop` waits for the supervisor to finalise the report before stopping the processes itself.
SUPERVISOR_FINALISE_MARGIN_S = 20.0

StopAction = Literal["not running", "supervisor finalised", "stopped here", "cancelled"]


class StopResult(BaseModel):
    arm: str
    action: StopAction
    message: str
    stopped: list[str] = []  # "episode_NNN role" of each process stopped here
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
    episode.run_dir.request_stop(f"mcu-arms stop (pid {os.getpid()})")
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


def _cancel_jobs(env: Environment, arm: str, jobs: list[OpenJob], grace_s: float) -> StopResult:
    """Cancel the arm's open Slurm jobs and wait (bounded) for their episodes to finalise their reports; one whose job
    is gone without a final report (cancelled while queued) is finalised here."""
    who = f"mcu-arms stop (pid {os.getpid()})"
    notes = []
    for open_job in jobs:
        problem = cancel_episode(open_job.run.run_dir, open_job.job, env, who)
        notes.append(f"{episode_name(open_job.run.number)}: {problem or f'cancelled Slurm job {open_job.job.job_id}'}")
    waiting = list(jobs)
    deadline = time.monotonic() + grace_s + SUPERVISOR_FINALISE_MARGIN_S
    pause = threading.Event()
    while waiting:
        still = []
        answer = job_states([open_job.job.job_id for open_job in waiting], env.env)
        for open_job in waiting:
            try:
                report = read_report(open_job.run.run_dir.report)
            except (OSError, UserError):
                still.append(open_job)
                continue
            if report.status not in OPEN_STATUSES:
                continue
            ended = report_of_ended_job(report, open_job.job, answer.jobs.get(open_job.job.job_id))
            if answer.answered and ended is not None and (report.status == "queued" or time.monotonic() > deadline):
                finalised(open_job.run.run_dir, report, *ended, env, open_job.job)
                continue
            still.append(open_job)
        waiting = still
        if time.monotonic() > deadline:
            notes += [f"{episode_name(job.run.number)}: its report is not final yet (see `mcu-arms status --arm {arm}`)"
                      for job in waiting]  # fmt: skip
            break
        pause.wait(0.5)
    stopped = [f"{episode_name(open_job.run.number)} job {open_job.job.job_id}" for open_job in jobs]
    return StopResult(arm=arm, action="cancelled", message="; ".join(notes), stopped=stopped)


def stop_arm(env: Environment, arm: str, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> StopResult:
    """Stop every live process of the arm, whichever episode started it: a supervising run is asked first (it
    finalises its report); what is left — orphans of a run that died, leftovers found by owner token or cgroup — is
    stopped here, and a `started` report whose run is gone is marked interrupted. An arm with open Slurm episodes is
    stopped by cancelling their jobs (their processes are the nodes')."""
    jobs = open_jobs(env, [arm])
    if jobs:
        return _cancel_jobs(env, arm, jobs, grace_s)
    every_run = arm_runs(env.output_dir / arm)
    runs = [run for run in every_run if run.report is not None]
    if not runs:
        unreadable = next((run for run in every_run if run.report_error is not None), None)
        if unreadable is not None:  # say so: something may have been started, and its report cannot tell
            return StopResult(arm=arm, action="not running", message=f"the report of {unreadable.run_dir.name} is "
                              f"unreadable ({unreadable.report_error}): no process could be found through it")  # fmt: skip
        return StopResult(arm=arm, action="not running", message="no report: nothing was started for it")
    notes: list[str] = []
    finalised = False
    overdue: set[int] = set()  # episodes whose supervisor did not finalise in time: stopped here after all
    for run in runs:
        report = run.report
        assert report is not None
        if report.status == "started" and supervisor_alive(report):
            asked = _ask_supervisor(env, run, names)
            if _wait_finalised(run.run_dir, time.monotonic() + grace_s + SUPERVISOR_FINALISE_MARGIN_S):
                notes.append(f"{run.run_dir.name}: {asked}; report now interrupted")
                finalised = True
            else:
                notes.append(f"{run.run_dir.name}: {asked}; it did not finalise in time, so its processes are stopped here")
                overdue.add(run.number)
    stopped, survivors, marked = _stop_what_is_left(env, arm, notes, overdue, grace_s)
    if not stopped and not marked:
        if finalised:
            return StopResult(arm=arm, action="supervisor finalised", message="; ".join(notes))
        latest = runs[0].report
        assert latest is not None
        return StopResult(
            arm=arm, action="not running", message=f"report is {latest.status}; none of its processes is alive"
        )
    shown = ", ".join(stopped) or "none alive"
    return StopResult(
        arm=arm, action="stopped here", message="; ".join([*notes, f"stopped: {shown}"]), stopped=stopped,
        survivors=survivors,
    )  # fmt: skip


def _stop_what_is_left(
    env: Environment, arm: str, notes: list[str], overdue: set[int], grace_s: float
) -> tuple[list[str], list[int], bool]:
    """Stop the live processes of every episode (re-read: a supervisor may just have finalised), and mark each
    `started` report whose run is gone interrupted. Returns what was stopped, the survivors, and whether a report was
    marked."""
    stopped: list[str] = []
    survivors: list[int] = []
    marked = False
    for run in arm_runs(env.output_dir / arm):
        report = run.report
        supervised = report is not None and report.status == "started" and supervisor_alive(report)
        if report is None or (supervised and run.number not in overdue):
            continue  # a live supervisor was asked above; it stops its own
        live = live_processes([(run.number, report)])
        gone = report.status == "started"
        if not live and not gone:
            continue
        for role in STOP_ORDER:
            record = report.processes.get(role)
            if record is None:
                continue
            outcome = stop_recorded(record, grace_s=grace_s)
            if outcome.was_running:
                stopped.append(f"{run.run_dir.name} {role}")
                survivors += outcome.survivors
            if outcome.contained:
                notes.append(
                    f"{run.run_dir.name} {role}: pids {outcome.contained} had left its process group and owner token; "
                    "found in its cgroup"
                )
        if gone:
            why = "its mcu-arms run did not finalise" if supervised else "its mcu-arms run is gone (stale report)"
            notes.append(f"{run.run_dir.name}: {why}")
            report.status = "interrupted"
            report.failure = Failure(process=None, reason=f"stopped by mcu-arms stop (pid {os.getpid()}): {why}")
            report.finished_at = iso_seconds(env.clock())
            run.run_dir.write_report(report)
            marked = True
    return stopped, survivors, marked


def stop_arms(env: Environment, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> list[StopResult]:
    if not names:
        raise UserError(
            "name the arm(s) to stop", key="--arm", allowed=", ".join(known_arms(env.output_dir)) or "none yet"
        )
    return [stop_arm(env, arm, names, grace_s) for arm in selected_arms(env.output_dir, names)]
