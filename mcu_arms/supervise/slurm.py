"""`run --executor slurm`: each episode a Slurm job (a task of a job array), submitted with sbatch and watched through
its run directory.

The peer of the local scheduler (runner.supervise_here): the same plans, rerun decisions, retries, live view and exit
codes; the episode itself is run by `mcu-arms run-episode RUN_DIR` on the node (supervise/episode.py), with the same
ArmRunner. Here:

- each episode's directory is made (plan.json, scenario.toml) and its report written `queued`, then the episodes
  that share their Slurm options go out as one job array (`--array=0-N%THROTTLE`), from a job script of this
  project's own (kept under output/.slurm-jobs/), and each gets slurm.json naming its job, its name and its logs.
  Values plan.json masks travel in the job's environment, never in a file or on a command line;
- a job runs one step, `srun mcu-arms run-episode`, whose stdout and stderr go into the episode directory (or
  --slurm-log-dir); the script's own output (its setup lines) goes beside the script. `--signal=TERM@stop_margin`
  warns every process of the step before the time limit; `--requeue` leaves a preempted or requeued job to Slurm,
  but an episode runs once: the requeued job finds its report final and ends, and the watch retries the episode as a
  new one (an infrastructure failure);
- the watch reads each report (and the step logs and events, for the live view); Slurm is asked only about episodes
  whose report is open, and one whose job ended without a final report is finalised from what Slurm says;
- nothing a user stopped (`mcu-arms stop`, Ctrl-C) is retried, whatever `retries` says;
- Ctrl-C/SIGTERM cancels this run's own jobs (by their ids), after a stop request in each episode; `--detach`
  submits and returns, leaving the jobs to run (`status`, `stop` and `compare` read the run directory).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from mcu_arms.atomic import write_json_atomic, write_text_atomic
from mcu_arms.cluster.slurm import (
    QUERY_TIMEOUT_S,
    JobStatus,
    cancel_job,
    job_accounting,
    job_states,
    missing_commands,
    this_host,
)
from mcu_arms.contracts.campaign_run import CampaignTally
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.events import EventRecord
from mcu_arms.contracts.run_report import Failure, RunReport, read_report
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.contracts.slurm import (
    EPISODE_SECRETS_ENV,
    SlurmJob,
    SlurmOptions,
    is_active,
    masked_values,
    parse_sbatch_line,
)
from mcu_arms.contracts.started import (
    EPISODE_PLANS_ENV,
    EPISODE_TOKENS_ENV,
    SubmittedJob,
    episode_token_hash,
    plan_digest,
)
from mcu_arms.contracts.states import FINAL_STATUSES, ArmPhase
from mcu_arms.contracts.steps import JsonlTail
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, episode_name, slurm_jobs_dir
from mcu_arms.process.private_record import episode_key, forget_submission, record_submitted
from mcu_arms.supervise.jobs import cancel_episode, finalised, report_of_ended_job
from mcu_arms.supervise.live import REFRESH_PER_SECOND, make_view
from mcu_arms.supervise.outcomes import ArmOutcome, outcome_of, retryable
from mcu_arms.supervise.progress import ArmProgress, StepsTail
from mcu_arms.supervise.runner import RunOptions, new_report

JOB_NAME_PREFIX = "mcu-arms:"
JOB_NAME_MAX = 64
# How often the watch asks Slurm about the episodes whose reports are still open (the reports are read every poll).
QUEUE_POLL_S = 15.0
# After Ctrl-C the watch waits this long for the cancelled episodes to write their final reports.
CANCEL_WAIT_S = 120.0
# In the episode directory (or --slurm-log-dir): the episode's stdout and stderr on the node; srun fills in %A_%a.
EPISODE_LOG = "slurm-%A_%a"
# Once every episode has ended, how long the watch waits for sacct's figures of their jobs (where accounting exists).
ACCOUNTING_WAIT_S = 20.0
ACCOUNTING_POLL_S = 2.0
# A job Slurm has put back in the queue (after `scontrol requeue`, a preemption, a node failure).
REQUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})
SBATCH_ANSWER = re.compile(r"^(\d+)(;\S+)?$")


def job_command(options: RunOptions) -> list[str]:
    """What each job runs (the episode directory follows): this interpreter's mcu-arms (the same path must exist on
    the nodes), with the run's own readiness timeout."""
    return [sys.executable, "-m", "mcu_arms", "run-episode", "--ready-timeout", f"{options.ready_timeout_s:g}"]


