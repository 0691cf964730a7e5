"""`mcu-arms run-episode RUN_DIR`: one queued episode, run where it landed (a Slurm node, or this host), by the same
ArmRunner that runs arms locally.

The host that submitted it made the episode directory: plan.json (secrets masked; their values come in the job's
environment, never in a file), scenario.toml, a `queued` report and slurm.json (the job it was submitted as). Here:

- the directory given is resolved once and is the one run (a link is refused); its plan must name it, and it is
  taken over only while its report is `queued` and only by the job it was submitted as, proven by the job's token
  (EPISODE_TOKENS_ENV) against the hash the submitter left in the episode and, on the submitting host, in its
  private record — so a copy, a requeued or a duplicate job never runs it, nor anything it was not given;
- the three command lines are written again from the plan's validated settings (contracts/settings.command_lines)
  and what plan.json says they are must agree: nothing a file holds is executed as stored; and plan.json must be
  the one the submitter wrote (its digest comes in the job's environment, EPISODE_PLANS_ENV, beside the token), so
  nothing written into the episode since (an environment, a working directory, a link) is followed;
- the host checks `run` makes locally (JDK 8, Xvfb, codex, CUDA, local disks) are made on this host;
- the servers get ports picked on this host, on loopback, each bound here and handed to its server
  (isolation/listeners.py), and the CODEX_HOME is built on this host's own disk;
- the report goes `started` -> `finished | failed | interrupted`, written atomically into the shared directory.

The episode stops itself `stop_margin` seconds before its job's time limit and ends `failed (time limit)`; the
campaign's rerun runs it again. `mcu-arms stop` leaves a stop request before it cancels the job, which the
supervisor reads within half a second. A SIGTERM with no stop request is read with what Slurm says of the job then
(sbatch's warning may come up to a minute before it was asked for): still running, or ended for its TimeLimit,
within the warning window — the time limit; requeued — infrastructure, retried as a new episode; cancelled —
interrupted.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from pydantic import ValidationError

from mcu_arms.arms.plan import on_ports, scenario_toml
from mcu_arms.arms.prepare import build_home_for
from mcu_arms.atomic import write_json_atomic, write_text_atomic
from mcu_arms.cluster.slurm import job_accounting, job_detail, this_host, time_left
from mcu_arms.contracts.errors import UserError, user_error
from mcu_arms.contracts.limits import MAX_RECORD_BYTES
from mcu_arms.contracts.reading import read_bounded
from mcu_arms.contracts.run_report import Failure, RunReport, read_report
from mcu_arms.contracts.settings import ArmPlan, command_lines
from mcu_arms.contracts.simulators import simulator_descriptor
from mcu_arms.contracts.slurm import (
    ACCOUNTING_UNAVAILABLE,
    EPISODE_SECRETS_ENV,
    SLURM_TICK_S,
    SLURM_WARNING_EARLY_S,
    SlurmJob,
    slurm_time,
    unmasked,
)
from mcu_arms.contracts.started import EPISODE_PLANS_ENV, EPISODE_TOKENS_ENV, episode_token_hash, plan_digest
from mcu_arms.contracts.states import OPEN_STATUSES, PROCESS_ROLES, SERVER_ROLES, FailureKind, ProcessRole
from mcu_arms.doctor import plan_preflight
from mcu_arms.environment import Environment
from mcu_arms.isolation.display import private_display
from mcu_arms.isolation.listeners import claimed_listeners
from mcu_arms.layout import RunDir, state_dir
from mcu_arms.process.private_record import episode_record, forget_submission
from mcu_arms.supervise.jobs import finalised
from mcu_arms.supervise.live import PlainView
from mcu_arms.supervise.outcomes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from mcu_arms.supervise.runner import DEFAULT_READY_TIMEOUT_S, ArmRunner, RunOptions, supervisor_record

# Slurm tells every process of the job to stop; the children go on their own, so the runner waits only briefly
# before it kills what is left (KillWait, often 30 s, bounds the whole stop) — but longer than a server takes to
# shut down with the client still connected (uvicorn's graceful shutdown, a2a_transport.GRACEFUL_SHUTDOWN_S = 5 s),
# so that a server merely slow to exit is not killed, and alerted on, as one that outlived its grace.
SLURM_STOP_GRACE_S = 8.0
# How long a SIGTERM's reading may wait on `scontrol show job` (the stop itself waits for it; KillWait runs).
TERM_QUERY_TIMEOUT_S = 5.0
# The job's state while Slurm delivers its time-limit warning (a cancel or a requeue shows COMPLETING).
STILL_RUNNING = frozenset({"RUNNING", "SIGNALING"})
# The job log (the episode's stdout) gets a progress line this often; status and the files say the rest.
PROGRESS_LINE_S = 300.0
# Under this host's state dir: each MineStudio episode's private display (its xvfb-run and Xvfb's log).
DISPLAYS_DIR = "displays"
EXIT_CODES = {"finished": EXIT_OK, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}
# What the job's environment carries for run-episode alone: taken out before anything is started.
JOB_CREDENTIALS = frozenset({EPISODE_SECRETS_ENV, EPISODE_TOKENS_ENV, EPISODE_PLANS_ENV})


@dataclass(frozen=True)
class JobHere:
    """The Slurm job this process runs in, as its environment says."""

    job_id: str  # ARRAY_TASK for an array task, else the plain id
    raw_job_id: str
    restarts: int = 0  # how often Slurm had requeued the job before this start

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> JobHere | None:
        raw = env.get("SLURM_JOB_ID")
        if not raw:
            return None
        array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
        restarts = env.get("SLURM_RESTART_COUNT", "0")
        return cls(
            job_id=f"{array}_{task}" if array and task else raw,
            raw_job_id=raw,
            restarts=int(restarts) if restarts.isdigit() else 0,
        )


def _queued_report(run_dir: RunDir) -> RunReport:
    if not run_dir.plan.is_file():
        raise UserError("not an episode directory made by `mcu-arms run` (no plan.json)", path=run_dir.path)
    try:
        report = read_report(run_dir.report)
    except FileNotFoundError:
        raise UserError("the episode has no report: it was not queued", path=run_dir.report) from None
    if report.status != "queued":
        raise UserError(
            f"the episode is {report.status}, not queued: an episode runs once (a rerun makes a new one)",
            path=run_dir.report,
            key="status",
        )
    return report


def _submitted_job(run_dir: RunDir) -> SlurmJob | None:
    if not os.path.lexists(run_dir.slurm_job):
        return None  # not submitted (yet: the job can start before its submitter has written the file)
    try:
        return SlurmJob.model_validate_json(read_bounded(run_dir.slurm_job, MAX_RECORD_BYTES, "Slurm job record"))
    except UserError:
        raise
    except ValueError as error:
        raise UserError(f"cannot read the episode's Slurm job record: {error}", path=run_dir.slurm_job) from None


def _this_job(run_dir: RunDir, queued: RunReport, plan: ArmPlan, here: JobHere | None) -> SlurmJob | None:
    """The job record the report keeps, completed with where it runs; refuses a job the episode was not given to."""
    submitted = _submitted_job(run_dir)
    if submitted is not None and (here is None or here.job_id != submitted.job_id):
        where = f"job {here.job_id}" if here else "outside Slurm"
        raise UserError(
            f"the episode was submitted as Slurm job {submitted.job_id} and runs there, not here ({where}); "
            f"`mcu-arms stop --arm {plan.arm}` cancels it",
            path=run_dir.slurm_job,
        )
    if here is None:
        return None
    if submitted is None:
        options = plan.slurm
        submitted = SlurmJob(
            job_id=here.job_id,
            submitted_at=queued.started_at,
            submitted_from=queued.provenance.host,
            time_limit_s=options.time_s if options else 0,
            stop_margin_s=options.stop_margin_s if options else 0,
        )
    return submitted.model_copy(update={"node": this_host(), "raw_job_id": here.raw_job_id, "restarts": here.restarts})


def _episode_given(path: Path) -> RunDir:
    """The directory given, resolved once: the one episode this process may run. A link is refused: what it points
    at is another episode's, and would be run a second time."""
    if path.is_symlink():
        raise UserError(
            "is a symbolic link: run-episode runs the episode directory it is given, never one reached "
            "through a link; the episode it points at is left as it is",
            path=path,
        )
    return RunDir(Path(os.path.realpath(path)))


