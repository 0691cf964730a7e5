"""`stop`: stopping an arm's own processes, whichever of its episodes started them, or cancelling its own Slurm
jobs.

What is signalled comes from the private record of what we started (private_record.py), never from a report in
`output/`: a recorded process that still carries its evidence (pid and create time re-checked, and its owner token
or its marked cgroup), the holders of a recorded owner token, the members of a recorded cgroup that still carries
its marker. A report that names anything else is said to, and left alone. Stopping prefers asking the supervising
`mcu-arms run` (SIGTERM when it runs nothing else, a stop request file otherwise), so that it finalises the report
itself; when it is gone, the processes are stopped here and the report is marked interrupted.

An arm whose episodes are Slurm jobs is stopped by cancelling those jobs, by the ids its episodes recorded (never by
name or user), each after a stop request in the episode: the episode on its node finalises its own report
`interrupted`; one cancelled before it started is marked so here.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from mcu_arms.cluster.slurm import job_states
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import Failure, read_report
from mcu_arms.contracts.started import EpisodeRecord, StartedProcess
from mcu_arms.contracts.states import OPEN_STATUSES, STOP_ORDER, SUPERVISOR_ROLE
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.layout import STOP_COMMAND, RunDir, RunOnDisk, arm_runs, episode_name, known_arms, selected_arms
from mcu_arms.process.private_record import (
    episode_key,
    episode_record,
    forget_started,
    recorded_episodes,
    records_dir,
)
from mcu_arms.process.procs import DEFAULT_STOP_GRACE_S, recorded_alive, stop_started, terminate_started
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


def _supervisor(record: EpisodeRecord) -> StartedProcess | None:
    """The episode's supervising run, when the record names it and it still runs."""
    supervisor = record.processes.get(SUPERVISOR_ROLE)
    return supervisor if supervisor is not None and recorded_alive(supervisor) else None


def _ask_supervisor(env: Environment, record: EpisodeRecord, supervisor: StartedProcess, names: list[str]) -> str:
    """SIGTERM the supervising run when it runs only arms being stopped; otherwise leave a stop request file."""
    others = sorted(
        {
            other.arm
            for other in recorded_episodes(env.variables)
            if other.arm not in names
            and (theirs := other.processes.get(SUPERVISOR_ROLE)) is not None
            and (theirs.pid, theirs.create_time) == (supervisor.pid, supervisor.create_time)
        }
    )
    RunDir(Path(record.episode_dir)).request_stop(
        f"{STOP_COMMAND} (pid {os.getpid()})"
    )  # the report names who stopped it
    if not others and terminate_started(supervisor):
        return f"sent SIGTERM to its mcu-arms run (pid {supervisor.pid})"
    also = f", also running {', '.join(others)}" if others else ""
    return f"asked its mcu-arms run (pid {supervisor.pid}{also}) to stop this arm"


def _not_ours(run: RunOnDisk, record: EpisodeRecord | None) -> str | None:
    """What an open report names that the private record does not: processes this project did not start (a stale,
    copied or forged report), left alone."""
    report = run.report
    if report is None or report.status not in OPEN_STATUSES:
        return None
    recorded = record.processes if record is not None else {}
    named = []
    for role, process in report.processes.items():
        ours = recorded.get(role)
        same = ours is not None and ours.pid == process.pid and process.cgroup in (None, ours.cgroup)
        if not same and (process.pid is not None or process.cgroup is not None):
            named.append(f"{role} pid {process.pid}" + (f" cgroup {process.cgroup}" if process.cgroup else ""))
    if not named:
        return None
    return f"{run.run_dir.name}: its report names processes this project did not start ({'; '.join(named)}): left alone"


def _wait_finalised(run_dir: RunDir, supervisor: StartedProcess, deadline: float) -> bool:
    """Until the report is final, or the supervisor is gone (a report it could not write is not waited for)."""
    pause = threading.Event()
    while time.monotonic() < deadline:
        if not recorded_alive(supervisor):
            return True
        try:
            if read_report(run_dir.report).status != "started":
                return True
        except (OSError, UserError):  # not there or not a report (yet): ask again until the deadline
            pass
        pause.wait(0.2)
    return False


def _submitted_here(env: Environment, open_job: OpenJob) -> bool:
    """Is the job the episode's files name the one this host submitted for it (the private record says)?"""
    record = episode_record(env.variables, open_job.run.run_dir.path)
    return record is not None and record.slurm is not None and record.slurm.job_id == open_job.job.job_id


