"""`status`: what each arm's latest episode is doing, from its report, its step logs and its recorded processes,
and every live process of the arm, whichever episode started it.

Reading only: nothing here signals anything. Which processes are alive comes from the private record of what we
started (private_record.py), never from the report: a report naming a live process we did not start shows it gone.
A `started` report whose supervising `mcu-arms run` is gone is shown as stale. An episode run as a Slurm job is read
from its files first; Slurm (squeue, then sacct) is asked only
whether the job of an open report still runs, and what it ended as when it ended without a final report.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from mcu_arms.arms.campaign import Campaign
from mcu_arms.cluster.slurm import (
    SlurmAnswer,
    accounting_or_why,
    ended_without_report,
    episode_job,
    job_states,
    this_host,
)
from mcu_arms.contracts.agent_report import in_its_words
from mcu_arms.contracts.campaign_run import CampaignRun, CampaignTally
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_RECORD_BYTES
from mcu_arms.contracts.reading import read_json
from mcu_arms.contracts.run_report import RunReport
from mcu_arms.contracts.slurm import SlurmAccounting, SlurmJob, is_active
from mcu_arms.contracts.started import EpisodeRecord
from mcu_arms.contracts.states import FINAL_STATUSES, OPEN_STATUSES, SUPERVISOR_ROLE, ArmStatusText
from mcu_arms.contracts.steps import STEPS_FILE, JsonlScan, StepProgress
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, RunOnDisk, arm_runs, campaign_runs_dir, selected_arms
from mcu_arms.process.private_record import episode_record, recorded_episodes, started_processes
from mcu_arms.process.procs import FoundBy, live_processes, recorded_alive, verified_process

STALE: ArmStatusText = "stale (supervisor gone)"
JOB_ENDED: ArmStatusText = "stale (job ended)"
TIME_LIMIT: ArmStatusText = "failed (time limit)"
CANCELLED: ArmStatusText = "interrupted (cancelled)"


class ProcessState(BaseModel):
    role: str
    pid: int | None
    create_time: float | None
    alive: bool
    # As the report keeps them (contracts/run_report.py ProcessRecord): None while it runs or in an older report.
    last_status: str | None = None
    exit_code: int | None = None
    signal: str | None = None


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
    tags: dict[str, str] = {}  # `run --tag`: why the episode was run
    note: str | None = None
    slurm: SlurmJobState | None = None  # the same, field by field


def steps_progress(green_dir: Path) -> tuple[str | None, int | None, list[str]]:
    """(latest task, steps done in it, milestones 'identity@step') from the green's steps.jsonl files."""
    files = sorted(green_dir.glob(f"*/{STEPS_FILE}"), key=lambda p: p.stat().st_mtime) if green_dir.is_dir() else []
    task, step, milestones = None, None, []
    for path in files:
        try:
            for _, _, record in JsonlScan(path, StepProgress):  # streamed: a step log can be hundreds of MB
                milestones += [f"{event.get('identity')}@{event.get('step')}" for event in record.events]
                task, step = path.parent.name, record.step + 1
        except UserError:
            continue  # past a line over its bound: the progress read so far stands
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


def _alive(record: EpisodeRecord | None, role: str, pid: int | None) -> bool:
    """Is the process the report names under `role` one the private record names, still running and ours?"""
    started = record.processes.get(role) if record is not None else None
    return started is not None and started.pid == pid and recorded_alive(started)


def supervisor_gone(
    env: Mapping[str, str], run_dir: RunDir, report: RunReport, record: EpisodeRecord | None = None
) -> bool:
    """A report that says started, of an episode run here (a Slurm job's state is Slurm's to tell), whose supervisor
    is not the live process the private record names: nothing will ever finish that report. `record`: the private
    record when the caller has read it already."""
    if report.status != "started" or episode_job(run_dir, report) is not None:
        return False
    supervisor = report.processes.get(SUPERVISOR_ROLE)
    record = record or episode_record(env, run_dir.path)
    return not _alive(record, SUPERVISOR_ROLE, supervisor.pid if supervisor else None)


def _agent_words(report: RunReport) -> str:
    return in_its_words(report.agent.top_failure_reasons) if report.agent else ""


def _in_episode(path: str | None, episode_dir: Path) -> str | None:
    return str(episode_dir / path) if path else None


def _job_state(
    job: SlurmJob, answer: SlurmAnswer | None, episode_dir: Path, accounting: dict[str, SlurmAccounting | str]
) -> SlurmJobState:
    status = answer.jobs.get(job.job_id) if answer else None
    said: dict[str, str | None] = {"node": job.node, "name": job.name}
    if status is not None:
        said = {
            "state": status.state,
            "node": status.node or job.node,
            "name": job.name or status.name or None,
            "reason": status.reason if status.reason not in ("", "None") else None,
            "time_left": status.time_left if is_active(status.state) else None,
        }
    return SlurmJobState(
        job_id=job.job_id,
        array_job_id=job.array_job_id,
        array_task=job.array_task,
        stdout=_in_episode(job.stdout, episode_dir),
        stderr=_in_episode(job.stderr, episode_dir),
        log=_in_episode(job.log, episode_dir),
        accounting=accounting.get(job.job_id, job.accounting),
        **said,
    )