def sbatch_options(options: SlurmOptions, count: int, max_parallel: int, name: str) -> dict[str, str | bool]:
    """The #SBATCH options of a job array of `count` episodes sharing `options` (--output: set beside the script)."""
    parallel = min(options.array_throttle or count, max_parallel, count)
    chosen: dict[str, str | bool] = {
        "job-name": name,
        "array": f"0-{count - 1}%{parallel}",
        "time": str(options.time_minutes),
        "signal": f"TERM@{options.stop_margin_s}",
        "requeue": True,
        "export": "ALL",
        "open-mode": "append",
    }
    for key, value in (
        ("partition", options.partition),
        ("account", options.account),
        ("qos", options.qos),
        ("constraint", options.constraint),
        ("exclude", options.exclude),
        ("mem", options.mem),
        ("gres", options.gres),
        ("cpus-per-task", options.cpus),
    ):
        if value is not None:
            chosen[key] = str(value)
    chosen.update(parse_sbatch_line(line) for line in options.sbatch)
    return chosen


def _flag(name: str, value: str | bool) -> str:
    return f"--{name}" if value is True else f"--{name}={value}"


def episode_logs(plan: ArmPlan, log_dir: Path | None) -> tuple[Path, Path]:
    """Where the episode's stdout and stderr go, with srun's %A_%a for the job: the episode directory, or one file
    pair per episode in --slurm-log-dir."""
    if log_dir is None:
        base = Path(plan.episode_dir) / EPISODE_LOG
    else:
        base = log_dir / f"{plan.arm}.{episode_name(plan.episode)}.{EPISODE_LOG}"
    return base.with_name(base.name + ".out"), base.with_name(base.name + ".err")


