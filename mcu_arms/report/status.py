"""`status`: what each arm's latest episode is doing, from its report, its step logs and its recorded processes,
and every live process of the arm, whichever episode started it.

Reading only: nothing here signals anything. A `started` report whose supervising `mcu-arms run` is gone is shown
as stale. An episode run as a Slurm job is read from its files first; Slurm (squeue, then sacct) is asked only
whether the job of an open report still runs, and what it ended as when it ended without a final report.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from mcu_arms.cluster.slurm import (
    SlurmAnswer,
    accounting_or_why,
    ended_without_report,
    episode_job,
    job_states,
    this_host,
)
from mcu_arms.contracts.slurm import SlurmAccounting, SlurmJob, is_active
from mcu_arms.contracts.states import OPEN_STATUSES, ArmStatusText
from mcu_arms.contracts.steps import STEPS_FILE, StepProgress, read_jsonl
from mcu_arms.environment import Environment
from mcu_arms.layout import RunOnDisk, arm_runs, selected_arms
from mcu_arms.procs import FoundBy, is_alive, live_processes, supervisor_alive

STALE: ArmStatusText = "stale (supervisor gone)"
JOB_ENDED: ArmStatusText = "stale (job ended)"
TIME_LIMIT: ArmStatusText = "failed (time limit)"
CANCELLED: ArmStatusText = "interrupted (cancelled)"


class ProcessState(BaseModel):
    role: str
    pid: int | None
    create_time: float | None
    alive: bool


class LiveProcessState(BaseModel):
    """A process of the arm that still runs: of an earlier episode, or a leftover found by owner token or cgroup."""

    episode: int
    role: str
    pid: int
    found_by: FoundBy


class SlurmJobState(BaseModel):
    """An episode's Slurm job as `status --json` gives it: what the episode recorded, and (for an open report) what
    Slurm says now."""

    job_id: str
    name: str | None = None  # `mcu-arms:ARM:seedN`, or the array's name shared by its tasks
    array_job_id: str | None = None
    array_task: int | None = None
    state: str | None = None  # squeue's state, asked for open reports only
    reason: str | None = None  # why it waits (Resources, Priority, ...) or ended
    node: str | None = None
    time_left: str | None = None
    stdout: str | None = None  # the episode's stdout and stderr on the node (absolute)
    stderr: str | None = None
    log: str | None = None  # the job script's own output (its setup lines)
    accounting: SlurmAccounting | str | None = None  # sacct's figures, or "not available on this cluster"


class ArmState(BaseModel):
    arm: str
    state: ArmStatusText
    episode: int | None = None
    seed: int | None = None
    episode_dir: str | None = None
    result_path: str | None = None
    fingerprint: str | None = None
    task: str | None = None
    step: int | None = None
    max_steps: int | None = None
    milestones: list[str] = []  # "identity@step"
    milestones_total: int | None = None  # from the finished report: every milestone or reward entry
    milestones_reachable: int | None = None  # of those, the ones this simulator can reach at all
    infrastructure: dict[str, int] = {}
    started_at: str | None = None
    finished_at: str | None = None
    score: float | None = None
    max_score: float | None = None
    failure: str | None = None
    alerts: int = 0
    processes: list[ProcessState] = []  # on a Slurm node other than this host: not listed (their pids are the node's)
    live_elsewhere: list[LiveProcessState] = []  # live processes beyond the latest episode's recorded ones
    slurm_job: str | None = None  # "6_0 RUNNING on vm": the job the episode runs as, and what Slurm says of it
    slurm: SlurmJobState | None = None  # the same, field by field


def steps_progress(green_dir: Path) -> tuple[str | None, int | None, list[str]]:
    """(latest task, steps done in it, milestones 'identity@step') from the green's steps.jsonl files."""
    files = sorted(green_dir.glob(f"*/{STEPS_FILE}"), key=lambda p: p.stat().st_mtime) if green_dir.is_dir() else []
    task, step, milestones = None, None, []
    for path in files:
        records, _ = read_jsonl(path, StepProgress)
        for record in records:
            milestones += [f"{event.get('identity')}@{event.get('step')}" for event in record.events]
        if records:
            task, step = path.parent.name, records[-1].step + 1
    return task, step, milestones


def _job_text(job: SlurmJob, answer: SlurmAnswer | None) -> str:
    """The job, and (for an open report, when `answer` is Slurm's) what Slurm says of it: why it waits, when it
    does."""
    status = answer.jobs.get(job.job_id) if answer else None
    node = (status.node if status else "") or job.node
    where = f" on {node}" if node else ""
    if answer is None:
        return f"{job.job_id}{where}"
    if status is None:
        return f"{job.job_id}{where} ({'unknown to Slurm now' if answer.answered else 'Slurm cannot be asked now'})"
    waits = f" ({status.reason})" if status.state == "PENDING" and status.reason not in ("", "None") else ""
    return f"{job.job_id} {status.state}{waits}{where}"


def _in_episode(path: str | None, episode_dir: Path) -> str | None:
    return str(episode_dir / path) if path else None


def _job_state(job: SlurmJob, answer: SlurmAnswer | None, episode_dir: Path,
               accounting: dict[str, SlurmAccounting | str]) -> SlurmJobState:  # fmt: skip
    status = answer.jobs.get(job.job_id) if answer else None
    said: dict[str, str | None] = {"node": job.node, "name": job.name}
    if status is not None:
        said = {"state": status.state, "node": status.node or job.node, "name": job.name or status.name or None,
                "reason": status.reason if status.reason not in ("", "None") else None,
                "time_left": status.time_left if is_active(status.state) else None}  # fmt: skip
    return SlurmJobState(
        job_id=job.job_id, array_job_id=job.array_job_id, array_task=job.array_task,
        stdout=_in_episode(job.stdout, episode_dir), stderr=_in_episode(job.stderr, episode_dir),
        log=_in_episode(job.log, episode_dir), accounting=accounting.get(job.job_id, job.accounting), **said,
    )  # fmt: skip