def _state_of(
    env: Environment,
    arm: str,
    run: RunOnDisk,
    answer: SlurmAnswer | None,
    accounting: dict[str, SlurmAccounting | str],
) -> ArmState:
    report = run.report
    run_dir = run.run_dir
    task, step, milestones = steps_progress(run_dir.green)
    base = ArmState(
        arm=arm,
        state="no report",
        episode=run.number,
        episode_dir=str(run_dir.path),
        task=task,
        step=step,
        milestones=milestones,
    )
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
    record = episode_record(env.variables, run_dir.path)
    if state == "started" and supervisor_gone(env.variables, run_dir, report, record):
        state = STALE
    if state == "failed" and failure is not None and failure.kind == "time_limit":
        state = TIME_LIMIT
    if state == "interrupted" and job is not None:  # on Slurm, what was stopped is a cancelled job
        state = CANCELLED
    local = job is None or job.node in (None, this_host())
    processes = (
        [
            ProcessState(
                role=role,
                pid=process.pid,
                create_time=process.create_time,
                alive=_alive(record, role, process.pid),
                last_status=process.last_status,
                exit_code=process.exit_code,
                signal=process.signal,
            )
            for role, process in report.processes.items()
        ]
        if local
        else []
    )
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
            "failure": f"{failure.process or 'mcu-arms'}: {failure.reason}{_agent_words(report)}" if failure else None,
            "alerts": len(report.alerts),
            "processes": processes,
            "slurm_job": _job_text(job, answer if report.status in OPEN_STATUSES else None) if job else None,
            "tags": dict(report.tags),
            "note": report.note,
            "slurm": _job_state(job, answer if report.status in OPEN_STATUSES else None, run_dir.path, accounting)
            if job
            else None,
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


def _live_elsewhere(env: Environment, arm: str, shown: list[ArmState]) -> list[LiveProcessState]:
    """Every live process the private record names for the arm, not already shown as a process of an episode
    shown."""
    recorded = {
        (state.episode, process.role, process.pid) for state in shown for process in state.processes if process.alive
    }
    live = live_processes(started_processes(recorded_episodes(env.variables, env.output_dir / arm)))
    return [
        LiveProcessState(episode=p.episode, role=p.role, pid=p.pid, found_by=p.found_by)
        for p in live
        if (p.episode, p.role, p.pid) not in recorded
    ]


def arm_states(env: Environment, names: list[str], *, campaign: str | None = None) -> list[ArmState]:
    """Per arm, each seed's latest episode and every open one (queued or started): state, progress and recorded
    processes, and for a Slurm episode its job (Slurm asked once, about the open ones only); and, with the first,
    every other live process of the arm, whichever episode started it. With `campaign`, its episodes only."""
    found = {
        arm: [
            run
            for run in arm_runs(env.output_dir / arm)
            if campaign is None
            or (run.report is not None and run.report.campaign is not None and run.report.campaign.name == campaign)
        ]
        for arm in selected_arms(env.output_dir, names)
    }
    shown = {arm: _shown_runs(runs) for arm, runs in found.items()}
    jobs = [
        job
        for runs in shown.values()
        for run in runs
        if run.report is not None
        and run.report.status in OPEN_STATUSES
        and (job := episode_job(run.run_dir, run.report)) is not None
    ]
    answer = job_states([job.job_id for job in jobs], env.variables) if jobs else None
    ran = [
        run.report.slurm.job_id
        for runs in shown.values()
        for run in runs
        if run.report is not None and run.report.slurm is not None and run.report.slurm.node
    ]
    accounting = accounting_or_why(ran, env.variables)
    states = []
    for arm, runs in shown.items():
        of_arm = [_state_of(env, arm, run, answer, accounting) for run in runs]
        if of_arm:
            of_arm[0] = of_arm[0].model_copy(update={"live_elsewhere": _live_elsewhere(env, arm, of_arm)})
        states += of_arm
    return states


CellState = Literal["done", "running", "queued", "failed", "interrupted", "stale", "not started"]
CELL_STATE: dict[str, CellState] = {
    "finished": "done",
    "started": "running",
    "queued": "queued",
    "failed": "failed",
    "interrupted": "interrupted",
}


class CampaignCellState(BaseModel):
    """One arm × seed of a campaign: its latest episode run for the campaign, and how many attempts it took."""

    arm: str
    seed: int
    state: CellState
    episode: int | None = None
    attempts: int = 0  # episodes of this cell in the campaign's latest run
    step: int | None = None
    max_steps: int | None = None
    score: float | None = None
    note: str | None = None  # why it failed, or that an earlier run of the campaign finished it


