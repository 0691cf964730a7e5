"""`run --executor slurm`: each episode a Slurm job, submitted with submitit and watched through its run directory.

The peer of the local scheduler (runner.supervise_here): the same plans, rerun decisions, retries, live view and exit
codes; the episode itself is run by `mcu-arms run-episode RUN_DIR` on the node (supervise/episode.py), with the same
ArmRunner. Here:

- each episode's directory is made (plan.json, scenario.toml) and its report written `queued`, then the episodes
  that share their Slurm options go out as one job array (`--array=0-N%THROTTLE`), and each gets slurm.json naming
  its job. Values plan.json masks travel in the job's environment, never in a file or on a command line;
- the job gets `--no-requeue` and submitit's `max_num_timeout=0` (nothing reruns an episode behind this project's
  back), and `--signal=TERM@stop_margin` in place of submitit's USR2 warning, whose handler would SIGKILL the
  episode (submitit's process ignores TERM; the episode keeps its time limit by its own clock);
- the watch reads each report (and the step logs and events, for the live view); Slurm is asked only about episodes
  whose report is open, and one whose job ended without a final report is finalised from what Slurm says;
- Ctrl-C/SIGTERM cancels this run's own jobs (by their ids), after a stop request in each episode; `--detach`
  submits and returns, leaving the jobs to run (`status`, `stop` and `compare` read the run directory).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from mcu_arms.atomic import write_json_atomic, write_text_atomic
from mcu_arms.cluster.slurm import job_states, this_host
from mcu_arms.contracts.campaign_run import CampaignTally
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.events import EventRecord
from mcu_arms.contracts.run_report import Failure, RunReport, read_report
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.contracts.slurm import EPISODE_SECRETS_ENV, SlurmJob, SlurmOptions, masked_values, parse_sbatch_line
from mcu_arms.contracts.started import EPISODE_TOKENS_ENV, SubmittedJob, episode_token_hash
from mcu_arms.contracts.states import FINAL_STATUSES, ArmPhase
from mcu_arms.contracts.steps import JsonlTail
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, slurm_jobs_dir
from mcu_arms.private_record import episode_key, forget_submission, record_submitted
from mcu_arms.supervise.jobs import cancel_episode, finalised, report_of_ended_job
from mcu_arms.supervise.live import REFRESH_PER_SECOND, make_view
from mcu_arms.supervise.progress import ArmProgress, StepsTail
from mcu_arms.supervise.runner import ArmOutcome, RunOptions, new_report, outcome_of, retryable

JOB_NAME_PREFIX = "mcu-arms:"
JOB_NAME_MAX = 64
# How often the watch asks Slurm about the episodes whose reports are still open (the reports are read every poll).
QUEUE_POLL_S = 15.0
# After Ctrl-C the watch waits this long for the cancelled episodes to write their final reports.
CANCEL_WAIT_S = 120.0
INSTALL_HINT = "pip install -e '.[slurm]' (submitit)"


def job_command(options: RunOptions) -> list[str]:
    """What each job runs (the episode directory follows): this interpreter's mcu-arms (the same path must exist on
    the nodes), with the run's own readiness timeout."""
    return [sys.executable, "-m", "mcu_arms", "run-episode", "--ready-timeout", f"{options.ready_timeout_s:g}"]


def sbatch_parameters(options: SlurmOptions, count: int, max_parallel: int, name: str) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters for `count` episodes sharing `options`."""
    extra: dict[str, Any] = {"signal": f"TERM@{options.stop_margin_s}", "no-requeue": True, "export": "ALL"}
    if options.mem:
        extra["mem"] = options.mem
    extra.update(parse_sbatch_line(line) for line in options.sbatch)
    parameters: dict[str, Any] = {
        "job_name": name,
        "time": options.time_minutes,
        "array_parallelism": min(options.array_throttle or count, max_parallel, count),
        "stderr_to_stdout": True,
        "additional_parameters": extra,
    }
    for key, value in (("partition", options.partition), ("account", options.account), ("gres", options.gres),
                       ("cpus_per_task", options.cpus), ("setup", options.setup or None)):  # fmt: skip
        if value is not None:
            parameters[key] = value
    return parameters


def episode_secrets(plans: list[ArmPlan]) -> dict[str, str]:
    """The job environment that gives each episode the values its plan.json masks (empty when none masks any)."""
    patches = {}
    for plan in plans:
        masked = masked_values(plan.model_dump(mode="json"), plan.public())
        if masked:
            patches[plan.episode_dir] = masked
    return {EPISODE_SECRETS_ENV: json.dumps(patches)} if patches else {}


def episode_tokens(plans: list[ArmPlan], env: Environment) -> dict[str, str]:
    """A fresh token per episode, for its job's environment: its hash, bound to the episode's directory, goes into
    the episode (for a node) and into this host's private record; `run-episode` runs an episode only for the job
    that holds its token."""
    tokens = {}
    for plan in plans:
        key = episode_key(plan.episode_dir)
        token = uuid.uuid4().hex
        hashed = episode_token_hash(token, key)
        write_text_atomic(RunDir(Path(key)).job_token, hashed + "\n")
        record_submitted(env.env, key, plan.arm, plan.episode, SubmittedJob(token_hash=hashed))
        tokens[key] = token
    return {EPISODE_TOKENS_ENV: json.dumps(tokens)}


@contextmanager
def _process_environment(values: Mapping[str, str]) -> Iterator[None]:
    """submitit runs sbatch in this process's environment, which sbatch hands to the job: for the submission, make
    it exactly the command's Environment (plus the episodes' masked values), then put it back."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass
