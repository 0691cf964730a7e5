"""`status`: what each arm's latest episode is doing, from its report, its step logs and its recorded processes,
and every live process of the arm, whichever episode started it.

Reading only: nothing here signals anything. A `started` report whose supervising `mcu-arms run` is gone is shown
as stale. An episode run as a Slurm job is read from its files first; Slurm (squeue, then sacct) is asked only
whether the job of an open report still runs, and what it ended as when it ended without a final report.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from mcu_arms.cluster.slurm import SlurmAnswer, ended_without_report, episode_job, job_states, this_host
from mcu_arms.contracts.slurm import SlurmJob, is_active
from mcu_arms.contracts.states import OPEN_STATUSES, ArmStatusText
from mcu_arms.contracts.steps import STEPS_FILE, JsonlScan, StepProgress
from mcu_arms.environment import Environment
from mcu_arms.layout import RunOnDisk, arm_runs, selected_arms
from mcu_arms.procs import FoundBy, is_alive, live_processes, supervisor_alive

STALE: ArmStatusText = "stale (supervisor gone)"
JOB_ENDED: ArmStatusText = "stale (job ended)"
TIME_LIMIT: ArmStatusText = "failed (time limit)"


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


def steps_progress(green_dir: Path) -> tuple[str | None, int | None, list[str]]:
    """(latest task, steps done in it, milestones 'identity@step') from the green's steps.jsonl files."""
    files = sorted(green_dir.glob(f"*/{STEPS_FILE}"), key=lambda p: p.stat().st_mtime) if green_dir.is_dir() else []
    task, step, milestones = None, None, []
    for path in files:
        for _, _, record in JsonlScan(path, StepProgress):  # streamed: a step log can be hundreds of MB
            milestones += [f"{event.get('identity')}@{event.get('step')}" for event in record.events]
            task, step = path.parent.name, record.step + 1
    return task, step, milestones


def _job_text(job: SlurmJob, answer: SlurmAnswer | None) -> str:
    """The job, and (for an open report, when `answer` is Slurm's) what Slurm says of it."""
    status = answer.jobs.get(job.job_id) if answer else None
    node = (status.node if status else "") or job.node
    where = f" on {node}" if node else ""
    if answer is None:
        return f"{job.job_id}{where}"
    if status is None:
        return f"{job.job_id}{where} ({'unknown to Slurm now' if answer.answered else 'Slurm cannot be asked now'})"
    return f"{job.job_id} {status.state}{where}"


def _state_of(arm: str, run: RunOnDisk, answer: SlurmAnswer | None) -> ArmState:
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
            _, failure = ended_without_report(job, status)
            state = TIME_LIMIT if failure.kind == "time_limit" else JOB_ENDED
    elif job is None and state == "started" and not supervisor_alive(report):
        state = STALE
    if state == "failed" and failure is not None and failure.kind == "time_limit":
        state = TIME_LIMIT
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
    states = []
    for arm, runs in shown.items():
        of_arm = [_state_of(arm, run, answer) for run in runs]
        if of_arm:
            of_arm[0] = of_arm[0].model_copy(update={"live_elsewhere": _live_elsewhere(found[arm], of_arm)})
        states += of_arm
    return states