def _state_of(
    arm: str, run: RunOnDisk, answer: SlurmAnswer | None, accounting: dict[str, SlurmAccounting | str]
) -> ArmState:
    report = run.report
    run_dir = run.run_dir
    task, step, milestones = steps_progress(run_dir.green)
    base = ArmState(
        arm=arm, state="no report", episode=run.number, episode_dir=str(run_dir.path), task=task, step=step,
        milestones=milestones,
    )  # fmt: skip
    if run.report_error:
        return base.model_copy(update={"state": "unreadable report", "failure": run.report_error})
    if report is None:
        return base
    state: ArmStatusText = report.status
    failure = report.failure
    job = episode_job(run_dir, report)
    if job is not None and report.status in OPEN_STATUSES and answer is not None and answer.answered:
        status = answer.jobs.get(job.job_id)
        if status is None or not is_active(status.state):  # ended without its final report
            ended, failure = ended_without_report(job, status, run_dir.stop_requested_by())
            state = TIME_LIMIT if failure.kind == "time_limit" else CANCELLED if ended == "interrupted" else JOB_ENDED
    elif job is None and state == "started" and not supervisor_alive(report):
        state = STALE
    if state == "failed" and failure is not None and failure.kind == "time_limit":
        state = TIME_LIMIT
    if state == "interrupted" and job is not None:  # on Slurm, what was stopped is a cancelled job
        state = CANCELLED
    local = job is None or job.node in (None, this_host())
    processes = [
        ProcessState(
            role=role,
            pid=record.pid,
            create_time=record.create_time,
            alive=is_alive(record.pid, record.create_time),
        )
        for role, record in report.processes.items()
    ] if local else []  # fmt: skip
    if report.status != "started" and report.milestones:
        milestones = [f"{m.identity}@{m.step}" for m in report.milestones if m.step is not None]
    return base.model_copy(
        update={
            "state": state,
            "seed": report.settings.seed,
            "result_path": str(run_dir.report),
            "fingerprint": report.fingerprint,
            "max_steps": report.settings.steps,
            "milestones": milestones,
            "milestones_total": report.milestone_counts()[1] or None,
            "milestones_reachable": report.milestone_counts()[2] if report.milestones else None,
            "infrastructure": dict(report.infrastructure),
            "started_at": report.started_at,
            "finished_at": report.finished_at,
            "score": report.score,
            "max_score": report.max_score,
            "failure": f"{failure.process or 'mcu-arms'}: {failure.reason}" if failure else None,
            "alerts": len(report.alerts),
            "processes": processes,
            "slurm_job": _job_text(job, answer if report.status in OPEN_STATUSES else None) if job else None,
            "slurm": _job_state(job, answer if report.status in OPEN_STATUSES else None, run_dir.path, accounting)
            if job else None,
        }
    )


def _shown_runs(found: list[RunOnDisk]) -> list[RunOnDisk]:
    """The latest episode, the latest of each other seed (a campaign's replicates), and every one still open
    (a replicate queued or running beside it, or one whose supervisor died); newest first."""
    seen: set[int | None] = set()
    shown = []
    for index, run in enumerate(found):
        seed = run.report.settings.seed if run.report else None
        latest_of_seed = seed is not None and seed not in seen
        if index == 0 or latest_of_seed or (run.report and run.report.status in OPEN_STATUSES):
            shown.append(run)
        seen.add(seed)
    return shown


def _live_elsewhere(runs: list[RunOnDisk], shown: list[ArmState]) -> list[LiveProcessState]:
    """Every live process of the arm not already shown as a recorded process of an episode shown."""
    recorded = {(state.episode, process.role, process.pid) for state in shown for process in state.processes
                if process.alive}  # fmt: skip
    live = live_processes([(run.number, run.report) for run in runs if run.report is not None])
    return [
        LiveProcessState(episode=p.episode, role=p.role, pid=p.pid, found_by=p.found_by)
        for p in live
        if (p.episode, p.role, p.pid) not in recorded
    ]


def arm_states(env: Environment, names: list[str]) -> list[ArmState]:
    """Per arm, each seed's latest episode and every open one (queued or started): state, progress and recorded
    processes, and for a Slurm episode its job (Slurm asked once, about the open ones only); and, with the first,
    every other live process of the arm, whichever episode started it."""
    found = {arm: arm_runs(env.output_dir / arm) for arm in selected_arms(env.output_dir, names)}
    shown = {arm: _shown_runs(runs) for arm, runs in found.items()}
    jobs = [
        job
        for runs in shown.values()
        for run in runs
        if run.report is not None and run.report.status in OPEN_STATUSES
        and (job := episode_job(run.run_dir, run.report)) is not None
    ]
    answer = job_states([job.job_id for job in jobs], env.env) if jobs else None
    ran = [run.report.slurm.job_id for runs in shown.values() for run in runs
           if run.report is not None and run.report.slurm is not None and run.report.slurm.node]  # fmt: skip
    accounting = accounting_or_why(ran, env.env)
    states = []
    for arm, runs in shown.items():
        of_arm = [_state_of(arm, run, answer, accounting) for run in runs]
        if of_arm:
            of_arm[0] = of_arm[0].model_copy(update={"live_elsewhere": _live_elsewhere(found[arm], of_arm)})
        states += of_arm
    return states