class Submitted:
    """One episode submitted by this run, as the watch follows it."""

    plan: ArmPlan
    attempt: int
    job: SlurmJob
    progress: ArmProgress
    steps: StepsTail
    events: JsonlTail[EventRecord]
    status: str = "queued"
    seen: tuple[int, int] = (0, 0)  # the report's (mtime_ns, size) when last read
    outcome: ArmOutcome | None = None

    @property
    def run_dir(self) -> RunDir:
        return RunDir(Path(self.plan.episode_dir))


def _job_name(plans: list[ArmPlan]) -> str:
    return (JOB_NAME_PREFIX + "+".join(dict.fromkeys(plan.arm for plan in plans)))[:JOB_NAME_MAX]


def _load_submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise UserError("running on Slurm needs submitit, which is not installed", key="--executor",
                        allowed=INSTALL_HINT) from None  # fmt: skip
    return submitit


def submit(episodes: list[tuple[ArmPlan, int]], env: Environment, options: RunOptions) -> list[Submitted]:
    """Make each episode's directory, write its report `queued`, and submit the episodes as job arrays (one per set
    of Slurm options). A refused submission fails its reports (nothing is lost) and is a UserError."""
    from mcu_arms.arms.prepare import prepare_episode

    submitit = _load_submitit()
    groups: dict[str, list[tuple[ArmPlan, int]]] = {}
    for plan, attempt in episodes:
        assert plan.slurm is not None
        groups.setdefault(plan.slurm.submission_key(), []).append((plan, attempt))
    submitted: list[Submitted] = []
    for group in groups.values():
        prepared = [(prepare_episode(plan), attempt) for plan, attempt in group]
        reports = {}
        for plan, attempt in prepared:
            reports[plan.episode_dir] = new_report(plan, env, status="queued", attempt=attempt)
            RunDir(Path(plan.episode_dir)).write_report(reports[plan.episode_dir])
        plans = [plan for plan, _ in prepared]
        slurm = plans[0].slurm
        assert slurm is not None
        folder = slurm_jobs_dir(env.output_dir)
        try:
            tokens = episode_tokens(plans, env)
            with _process_environment({**env.env, **episode_secrets(plans), **tokens}):
                executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
                executor.update_parameters(
                    **sbatch_parameters(slurm, len(plans), options.max_parallel, _job_name(plans))
                )
                command = submitit.helpers.CommandFunction(job_command(options), cwd=str(env.cwd))
                jobs = executor.map_array(command, [plan.episode_dir for plan in plans])
        except (RuntimeError, OSError, ValueError) as error:  # submitit's FailedJobError is a RuntimeError
            reason = f"sbatch refused the job: {str(error).strip() or type(error).__name__}"
            for plan in plans:
                finalised(RunDir(Path(plan.episode_dir)), reports[plan.episode_dir], "failed",
                          Failure(process=None, reason=reason), env)  # fmt: skip
            raise UserError(reason, key="--executor") from None
        for (plan, attempt), job in zip(prepared, jobs):
            record = SlurmJob(
                job_id=str(job.job_id),
                submitted_at=iso_seconds(env.clock()),
                submitted_from=this_host(),
                time_limit_s=slurm.time_minutes * 60,
                stop_margin_s=slurm.stop_margin_s,
                log=os.path.relpath(job.paths.stdout, plan.episode_dir),
            )
            run_dir = RunDir(Path(plan.episode_dir))
            write_json_atomic(run_dir.slurm_job, record)
            token_hash = run_dir.job_token.read_text(encoding="ascii").strip()
            record_submitted(env.env, plan.episode_dir, plan.arm, plan.episode,
                             SubmittedJob(token_hash=token_hash, job_id=record.job_id))  # fmt: skip
            progress = ArmProgress(plan.label, plan.settings.steps, tasks_total=len(plan.tasks) or None, state="queued")
            submitted.append(Submitted(
                plan=plan, attempt=attempt, job=record, progress=progress, steps=StepsTail(run_dir.green),
                events=JsonlTail(run_dir.events, EventRecord),
            ))  # fmt: skip
    return submitted