def _cancel_jobs(env: Environment, arm: str, jobs: list[OpenJob], grace_s: float) -> StopResult:
    """Cancel the arm's open Slurm jobs and wait (bounded) for their episodes to finalise their reports; one whose job
    is gone without a final report (cancelled while queued) is finalised here."""
    who = f"{STOP_COMMAND} (pid {os.getpid()})"
    notes = [
        f"{episode_name(job.run.number)}: {job.run.run_dir.slurm_job} names Slurm job {job.job.job_id}, which this "
        "host's private record does not name for it: not cancelled"
        for job in jobs
        if not _submitted_here(env, job)
    ]
    jobs = [job for job in jobs if _submitted_here(env, job)]
    for open_job in jobs:
        problem = cancel_episode(open_job.run.run_dir, open_job.job, env, who)
        notes.append(f"{episode_name(open_job.run.number)}: {problem or f'cancelled Slurm job {open_job.job.job_id}'}")
    waiting = list(jobs)
    deadline = time.monotonic() + grace_s + SUPERVISOR_FINALISE_MARGIN_S
    pause = threading.Event()
    while waiting:
        still = []
        answer = job_states([open_job.job.job_id for open_job in waiting], env.variables)
        for open_job in waiting:
            try:
                report = read_report(open_job.run.run_dir.report)
            except (OSError, UserError):
                still.append(open_job)
                continue
            if report.status not in OPEN_STATUSES:
                continue
            ended = report_of_ended_job(
                open_job.run.run_dir, report, open_job.job, answer.jobs.get(open_job.job.job_id)
            )
            if answer.answered and ended is not None and (report.status == "queued" or time.monotonic() > deadline):
                finalised(open_job.run.run_dir, report, *ended, env, open_job.job)
                continue
            still.append(open_job)
        waiting = still
        if time.monotonic() > deadline:
            notes += [
                f"{episode_name(job.run.number)}: its report is not final yet (see `mcu-arms status --arm {arm}`)"
                for job in waiting
            ]
            break
        pause.wait(0.5)
    stopped = [f"{episode_name(open_job.run.number)} job {open_job.job.job_id}" for open_job in jobs]
    return StopResult(arm=arm, action="cancelled", message="; ".join(notes), stopped=stopped)