class CampaignState(BaseModel):
    campaign: str
    run: str | None  # the latest `mcu-arms run` of it (None: it never ran)
    started_at: str | None
    supervisor_alive: bool
    cells: list[CampaignCellState]
    tally: CampaignTally


def _latest_record(env: Environment, campaign: str) -> CampaignRun | None:
    directory = campaign_runs_dir(env.output_dir, campaign)
    records = sorted(directory.glob("*.json")) if directory.is_dir() else []
    for path in reversed(records):
        try:
            return CampaignRun.model_validate(read_json(path, MAX_RECORD_BYTES, "campaign run record"))
        except (UserError, ValueError):
            continue
    return None


def _campaign_run(run: RunOnDisk) -> str | None:
    """The campaign run an episode was run by, when its report is read and tagged with a campaign."""
    return run.report.campaign.run if run.report is not None and run.report.campaign is not None else None


def _cell(
    env: Environment, arm: str, seed: int, runs: list[RunOnDisk], record: CampaignRun | None, alive: bool, skipped: bool
) -> CampaignCellState:
    """The cell's state from its episodes run for the campaign (newest first): the latest of the campaign's latest
    run; an earlier run's when this one skipped the cell (or there is no record); else queued while the run lives."""
    this_run = [run for run in runs if record is not None and _campaign_run(run) == record.run]
    earlier = runs if record is None or skipped else []
    if not (this_run or earlier):
        return CampaignCellState(arm=arm, seed=seed, state="queued" if alive else "not started")
    run = (this_run or earlier)[0]
    report = run.report
    assert report is not None  # runs holds the episodes with a readable report only
    state = CELL_STATE[report.status]
    if supervisor_gone(env.variables, run.run_dir, report):
        state = "stale"
    step = steps_progress(run.run_dir.green)[1] if state == "running" else report.steps_run
    note = f"{report.failure.process or 'mcu-arms'}: {report.failure.reason}" if report.failure else None
    if not this_run and record is not None:
        note = f"finished by an earlier run of the campaign (episode {report.episode})"
    return CampaignCellState(
        arm=arm,
        seed=seed,
        state=state,
        episode=report.episode,
        attempts=len(this_run),
        step=step,
        max_steps=report.settings.steps,
        score=report.score,
        note=note,
    )


def campaign_state(env: Environment, campaign: Campaign) -> CampaignState:
    """Per arm × seed of the campaign: done, running, queued, failed or retried, read from the episodes run for it
    only; k of n done and an ETA from the pace of its latest run so far."""
    record = _latest_record(env, campaign.name)
    # Only shown (queued, or not started): a pid read from output/ is never signalled, only looked at.
    alive = record is not None and verified_process(record.supervisor_pid, record.supervisor_create_time) is not None
    if record is not None:
        cells = [(cell.arm, cell.seed, cell.skipped) for cell in record.cells]
    else:
        seeds = {arm.spec.name: campaign.seeds or arm.spec.replicate_seeds() for arm in campaign.arms()}
        cells = [(name, seed, False) for name, arm_seeds in seeds.items() for seed in arm_seeds]
    runs: dict[str, list[RunOnDisk]] = {
        name: [
            run
            for run in arm_runs(env.output_dir / name)
            if run.report is not None and run.report.campaign is not None and run.report.campaign.name == campaign.name
        ]
        for name in dict.fromkeys(arm for arm, _, _ in cells)
    }
    states = [
        _cell(
            env,
            arm,
            seed,
            [run for run in runs[arm] if run.report is not None and run.report.settings.seed == seed],
            record,
            alive,
            skipped,
        )
        for arm, seed, skipped in cells
    ]
    elapsed = 0.0
    if record is not None:
        elapsed = max((env.clock() - datetime.fromisoformat(record.started_at)).total_seconds(), 0.0)
    this_run = [run for arm in runs.values() for run in arm if record is not None and _campaign_run(run) == record.run]
    tally = CampaignTally(
        total=len(states),
        done=sum(state.state == "done" for state in states),
        running=sum(state.state == "running" for state in states),
        queued=sum(state.state == "queued" for state in states),
        failed=sum(state.state == "failed" for state in states),
        interrupted=sum(state.state in ("interrupted", "stale") for state in states),
        live=alive,
        retried=sum(max(state.attempts - 1, 0) for state in states),
        ended=sum(run.report is not None and run.report.status in FINAL_STATUSES for run in this_run),
        in_progress=sum(
            min(state.step / state.max_steps, 1.0)
            for state in states
            if state.state == "running" and state.step and state.max_steps
        ),
        elapsed_s=elapsed,
    )
    return CampaignState(
        campaign=campaign.name,
        run=record.run if record else None,
        started_at=record.started_at if record else None,
        supervisor_alive=alive,
        cells=states,
        tally=tally,
    )
