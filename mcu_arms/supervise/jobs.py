"""What this project's Slurm jobs say about their episodes, read from the run directory first and Slurm second.

An episode on Slurm writes its own report; Slurm is asked only about episodes whose report is still open (`queued`
or `started`): whether their job still runs, and, for one that ended without a final report (killed at its time
limit, its node lost, cancelled while queued), what to finalise the report as. Every job id comes from the episode's
own records; nothing is looked up by name or user.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcu_arms.cluster.slurm import JobStatus, cancel_job, ended_without_report, episode_job, job_states
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import Failure, RunReport
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.contracts.slurm import SlurmJob, is_active
from mcu_arms.contracts.states import OPEN_STATUSES, RunStatus
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, RunOnDisk, arm_runs, episode_name

# An ended job's report may still be on its way (written on the node a moment before the job ended, and not yet
# visible here through a network filesystem's caches): it is finalised from here only this long after the end.
RECONCILE_GRACE_S = 30.0


@dataclass(frozen=True)
class OpenJob:
    """An episode whose report is open, and the job it was submitted as."""

    run: RunOnDisk
    job: SlurmJob


def open_jobs(env: Environment, arms: list[str]) -> list[OpenJob]:
    found = []
    for arm in arms:
        for run in arm_runs(env.output_dir / arm):
            if run.report is not None and run.report.status in OPEN_STATUSES:
                job = episode_job(run.run_dir, run.report)
                if job is not None:
                    found.append(OpenJob(run=run, job=job))
    return found


def finalised(
    run_dir: RunDir,
    report: RunReport,
    status: RunStatus,
    failure: Failure,
    env: Environment,
    job: SlurmJob | None = None,
) -> RunReport:
    """An open report, finalised from outside the episode (it never started, or its job ended without a word),
    keeping everything it recorded."""
    final = report.model_copy(
        update={
            "status": status,
            "failure": failure,
            "finished_at": iso_seconds(env.clock()),
            "slurm": report.slurm or job,
        }
    )
    run_dir.write_report(final)
    return final


def report_of_ended_job(
    run_dir: RunDir, report: RunReport, job: SlurmJob, status: JobStatus | None
) -> tuple[RunStatus, Failure] | None:
    """What an open report whose job Slurm no longer runs is to be finalised as (`interrupted` whenever the episode
    holds a stop request: what a user stopped is never taken for a fault); None while the episode's own report may
    still come (the job is active, or ended under RECONCILE_GRACE_S ago after it had started)."""
    if status is not None and is_active(status.state):
        return None
    never_started = report.status == "queued" and (status is None or not status.node)
    since = status.seconds_since_end() if status is not None else None
    if not never_started and since is not None and since < RECONCILE_GRACE_S:
        return None
    return ended_without_report(job, status, run_dir.stop_requested_by())


def reconcile(env: Environment, arms: list[str]) -> list[str]:
    """Finalise the open report of each episode whose job ended without writing it; returns what was done, one
    line per episode. Nothing happens when Slurm cannot be asked."""
    jobs = open_jobs(env, arms)
    if not jobs:
        return []
    answer = job_states([open_job.job.job_id for open_job in jobs], env.variables)
    if not answer.answered:
        return []
    done = []
    for open_job in jobs:
        report = open_job.run.report
        assert report is not None
        ended = report_of_ended_job(open_job.run.run_dir, report, open_job.job, answer.jobs.get(open_job.job.job_id))
        if ended is None:
            continue
        final = finalised(open_job.run.run_dir, report, *ended, env, open_job.job)
        done.append(f"{final.arm} {episode_name(final.episode)}: marked {final.status}: {ended[1].reason}")
    return done


def cancel_episode(run_dir: RunDir, job: SlurmJob, env: Environment, who: str) -> str | None:
    """Leave a stop request in the episode (so it ends saying who stopped it), then cancel its job by id: that one
    job only. Returns what went wrong, or None."""
    run_dir.request_stop(who)
    return cancel_job(job.job_id, env.variables)


def refuse_live_jobs(plans: list[ArmPlan], env: Environment) -> None:
    """No run of an arm while a Slurm job of its still may run (or Slurm cannot say)."""
    arms = list(dict.fromkeys(plan.arm for plan in plans))
    jobs = open_jobs(env, arms)
    if not jobs:
        return
    answer = job_states([open_job.job.job_id for open_job in jobs], env.variables)
    for open_job in jobs:
        status = answer.jobs.get(open_job.job.job_id)
        if answer.answered and (status is None or not is_active(status.state)):
            continue
        arm, episode = open_job.run.report.arm, episode_name(open_job.run.number)  # type: ignore[union-attr]
        state = status.state if status else "in a state Slurm cannot be asked about now"
        raise UserError(
            f"arm '{arm}' has Slurm job {open_job.job.job_id} {state} ({episode}); see `mcu-arms status --arm {arm}`, "
            f"or cancel it with `mcu-arms stop --arm {arm}`",
            path=next(plan.source for plan in plans if plan.arm == arm),
        )