def _json_map(env: Mapping[str, str], variable: str) -> dict[str, Any]:
    try:
        found = json.loads(env.get(variable) or "{}")
    except ValueError as error:
        raise UserError(f"{variable} is not JSON: {error}", key=variable) from None
    if not isinstance(found, dict):
        raise UserError(f"{variable} is not a JSON object", key=variable)
    return found


def _private_plan(run_dir: RunDir, env: Environment) -> tuple[ArmPlan, str]:
    """plan.json with the values it masks put back from the job's environment (EPISODE_SECRETS_ENV), validated; it
    must be this episode's plan. With the digest of the bytes read (checked once the job's token is)."""
    try:
        content = run_dir.plan.read_bytes()
        public = json.loads(content.decode("utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the episode's plan: {error}", path=run_dir.plan) from None
    patch = _json_map(env.variables, EPISODE_SECRETS_ENV).get(str(run_dir.path), [])
    if patch:
        public = unmasked(public, [(path, value) for path, value in patch])
    try:
        plan = ArmPlan.model_validate(public)
    except ValidationError as error:
        problem = user_error(error, path=run_dir.plan)
        raise UserError(f"not a plan mcu-arms can run: {problem.message}", path=run_dir.plan, key=problem.key) from None
    if os.path.realpath(plan.episode_dir) != str(run_dir.path):
        raise UserError(
            f"its plan is the plan of another episode ({plan.episode_dir}): a copied or moved episode is never run, "
            "and the episode it names is left as it is",
            path=run_dir.plan,
            key="episode_dir",
        )
    return _rebuilt(plan, run_dir), plan_digest(content)


def _given_to_the_job(env: Environment, variable: str, what: str, run_dir: RunDir) -> str:
    """This episode's entry in one of the job's JSON maps (its token, its plan's digest), or a refusal: run-episode
    runs only what `mcu-arms run` submitted, in the job it submitted it as."""
    value = _json_map(env.variables, variable).get(str(run_dir.path))
    if not isinstance(value, str) or not value:
        raise UserError(
            f"no {what} for this episode ({variable}): run-episode runs only an episode `mcu-arms run` submitted, in "
            "the job it submitted it as",
            path=run_dir.path,
        )
    return value


def _check_plan(run_dir: RunDir, digest: str, env: Environment) -> None:
    """The plan read must be the one the submitter wrote: anything written into the episode since is refused."""
    if digest != _given_to_the_job(env, EPISODE_PLANS_ENV, "plan digest", run_dir):
        raise UserError(
            "plan.json is not the plan `mcu-arms run` submitted (it was written since): nothing in it is followed, "
            "and the episode is left queued",
            path=run_dir.plan,
        )


def _rebuilt(plan: ArmPlan, run_dir: RunDir) -> ArmPlan:
    """The plan with its three command lines (and logs) written again from its validated settings, for this episode
    directory; the ones plan.json holds must be what the settings make (never executed as stored)."""
    roles = sorted(process.role for process in plan.processes)
    if roles != sorted(PROCESS_ROLES):
        raise UserError(
            f"the plan's processes are {roles}", path=run_dir.plan, key="processes", allowed=", ".join(PROCESS_ROLES)
        )
    planned = RunDir(Path(plan.episode_dir))

    def lines(where: RunDir) -> dict[ProcessRole, list[str]]:
        return command_lines(
            plan.settings,
            host=plan.host,
            green_port=plan.green_port,
            purple_port=plan.purple_port,
            episode_dir=where.path,
            purple_dir=where.purple,
            scenario=where.scenario,
            events=where.events,
        )

    expected, here = lines(planned), lines(run_dir)
    processes = []
    for process in plan.processes:
        if process.argv[1:] != expected[process.role][1:]:
            raise UserError(
                f"the {process.role} command line in plan.json is not the one its settings make: run-episode runs "
                f"only command lines it writes itself (expected: ... {shlex.join(expected[process.role][1:])})",
                path=run_dir.plan,
                key=f"processes.{process.role}.argv",
            )
        processes.append(process.model_copy(update={"argv": here[process.role], "log": str(run_dir.log(process.role))}))
    return plan.model_copy(update={"processes": processes, "episode_dir": str(run_dir.path)})


def _check_token(run_dir: RunDir, queued: RunReport, here: JobHere | None, env: Environment) -> None:
    """The caller must hold the token the episode was submitted with (bound to this directory), and on the host that
    submitted it, the private record must name this episode and this job."""
    token = _given_to_the_job(env, EPISODE_TOKENS_ENV, "job token", run_dir)
    presented = episode_token_hash(token, str(run_dir.path))
    try:
        expected = run_dir.job_token.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        expected = None
    if presented != expected:
        raise UserError(
            "the job's token does not match the episode's: it was submitted as another episode (a copy "
            "or a moved directory is never run)",
            path=run_dir.job_token,
        )
    record = episode_record(env.variables, run_dir.path)
    if record is None or record.slurm is None:
        if queued.provenance.host == this_host():
            raise UserError(
                "no submission in this host's private record names this episode: it was not submitted from here",
                path=run_dir.path,
            )
        return  # a node: the token, bound to this directory, is the proof
    where = here.job_id if here else None
    if record.slurm.token_hash != presented or (record.slurm.job_id is not None and record.slurm.job_id != where):
        raise UserError(
            f"the private record names job {record.slurm.job_id} for this episode, not this caller "
            f"({f'job {where}' if where else 'outside Slurm'})",
            path=run_dir.path,
        )


def _fail_before_start(
    run_dir: RunDir,
    queued: RunReport,
    job: SlurmJob | None,
    env: Environment,
    reason: str,
    kind: FailureKind = "infrastructure",
) -> int:
    """The queued report, finalised `failed` with why the episode could not start here (unless the supervisor had
    already taken the episode over: its report stands)."""
    if read_report(run_dir.report).status == "queued":
        finalised(run_dir, queued, "failed", Failure(process=None, kind=kind, reason=reason), env, job)
    env.console.out(f"{queued.arm}: failed before it started: {reason}", highlight=False)
    return EXIT_FAILED


class _Stops:
    """What ends the episode early: SIGTERM/SIGINT/SIGHUP (a stop request from `mcu-arms stop` says who asked; a
    SIGTERM without one is read with Slurm: term_reading), and the Slurm job's time limit, kept by the episode's own
    clock as well: Slurm's limit check lands up to half a minute late, so the episode stops `stop_margin` seconds
    before the limit, measured from the job's start, whichever comes first."""

    def __init__(self, run_dir: RunDir, env: Mapping[str, str]) -> None:
        self.run_dir = run_dir
        self.env = env
        self.job: SlurmJob | None = None
        self.job_started = _job_start()
        self.runner: ArmRunner | None = None
        self.pending: tuple[str, FailureKind] | None = None  # a stop that came before the runner was there
        self._previous: dict[int, Any] = {}
        self._done = threading.Event()

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._previous[signum] = signal.signal(signum, self._received)

    def restore(self) -> None:
        self._done.set()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _stop(self, reason: str, kind: FailureKind) -> None:
        if self.runner is None:
            self.pending = self.pending or (reason, kind)
        else:
            self.runner.request_stop(reason, kind=kind)

    def _received(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        who = self.run_dir.stop_requested_by()
        if who is not None:
            self._stop(f"stopped by {who}", "stopped")
        elif self.job is not None and signum == signal.SIGTERM:  # asking Slurm takes a moment: not in the handler
            if self.runner is not None:
                self.runner.term_received()
            job, elapsed = self.job, time.time() - self.job_started
            threading.Thread(
                target=lambda: self._stop(*term_reading(job, elapsed, self.env)), name="sigterm", daemon=True
            ).start()
        else:
            self._stop(f"interrupted by {name}", "stopped")

    def attach(self, runner: ArmRunner) -> None:
        """From now on a stop goes to `runner` (one that came before goes at once: the episode ends before any
        server starts); and for a Slurm job, its time limit is watched."""
        self.runner = runner
        if self.pending is not None:
            runner.request_stop(self.pending[0], kind=self.pending[1])
        if self.job is not None and self.job.time_limit_s:
            threading.Thread(target=self._keep_time, args=(self.job,), name="time-limit", daemon=True).start()

    def _keep_time(self, job: SlurmJob) -> None:
        stop_at = self.job_started + job.time_limit_s - job.stop_margin_s
        while not self._done.wait(max(stop_at - time.time(), 0)):
            extended = time_left(job.job_id, self.env)  # an administrator may have lengthened the limit meanwhile
            if extended is not None and extended > job.stop_margin_s + SLURM_TICK_S:
                stop_at = time.time() + extended - job.stop_margin_s
                continue
            self._stop(
                f"Slurm job {job.job_id} reached its time limit ({slurm_time(job.time_limit_s)}; stopped "
                f"{job.stop_margin_s} s before it): run the campaign again and the episode starts over",
                "time_limit",
            )
            return


def term_reading(job: SlurmJob, elapsed_s: float, env: Mapping[str, str]) -> tuple[str, FailureKind]:
    """What a SIGTERM with no stop request behind it means, from what Slurm says of the job now and how long it has
    run: (the reason, the failure kind)."""
    detail = job_detail(job.job_id, env, TERM_QUERY_TIMEOUT_S)
    if detail is not None and detail.run_time_s is not None:  # Slurm's own clock, from the job's start
        elapsed_s = detail.run_time_s
    limit_s = (detail.time_limit_s if detail is not None else None) or job.time_limit_s
    ran = slurm_time(max(int(elapsed_s), 1))
    window_s = job.stop_margin_s + SLURM_WARNING_EARLY_S
    in_window = limit_s > 0 and elapsed_s >= limit_s - window_s
    if detail is not None and detail.restarts > job.restarts:
        return (
            f"Slurm requeued job {job.job_id} after {ran} (preempted, its node failing, or `scontrol requeue`): "
            "the episode is run again as a new one",
            "infrastructure",
        )
    if in_window and (detail is None or detail.state in STILL_RUNNING or detail.reason == "TimeLimit"):
        return (
            f"Slurm job {job.job_id} reached its time limit ({slurm_time(limit_s)}): Slurm's warning "
            f"came after {ran}, within {window_s} s of the limit (stop margin {job.stop_margin_s} s + up to "
            f"{SLURM_WARNING_EARLY_S} s early)",
            "time_limit",
        )
    said = "Slurm could not be asked"
    if detail is not None:
        said = f"Slurm says {detail.state}{f' ({detail.reason})' if detail.reason not in ('', 'None') else ''}"
    if detail is not None and detail.state == "PREEMPTED":
        return f"Slurm job {job.job_id} was preempted after {ran} ({said})", "infrastructure"
    return (
        f"Slurm job {job.job_id} was ended by SIGTERM after {ran}, with no stop request from mcu-arms: cancelled "
        f"outside it (scancel), or its node is going down ({said})",
        "stopped",
    )


def _job_start() -> float:
    """When the job started, as near as this process can tell: the process Slurm launched for the step (this one's
    parent, slurmstepd) started then."""
    me = psutil.Process()
    try:
        parent = me.parent()
        return min(me.create_time(), parent.create_time()) if parent is not None else me.create_time()
    except psutil.Error:
        return me.create_time()


def run_episode(path: Path, env: Environment, *, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> int:
    """Run the queued episode at `path` here; returns the exit code (0 finished, 1 failed, 130 interrupted; 0 for a
    job Slurm requeued after its episode ended: an episode runs once, and a retry is a new one)."""
    run_dir = _episode_given(path)
    here = JobHere.from_environment(env.variables)
    if here is not None and here.restarts > 0 and run_dir.report.is_file():
        taken = read_report(run_dir.report)
        if taken.status != "queued":
            return _requeued(run_dir, taken, here, env)
    queued = _queued_report(run_dir)
    signals = _Stops(run_dir, env.variables)
    signals.install()  # before anything slow: a cancel at once still ends in a final report
    try:
        plan, digest = _private_plan(run_dir, env)
        job = _this_job(run_dir, queued, plan, here)
        _check_token(run_dir, queued, here, env)
        _check_plan(run_dir, digest, env)
        signals.job = job
        env.variables = {key: value for key, value in env.variables.items() if key not in JOB_CREDENTIALS}
        env.output_root = run_dir.path.parent.parent
        blocked = plan_preflight(plan, env.variables)
        if blocked:
            return _fail_before_start(
                run_dir, queued, job, env, f"this host ({this_host()}) cannot run it: " + "; ".join(blocked)
            )
        try:
            options = RunOptions(
                ready_timeout_s=ready_timeout_s, stop_grace_s=SLURM_STOP_GRACE_S if job else RunOptions().stop_grace_s
            )
            return _run_here(run_dir, plan, queued, job, env, signals, options)
        except UserError as error:
            return _fail_before_start(run_dir, queued, job, env, error.render())
        except Exception as error:  # a bug before the runner took over: the report still says so, then it is raised
            _fail_before_start(run_dir, queued, job, env, f"mcu-arms: {type(error).__name__}: {error}", "supervisor")
            raise
    finally:
        signals.restore()
        _forget_once_final(run_dir, env)


def _forget_once_final(run_dir: RunDir, env: Environment) -> None:
    """The submission leaves the private record once the episode's report is final (a refused run leaves both)."""
    try:
        if read_report(run_dir.report).status not in OPEN_STATUSES:
            forget_submission(env.variables, run_dir.path)
    except (OSError, UserError):
        pass


def _requeued(run_dir: RunDir, report: RunReport, here: JobHere, env: Environment) -> int:
    """A job Slurm requeued, started again after its episode was taken over: an episode runs once (a retry is a new
    episode). One that ended says so; one whose first start died without its final report (its node lost) is
    finalised `failed` here, infrastructure."""
    if report.status == "started" and report.slurm is not None and report.slurm.job_id == here.job_id:
        reason = (
            f"Slurm requeued job {here.job_id} after the node lost the episode (restart {here.restarts}): "
            "the episode is run again as a new one"
        )
        finalised(run_dir, report, "failed", Failure(process=None, reason=reason), env)
        env.console.out(f"{report.arm}: {reason}", highlight=False)
        return EXIT_FAILED
    env.console.out(
        f"Slurm job {here.job_id} was requeued after its episode ended {report.status}: nothing to run "
        "(an episode runs once; a retry is a new episode)",
        highlight=False,
    )
    return EXIT_OK


def _green_with(plan: ArmPlan, variables: Mapping[str, str]) -> ArmPlan:
    processes = [
        process.model_copy(update={"env": {**process.env, **variables}}) if process.role == "green" else process
        for process in plan.processes
    ]
    return plan.model_copy(update={"processes": processes})


def _run_here(
    run_dir: RunDir,
    plan: ArmPlan,
    queued: RunReport,
    job: SlurmJob | None,
    env: Environment,
    signals: _Stops,
    options: RunOptions,
) -> int:
    wanted: dict[str, int | None] = {
        role: (None if role in plan.ports_auto else plan.process(role).port) for role in SERVER_ROLES
    }
    with ExitStack() as held:
        sockets = held.enter_context(claimed_listeners(plan.host, wanted, env.variables))
        plan = on_ports(plan, {role: (sock.getsockname()[1], sock.fileno()) for role, sock in sockets.items()})
        if simulator_descriptor(plan.settings.simulator).cost.private_display:
            display = held.enter_context(private_display(env.variables, state_dir(env.variables) / DISPLAYS_DIR))
            plan = _green_with(plan, display)
        home = build_home_for(plan, env)
        if home is not None:
            plan = plan.model_copy(update={"warnings": plan.warnings + home.warnings})
        write_json_atomic(run_dir.plan, plan.public())  # the plan as it runs here: this host's ports
        write_text_atomic(run_dir.scenario, scenario_toml(plan))
        view = PlainView(env.console, PROGRESS_LINE_S)
        runner = ArmRunner(plan, env, options, view, supervisor_record(), attempt=queued.attempt)
        if job is not None and job_accounting([job.job_id], env.variables) is None:
            job = job.model_copy(update={"accounting": ACCOUNTING_UNAVAILABLE})
        runner.report.slurm = job
        if job is not None:
            view.line(plan.label, f"Slurm job {job.job_id} on {job.node}, ports {plan.green_port}/{plan.purple_port}")
        outcomes = []
        worker = threading.Thread(target=lambda: outcomes.append(runner.run()), name=f"episode-{plan.label}")
        signals.attach(runner)
        worker.start()
        while worker.is_alive():  # the main thread stays free for the stop signals
            worker.join(timeout=0.5)
    status = outcomes[0].status if outcomes else "failed"
    return EXIT_CODES.get(status, EXIT_FAILED)
