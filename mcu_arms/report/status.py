"""`status`: what each arm's latest episode is doing, from its report, its step logs and its recorded processes,
and every live process of the arm, whichever episode started it.

Reading only: nothing here signals anything. A `started` report whose supervising `mcu-arms run` is gone is shown
as stale.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from mcu_arms.contracts.states import ArmStatusText
from mcu_arms.contracts.steps import STEPS_FILE, StepProgress, read_jsonl
from mcu_arms.environment import Environment
from mcu_arms.layout import RunOnDisk, arm_runs, selected_arms
from mcu_arms.procs import FoundBy, is_alive, live_processes, supervisor_alive

STALE: ArmStatusText = "stale (supervisor gone)"


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
    processes: list[ProcessState] = []
    live_elsewhere: list[LiveProcessState] = []  # live processes beyond the latest episode's recorded ones


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


def _state_of(arm: str, run: RunOnDisk) -> ArmState:
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
    if state == "started" and not supervisor_alive(report):
        state = STALE
    processes = [
        ProcessState(
            role=role,
            pid=record.pid,
            create_time=record.create_time,
            alive=is_alive(record.pid, record.create_time),
        )
        for role, record in report.processes.items()
    ]
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
            "failure": f"{report.failure.process or 'mcu-arms'}: {report.failure.reason}" if report.failure else None,
            "alerts": len(report.alerts),
            "processes": processes,
        }
    )


def _shown_runs(found: list[RunOnDisk]) -> list[RunOnDisk]:
    """The latest episode, the latest of each other seed (a campaign's replicates), and every one still marked
    started (a replicate running beside it, or one whose supervisor died); newest first."""
    seen: set[int | None] = set()
    shown = []
    for index, run in enumerate(found):
        seed = run.report.settings.seed if run.report else None
        latest_of_seed = seed is not None and seed not in seen
        if index == 0 or latest_of_seed or (run.report and run.report.status == "started"):
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
    """Per arm, each seed's latest episode and every started one: state, progress and recorded processes; and,
    with the first, every other live process of the arm, whichever episode started it."""
    states = []
    for arm in selected_arms(env.output_dir, names):
        found = arm_runs(env.output_dir / arm)
        of_arm = [_state_of(arm, run) for run in _shown_runs(found)]
        if of_arm:
            of_arm[0] = of_arm[0].model_copy(update={"live_elsewhere": _live_elsewhere(found, of_arm)})
        states += of_arm
    return states