def _phase(status: str, progress: ArmProgress) -> ArmPhase:
    if status == "started":
        return "running" if progress.steps_total else "starting"
    return status  # type: ignore[return-value]


class Watch:
    """Follows this run's submitted episodes to their final reports; resubmits an infrastructure failure while it
    has retries left."""

    def __init__(self, env: Environment, options: RunOptions, out: Console) -> None:
        self.env = env
        self.options = options
        self.view = make_view(out, options.progress_interval_s)
        self.episodes: list[Submitted] = []
        self.outcomes: list[ArmOutcome] = []
        self._next_queue_check = 0.0
        self._cancelled_at: float | None = None
        self._began = time.monotonic()

    def add(self, submitted: list[Submitted]) -> None:
        for episode in submitted:
            self.episodes.append(episode)
            self.view.line(episode.plan.label, f"queued as Slurm job {episode.job.job_id} ({episode.plan.episode_dir})")

    @property
    def open(self) -> list[Submitted]:
        return [episode for episode in self.episodes if episode.outcome is None]

    def run(self, signalled: list[str], wake: threading.Event) -> list[ArmOutcome]:
        try:
            while self.open:
                if signalled and self._cancelled_at is None:
                    self.cancel(f"mcu-arms run (pid {os.getpid()}), interrupted by {signalled[0]}")
                failed = next((o for o in self.outcomes if o.status == "failed" and not o.retried), None)
                if self.options.fail_fast and failed is not None and self._cancelled_at is None:
                    self.cancel(f"mcu-arms run (pid {os.getpid()}), --fail-fast: arm '{failed.arm}' failed")
                for episode in self.open:
                    self._read(episode)
                if time.monotonic() >= self._next_queue_check:
                    self._ask_slurm()
                if self._cancelled_at is not None and time.monotonic() - self._cancelled_at > CANCEL_WAIT_S:
                    self._give_up()
                self.view.refresh([episode.progress for episode in self.episodes], summary=self.tally().text())
                wake.wait(1.0 / REFRESH_PER_SECOND)
                wake.clear()
        finally:
            self.view.close([episode.progress for episode in self.episodes])
        return self.outcomes

    def tally(self) -> CampaignTally:
        """This run's episodes by state, for the live view's summary line (k of n done, ETA from the pace so far)."""
        running = [episode for episode in self.open if episode.status == "started"]
        return CampaignTally(
            total=len({(episode.plan.arm, episode.plan.settings.seed) for episode in self.episodes}),
            done=sum(outcome.status == "finished" for outcome in self.outcomes),
            running=len(running),
            queued=sum(episode.status == "queued" for episode in self.open),
            failed=sum(o.status in ("failed", "interrupted") and not o.retried for o in self.outcomes),
            retried=sum(outcome.retried for outcome in self.outcomes),
            ended=len(self.outcomes),
            in_progress=sum(episode.progress.done_share() for episode in running),
            elapsed_s=time.monotonic() - self._began,
        )

    def cancel(self, who: str) -> None:
        """Cancel every open episode's job, each after a stop request (so the episode says it was stopped)."""
        self._cancelled_at = time.monotonic()
        for episode in self.open:
            problem = cancel_episode(episode.run_dir, episode.job, self.env, who)
            said = problem or f"cancelled Slurm job {episode.job.job_id}"
            self.view.line(episode.plan.label, said, alert=bool(problem))

    def _read(self, episode: Submitted) -> None:
        run_dir = episode.run_dir
        try:
            stat = run_dir.report.stat()
            seen = (stat.st_mtime_ns, stat.st_size)
            report = read_report(run_dir.report) if seen != episode.seen else None
        except (OSError, UserError):
            return  # being replaced, or not visible yet: read again on the next poll
        episode.progress.add_steps(episode.steps.poll())
        episode.progress.add_events(episode.events.poll())
        if report is None:
            episode.progress.state = _phase(episode.status, episode.progress)
            return
        episode.seen = seen
        if report.status != episode.status:
            episode.status = report.status
            where = f" on {report.slurm.node}" if report.slurm and report.slurm.node else ""
            self.view.line(episode.plan.label, f"state {report.status}{where}", alert=report.status == "failed")
        episode.progress.state = _phase(report.status, episode.progress)
        for alert in report.alerts[len(episode.progress.alerts):]:
            episode.progress.alerts.append(alert)
            self.view.line(episode.plan.label, alert, alert=True)
        if report.status in FINAL_STATUSES:
            self._done(episode, report)

    def _done(self, episode: Submitted, report: RunReport) -> None:
        outcome = outcome_of(report, episode_dir=episode.plan.episode_dir, report_path=str(episode.run_dir.report),
                             attempt=episode.attempt)  # fmt: skip
        episode.progress.finished = time.monotonic()
        forget_submission(self.env.env, episode.plan.episode_dir)
        if report.failure is not None:
            failed = report.status == "failed"
            self.view.line(episode.plan.label, f"{report.status}: {report.failure.reason}", alert=failed)
        if retryable(outcome) and episode.attempt <= self.options.retries and self._cancelled_at is None:
            outcome = outcome.model_copy(update={"retried": True})
            self.view.line(episode.plan.label, f"retrying: attempt {episode.attempt + 1} of {self.options.retries + 1}")
            episode.outcome = outcome
            self.outcomes.append(outcome)
            self.add(submit([(episode.plan, episode.attempt + 1)], self.env, self.options))
            return
        episode.outcome = outcome
        self.outcomes.append(outcome)

    def _ask_slurm(self) -> None:
        """For the open episodes: did a job end without its episode's final report? Then finalise the report from
        what Slurm says (after a grace for a report still on its way; at once for a job cancelled before it
        started)."""
        self._next_queue_check = time.monotonic() + QUEUE_POLL_S
        waiting = [episode for episode in self.open if episode.status in ("queued", "started")]
        if not waiting:
            return
        answer = job_states([episode.job.job_id for episode in waiting], self.env.env)
        if not answer.answered:
            return
        for episode in waiting:
            try:
                report = read_report(episode.run_dir.report)
            except (OSError, UserError):
                continue
            if report.status in FINAL_STATUSES:
                self._read(episode)
                continue
            ended = report_of_ended_job(report, episode.job, answer.jobs.get(episode.job.job_id))
            if ended is not None:
                self._done(episode, finalised(episode.run_dir, report, *ended, self.env, episode.job))

    def _give_up(self) -> None:
        """Cancelled episodes that did not finalise in time: reported interrupted here, their reports left as the
        episodes (or a later `mcu-arms status`/`stop`) make them."""
        for episode in self.open:
            reason = (
                f"cancelled; no final report within {CANCEL_WAIT_S:g} s (see `mcu-arms status --arm "
                f"{episode.plan.arm}`)"
            )
            self.view.line(episode.plan.label, reason, alert=True)
            episode.outcome = ArmOutcome(arm=episode.plan.arm, seed=episode.plan.settings.seed, status="interrupted",
                                         episode=episode.plan.episode, attempt=episode.attempt,
                                         episode_dir=episode.plan.episode_dir, message=reason,
                                         failure=Failure(process=None, kind="stopped", reason=reason))  # fmt: skip
            self.outcomes.append(episode.outcome)


def supervise_jobs(
    plans: list[ArmPlan],
    env: Environment,
    options: RunOptions,
    out: Console,
    signalled: list[str],
    wake: threading.Event,
    *,
    detach: bool,
) -> list[ArmOutcome]:
    """Submit the episodes; then, unless `detach`, watch them to their final reports."""
    submitted = submit([(plan, 1) for plan in plans], env, options)
    if detach:
        for episode in submitted:
            out.print(f"{episode.plan.label}: queued as Slurm job {episode.job.job_id} ({episode.plan.episode_dir})",
                      highlight=False)  # fmt: skip
        return [
            ArmOutcome(arm=episode.plan.arm, seed=episode.plan.settings.seed, status="queued",
                       episode=episode.plan.episode, episode_dir=episode.plan.episode_dir,
                       message=f"Slurm job {episode.job.job_id}")
            for episode in submitted
        ]  # fmt: skip
    watch = Watch(env, options, out)
    watch.add(submitted)
    return watch.run(signalled, wake)