def job_script(
    plans: list[ArmPlan], options: SlurmOptions, run: RunOptions, name: str, script_log: Path, log_dir: Path | None
) -> str:
    """The job array's script: its #SBATCH options, the setup lines, then one srun step running the episode of this
    task, its stdout and stderr in the episode's own files (appended to: a requeued job keeps what the first start
    wrote)."""
    lines = ["#!/bin/bash", f"# written by mcu-arms: {len(plans)} episode(s), one per array task"]
    parameters = {**sbatch_options(options, len(plans), run.max_parallel, name), "output": str(script_log)}
    lines += [f"#SBATCH {_flag(key, value)}" for key, value in parameters.items()]
    lines += ["", *options.setup, ""]
    logs = [episode_logs(plan, log_dir) for plan in plans]
    for array, values in (
        ("episodes", [plan.episode_dir for plan in plans]),
        ("stdouts", [out for out, _ in logs]),
        ("stderrs", [err for _, err in logs]),
    ):
        lines.append(f"{array}=({' '.join(shlex.quote(str(value)) for value in values)})")
    task = "${SLURM_ARRAY_TASK_ID}"
    srun = [
        "srun",
        "--unbuffered",
        "--ntasks=1",
        "--open-mode=append",
        f'--output="${{stdouts[{task}]}}"',
        f'--error="${{stderrs[{task}]}}"',
        *map(shlex.quote, job_command(run)),
        f'"${{episodes[{task}]}}"',
    ]
    lines.append("exec " + " ".join(srun))
    return "\n".join(lines) + "\n"


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
    that holds its token, and only the plan.json it was submitted with (its digest, beside the token)."""
    tokens, digests = {}, {}
    for plan in plans:
        key = episode_key(plan.episode_dir)
        token = uuid.uuid4().hex
        hashed = episode_token_hash(token, key)
        run_dir = RunDir(Path(key))
        write_text_atomic(run_dir.job_token, hashed + "\n")
        record_submitted(env.variables, key, plan.arm, plan.episode, SubmittedJob(token_hash=hashed))
        tokens[key] = token
        digests[key] = plan_digest(run_dir.plan.read_bytes())
    return {EPISODE_TOKENS_ENV: json.dumps(tokens), EPISODE_PLANS_ENV: json.dumps(digests)}


def sbatch(script: Path, env: dict[str, str], cwd: Path) -> str:
    """Submit `script`; returns the job id. sbatch hands its environment (exactly the command's Environment, plus the
    episodes' masked values and their tokens) to the job. A refusal raises RuntimeError carrying sbatch's own words."""
    try:
        done = subprocess.run(
            ["sbatch", "--parsable", str(script)],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=QUERY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"sbatch did not answer within {QUERY_TIMEOUT_S:g} s") from None
    answer = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    match = SBATCH_ANSWER.match(answer)
    if done.returncode != 0 or match is None:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}").splitlines()
        raise RuntimeError("; ".join(line.strip() for line in said if line.strip()))
    return match.group(1)


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


def job_name(plans: list[ArmPlan]) -> str:
    """`mcu-arms:ARM:seedN` for one episode; an array's tasks share one name, `mcu-arms:A+B` (slurm.json, the report
    and `status` say which task is which episode)."""
    if len(plans) == 1:
        return f"{JOB_NAME_PREFIX}{plans[0].arm}:seed{plans[0].settings.seed}"[:JOB_NAME_MAX]
    return (JOB_NAME_PREFIX + "+".join(dict.fromkeys(plan.arm for plan in plans)))[:JOB_NAME_MAX]


def _relative(path: Path, episode_dir: str) -> str:
    return os.path.relpath(path, episode_dir) if path.is_relative_to(episode_dir) else str(path)


def submit(episodes: list[tuple[ArmPlan, int]], env: Environment, options: RunOptions) -> list[Submitted]:
    """Make each episode's directory, write its report `queued`, and submit the episodes as job arrays (one per set
    of Slurm options). A refused submission fails its reports (nothing is lost) and is a UserError quoting sbatch."""
    from mcu_arms.arms.prepare import prepare_episode

    if missing_commands(env.variables, ("sbatch",)):
        raise UserError("sbatch is not on PATH: run from a login node of the cluster", key="--executor")
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
        log_dir = (env.cwd / slurm.log_dir).resolve() if slurm.log_dir else None
        for directory in (folder, log_dir):
            if directory is not None:
                directory.mkdir(parents=True, exist_ok=True)
        name = job_name(plans)
        handle, script_name = tempfile.mkstemp(dir=folder, prefix=f"{time.strftime('%Y%m%dT%H%M%S')}-", suffix=".sh")
        os.close(handle)
        script = Path(script_name)
        script_log = (log_dir or folder) / f"{script.stem}.%A_%a.out"
        script.write_text(job_script(plans, slurm, options, name, script_log, log_dir), encoding="utf-8")
        try:
            tokens = episode_tokens(plans, env)
            array_id = sbatch(script, {**env.variables, **episode_secrets(plans), **tokens}, env.cwd)
        except (RuntimeError, OSError) as error:
            reason = f"sbatch refused the job: {str(error).strip() or type(error).__name__}"
            for plan in plans:
                finalised(
                    RunDir(Path(plan.episode_dir)),
                    reports[plan.episode_dir],
                    "failed",
                    Failure(process=None, reason=reason),
                    env,
                )
            raise UserError(reason, path=script, key="--executor") from None
        for index, (plan, attempt) in enumerate(prepared):
            job_id = f"{array_id}_{index}"
            stdout, stderr = (Path(str(path).replace("%A_%a", job_id)) for path in episode_logs(plan, log_dir))
            record = SlurmJob(
                job_id=job_id,
                name=name,
                submitted_at=iso_seconds(env.clock()),
                submitted_from=this_host(),
                time_limit_s=slurm.time_minutes * 60,
                stop_margin_s=slurm.stop_margin_s,
                log=_relative(Path(str(script_log).replace("%A_%a", job_id)), plan.episode_dir),
                stdout=_relative(stdout, plan.episode_dir),
                stderr=_relative(stderr, plan.episode_dir),
            )
            run_dir = RunDir(Path(plan.episode_dir))
            write_json_atomic(run_dir.slurm_job, record)
            token_hash = run_dir.job_token.read_text(encoding="ascii").strip()
            record_submitted(
                env.variables,
                plan.episode_dir,
                plan.arm,
                plan.episode,
                SubmittedJob(token_hash=token_hash, job_id=record.job_id),
            )
            progress = ArmProgress(plan.label, plan.settings.steps, tasks_total=len(plan.tasks) or None, state="queued")
            submitted.append(
                Submitted(
                    plan=plan,
                    attempt=attempt,
                    job=record,
                    progress=progress,
                    steps=StepsTail(run_dir.green),
                    events=JsonlTail(run_dir.events, EventRecord),
                )
            )
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
        self._accounting: dict[str, RunDir] = {}  # ended episodes' jobs whose figures the report still lacks
        self._retried_jobs: dict[str, str] = {}  # job -> label, of retried episodes: cancelled if Slurm requeues them

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
            self._settle_accounting(time.monotonic() + ACCOUNTING_WAIT_S, wake)
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

    def _settle_accounting(self, deadline: float, wake: threading.Event) -> None:
        """Put sacct's figures into each ended episode's report once its job has ended (the report is written a moment
        before the job ends), polling until `deadline` at most (one look when it has passed); where the cluster keeps
        no accounting, the episode said so itself."""
        while self._accounting:
            found = job_accounting(list(self._accounting), self.env.variables)
            if found is None:
                self._accounting.clear()
                return
            for job_id, figures in found.items():
                if job_id in self._accounting and not is_active(figures.state):
                    run_dir = self._accounting.pop(job_id)
                    report = read_report(run_dir.report)
                    if report.slurm is not None and report.status in FINAL_STATUSES:
                        run_dir.write_report(
                            report.model_copy(update={"slurm": report.slurm.model_copy(update={"accounting": figures})})
                        )
            if time.monotonic() >= deadline:
                return
            wake.wait(ACCOUNTING_POLL_S)

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
        for alert in report.alerts[len(episode.progress.alerts) :]:
            episode.progress.alerts.append(alert)
            self.view.line(episode.plan.label, alert, alert=True)
        if report.status in FINAL_STATUSES:
            self._done(episode, report)

    def _done(self, episode: Submitted, report: RunReport) -> None:
        if report.slurm is not None and report.slurm.node and report.slurm.accounting is None:
            self._accounting[report.slurm.job_id] = episode.run_dir
        outcome = outcome_of(
            report,
            episode_dir=episode.plan.episode_dir,
            report_path=str(episode.run_dir.report),
            attempt=episode.attempt,
        )
        episode.progress.finished = time.monotonic()
        forget_submission(self.env.variables, episode.plan.episode_dir)
        if report.failure is not None:
            failed = report.status == "failed"
            self.view.line(episode.plan.label, f"{report.status}: {report.failure.reason}", alert=failed)
        stopped_by = episode.run_dir.stop_requested_by()  # what a user stopped is final, whatever `retries` says
        if retryable(outcome) and stopped_by is not None:
            self.view.line(episode.plan.label, f"not retried: stopped by {stopped_by}")
        elif retryable(outcome) and episode.attempt <= self.options.retries and self._cancelled_at is None:
            outcome = outcome.model_copy(update={"retried": True})
            self.view.line(episode.plan.label, f"retrying: attempt {episode.attempt + 1} of {self.options.retries + 1}")
            episode.outcome = outcome
            self.outcomes.append(outcome)
            self._retried_jobs[episode.job.job_id] = episode.plan.label
            self.add(submit([(episode.plan, episode.attempt + 1)], self.env, self.options))
            return
        episode.outcome = outcome
        self.outcomes.append(outcome)

    def _drop_requeued(self, jobs: dict[str, JobStatus]) -> None:
        """A job Slurm requeued would start its failed episode again (which ends at once: it runs once); the retry is
        a new episode, so a retried episode's job is cancelled, by its id, once Slurm has put it back in the queue
        (and forgotten once it has ended)."""
        for job_id, label in list(self._retried_jobs.items()):
            status = jobs.get(job_id)
            if status is not None and status.state in REQUEUED_STATES:
                problem = cancel_job(job_id, self.env.variables)
                said = problem or f"cancelled Slurm job {job_id}, requeued by Slurm"
                self.view.line(label, said, alert=bool(problem))
            if status is None or not is_active(status.state) or status.state in REQUEUED_STATES:
                del self._retried_jobs[job_id]

    def _ask_slurm(self) -> None:
        """For the open episodes: did a job end without its episode's final report? Then finalise the report from
        what Slurm says (after a grace for a report still on its way; at once for a job cancelled before it
        started). And sacct's figures for the episodes that ended since."""
        self._next_queue_check = time.monotonic() + QUEUE_POLL_S
        self._settle_accounting(0.0, threading.Event())
        waiting = [episode for episode in self.open if episode.status in ("queued", "started")]
        if not waiting and not self._retried_jobs:
            return
        answer = job_states(
            [episode.job.job_id for episode in waiting] + sorted(self._retried_jobs), self.env.variables
        )
        if not answer.answered:
            return
        self._drop_requeued(answer.jobs)
        for episode in waiting:
            try:
                report = read_report(episode.run_dir.report)
            except (OSError, UserError):
                continue
            if report.status in FINAL_STATUSES:
                self._read(episode)
                continue
            ended = report_of_ended_job(episode.run_dir, report, episode.job, answer.jobs.get(episode.job.job_id))
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
            episode.outcome = ArmOutcome(
                arm=episode.plan.arm,
                seed=episode.plan.settings.seed,
                status="interrupted",
                episode=episode.plan.episode,
                attempt=episode.attempt,
                episode_dir=episode.plan.episode_dir,
                message=reason,
                failure=Failure(process=None, kind="stopped", reason=reason),
            )
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
            out.print(
                f"{episode.plan.label}: queued as Slurm job {episode.job.job_id} ({episode.plan.episode_dir})",
                highlight=False,
            )
        return [
            ArmOutcome(
                arm=episode.plan.arm,
                seed=episode.plan.settings.seed,
                status="queued",
                episode=episode.plan.episode,
                episode_dir=episode.plan.episode_dir,
                message=f"Slurm job {episode.job.job_id}",
            )
            for episode in submitted
        ]
    watch = Watch(env, options, out)
    watch.add(submitted)
    return watch.run(signalled, wake)