def stop_arm(env: Environment, arm: str, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> StopResult:
    """Stop every live process the private record names for the arm, whichever episode started it: a supervising run
    is asked first (it finalises its report); what is left — orphans of a run that died, leftovers found by owner
    token or cgroup — is stopped here, and a `started` report whose run is gone is marked interrupted. An arm with
    open Slurm episodes is stopped by cancelling their jobs (their processes are the nodes')."""
    jobs = open_jobs(env, [arm])
    if jobs:
        return _cancel_jobs(env, arm, jobs, grace_s)
    arm_dir = env.output_dir / arm
    runs = arm_runs(arm_dir)
    records = {record.episode_dir: record for record in recorded_episodes(env.variables, arm_dir)}
    notes = [
        f"the report of {run.run_dir.name} is unreadable ({run.report_error}); its processes are found through "
        "the private record"
        for run in runs
        if run.report_error
    ]
    notes += [note for run in runs if (note := _not_ours(run, records.get(episode_key(run.run_dir.path))))]
    if not records and not any(run.report for run in runs):
        message = "; ".join(notes) or "no report: nothing was started for it"
        return StopResult(arm=arm, action="not running", message=message)
    finalised = False
    overdue: set[str] = set()  # episodes whose supervisor did not finalise in time: stopped here after all
    # Episodes whose supervisor the private record names and finds gone: the only reports `stop` may finalise.
    proven_gone = {
        key for key, record in records.items() if SUPERVISOR_ROLE in record.processes and _supervisor(record) is None
    }
    for record in records.values():
        supervisor = _supervisor(record)
        if supervisor is None:
            continue
        asked = _ask_supervisor(env, record, supervisor, names)
        run_dir = RunDir(Path(record.episode_dir))
        if _wait_finalised(run_dir, supervisor, time.monotonic() + grace_s + SUPERVISOR_FINALISE_MARGIN_S):
            notes.append(f"{run_dir.name}: {asked}; report now interrupted")
            finalised = True
        else:
            notes.append(f"{run_dir.name}: {asked}; it did not finalise in time, so its processes are stopped here")
            overdue.add(record.episode_dir)
    stopped, survivors = _stop_what_is_left(env, arm_dir, notes, overdue, grace_s)
    proven_gone |= {key for key in overdue if _supervisor(records[key]) is None}
    marked = _mark_stale(env, runs, notes, proven_gone)
    if not stopped and not marked:
        if finalised:
            return StopResult(arm=arm, action="supervisor finalised", message="; ".join(notes))
        latest = next((run for run in runs if run.report is not None), None)
        state = f"report is {latest.report.status}" if latest and latest.report else "no readable report"
        return StopResult(
            arm=arm, action="not running", message="; ".join([*notes, f"{state}; none of its processes is alive"])
        )
    shown = ", ".join(stopped) or "none alive"
    return StopResult(
        arm=arm,
        action="stopped here",
        message="; ".join([*notes, f"stopped: {shown}"]),
        stopped=stopped,
        survivors=survivors,
    )


def _stop_what_is_left(
    env: Environment, arm_dir: Path, notes: list[str], overdue: set[str], grace_s: float
) -> tuple[list[str], list[int]]:
    """Stop the live processes the private record names for each episode (re-read: a supervisor may just have
    finalised and dropped them), and drop from the record what is gone. Returns what was stopped and the
    survivors."""
    stopped: list[str] = []
    survivors: list[int] = []
    for record in recorded_episodes(env.variables, arm_dir):
        if _supervisor(record) is not None and record.episode_dir not in overdue:
            continue  # a live supervisor was asked above; it stops its own
        name = episode_name(record.episode)
        gone = [SUPERVISOR_ROLE] if _supervisor(record) is None else []
        for role in STOP_ORDER:
            started = record.processes.get(role)
            if started is None:
                continue
            outcome = stop_started(started, grace_s=grace_s)
            if outcome.was_running:
                stopped.append(f"{name} {role}")
                survivors += outcome.survivors
            if not outcome.survivors:
                gone.append(role)
            if outcome.contained:
                notes.append(
                    f"{name} {role}: pids {outcome.contained} had left its process group and owner token; "
                    "found in its cgroup"
                )
        try:
            forget_started(env.variables, record.episode_dir, gone)
        except (OSError, UserError) as error:  # stopped all the same; the record still names what is gone
            problem = error.render() if isinstance(error, UserError) else f"{records_dir(env.variables)}: {error}"
            notes.append(f"{name}: the private record could not be updated: {problem}")
    return stopped, survivors


NOT_OURS_TO_STOP = "not ours to stop: this run's record is in another state directory (or unreadable)"


def _mark_stale(env: Environment, runs: list[RunOnDisk], notes: list[str], proven_gone: set[str]) -> bool:
    """Mark each `started` report whose supervisor the private record proves gone interrupted (re-read: a supervisor
    may just have finalised it); one without a record here is not ours to judge and stays as it is. Whether one was
    marked."""
    marked = False
    for run in runs:
        try:
            report = read_report(run.run_dir.report)
        except (OSError, UserError):
            continue
        if report.status != "started" or report.slurm is not None:
            continue
        key = episode_key(run.run_dir.path)
        if key not in proven_gone:
            record = episode_record(env.variables, run.run_dir.path)
            if record is None:
                notes.append(f"{run.run_dir.name}: {NOT_OURS_TO_STOP}; its report is left as it is")
            continue
        why = "its mcu-arms run is gone (stale report): interrupted (supervisor gone), as its private record shows"
        notes.append(f"{run.run_dir.name}: {why}")
        report.status = "interrupted"
        report.failure = Failure(
            process=None,
            reason=f"stopped by mcu-arms stop (pid {os.getpid()}): {why}",
            stopped_by=f"{STOP_COMMAND} (pid {os.getpid()})",
        )
        report.finished_at = iso_seconds(env.clock())
        run.run_dir.write_report(report)
        marked = True
    return marked


def stop_arms(env: Environment, names: list[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> list[StopResult]:
    if not names:
        raise UserError(
            "name the arm(s) to stop", key="--arm", allowed=", ".join(known_arms(env.output_dir)) or "none yet"
        )
    return [stop_arm(env, arm, names, grace_s) for arm in selected_arms(env.output_dir, names)]
