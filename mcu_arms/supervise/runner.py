"""Running arms side by side: each arm's lifecycle on its own thread, the view and the signals on the main one.

One arm: report `started` -> green and purple in their own process groups, each serving on a socket bound here and
handed over -> both ready (the card answers on that socket) -> client -> the green's evaluation.json -> report
`finished`. The arm's thread alone reads what its children write (typed step records, typed events, the purple's
typed report) and updates its progress; nothing is learned from a log line. Any child that dies early fails the arm at
once, naming it, with its exit code and the last lines of its log. Ctrl-C/SIGTERM, `mcu-arms stop` or --fail-fast
stop this invocation's own children only and finalise the report as `interrupted`.

An arm is held by one `mcu-arms run` from preparation to its report (arms/prepare.held_arms), and refused while any
process of any of its earlier episodes still runs. Its servers answer only to its own processes: each run makes
fresh tokens (contracts/access.py), given to each child in its environment and masked in everything it logs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from pathlib import Path

import psutil
from pydantic import BaseModel, Field, ValidationError
from rich.console import Console

from mcu_arms.atomic import open_log, write_json_exclusive
from mcu_arms.contracts.access import ArmAccess
from mcu_arms.contracts.agent_card import card_identity, card_problem
from mcu_arms.contracts.agent_report import AGENT_REPORT_SUFFIX, AgentSummary, agent_summary
from mcu_arms.contracts.campaign_run import CampaignTally
from mcu_arms.contracts.catalog import A2A_AGENT
from mcu_arms.contracts.errors import UserError, validation_summary
from mcu_arms.contracts.evaluation import EvaluationResult
from mcu_arms.contracts.events import EventRecord
from mcu_arms.contracts.redaction import mask_known, secret_values
from mcu_arms.contracts.run_report import (
    Failure,
    MilestoneRecord,
    ProcessRecord,
    RunReport,
    summarise_evaluation,
    threshold_breaches,
)
from mcu_arms.contracts.settings import NOT_OWNED, ArmPlan, ProcessPlan
from mcu_arms.contracts.started import StartedProcess, token_hash
from mcu_arms.contracts.states import (
    SERVER_ROLES,
    STOP_ORDER,
    SUPERVISOR_ROLE,
    ArmOutcomeStatus,
    ArmPhase,
    FailureKind,
    ProcessRole,
    RunStatus,
)
from mcu_arms.contracts.steps import JsonlTail
from mcu_arms.contracts.text import MAX_LOG_LINE_CHARS, shown_text
from mcu_arms.contracts.timestamps import iso_seconds, log_stamp
from mcu_arms.contracts.wire import AGENT_CARD_PATH
from mcu_arms.environment import Environment
from mcu_arms.isolation.listeners import claim_listener
from mcu_arms.layout import (
    SPACE_RESERVE_BYTES,
    RunDir,
    lost_reports_dir,
    repoint_links,
    supervisor_log,
)
from mcu_arms.process.containment import containment_support
from mcu_arms.process.private_record import forget_started, record_started, records_dir
from mcu_arms.process.procs import DEFAULT_STOP_GRACE_S, PRIVATE_UMASK, AdoptedOrphans, Child, StopOutcome
from mcu_arms.supervise.alerts import AlertMonitor
from mcu_arms.supervise.evidence import ChildWatch, culprit
from mcu_arms.supervise.live import REFRESH_PER_SECOND, View, make_view
from mcu_arms.supervise.outcomes import ArmOutcome, outcome_of, retryable
from mcu_arms.supervise.progress import ArmProgress, StepsTail
from mcu_arms.supervise.provenance import collect_provenance
from mcu_arms.supervise.readiness import card_answers, fetch_card, listens_in_tree

POLL_S = 0.5
# Readiness is checked at once, then every READY_POLL_FAST_S for the first READY_FAST_FOR_S, then every READY_POLL_S
# (a server loading a model). The socket listens from before the server starts, so a check waits in its backlog
# (up to card_answers' timeout) and is answered as soon as the server accepts.
READY_POLL_FAST_S = 0.01
READY_FAST_FOR_S = 3.0
READY_POLL_S = 0.2
ADOPTED_POLL_S = 5.0
# In a Slurm job, Slurm's SIGTERM (scancel, the time limit) reaches the children and this supervisor alike, and a
# child's end may be seen first: a failure there waits TERM_ARRIVES_S for this supervisor's own TERM, then up to
# TERM_READ_S for its reading (supervise/episode.term_reading asks Slurm), so that the episode ends as the signal
# says, every time.
TERM_ARRIVES_S = 1.0
TERM_READ_S = 10.0
DEFAULT_READY_TIMEOUT_S = 120.0


class RunOptions(BaseModel):
    fail_fast: bool = False
    max_parallel: int = Field(default=1_000, ge=1)  # episodes at once; the CLI sets it from the host
    retries: int = Field(default=0, ge=0)  # extra attempts for an episode that failed for infrastructure reasons
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    rerun: bool = False
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    progress_interval_s: float = 30.0


class _Stopped(Exception):
    """The arm was asked to stop (signal, `mcu-arms stop`, --fail-fast)."""


class _ArmFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def describe_exit(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _shown_source(source: str, cwd: Path) -> str:
    """The arm file as the report keeps it: relative to the project when inside it."""
    try:
        return str(Path(source).resolve().relative_to(cwd.resolve()))
    except ValueError:
        return source


def new_report(plan: ArmPlan, env: Environment, *, status: RunStatus, attempt: int) -> RunReport:
    """An episode's report before anything of it ran: what was planned, where its logs and outputs go. Written
    `started` by the supervisor that runs it, or `queued` by the host that submits it as a Slurm job."""
    run_dir = RunDir(Path(plan.episode_dir))
    return RunReport(
        status=status,
        arm=plan.arm,
        episode=plan.episode,
        attempt=attempt,
        source=_shown_source(plan.source, env.cwd),
        fingerprint=plan.fingerprint,
        settings=plan.settings.redacted(),
        overrides=plan.overrides,
        compaction_limit=plan.compaction.limit,
        thresholds=plan.thresholds,
        warnings=plan.warnings,
        plan_notes=plan.notes,
        tags=plan.tags,
        note=plan.note,
        sequential=plan.sequential,
        provenance=collect_provenance(env.cwd),
        started_at=iso_seconds(env.clock()),
        logs={process.role: run_dir.relative(process.log) for process in plan.processes},
        output_root=str(env.output_dir),
        campaign=plan.campaign,
        output_dirs={
            role: run_dir.relative(path) for role, path in (("green", run_dir.green), ("purple", run_dir.purple))
        },
    )


def supervisor_record() -> ProcessRecord:
    me = psutil.Process()
    return ProcessRecord(role=SUPERVISOR_ROLE, pid=me.pid, create_time=me.create_time(), argv=me.cmdline(), log="")


class ArmRunner:
    """One arm's lifecycle. `run()` on its own thread; `request_stop()` from any thread."""

    def __init__(
        self,
        plan: ArmPlan,
        env: Environment,
        options: RunOptions,
        view: View,
        supervisor: ProcessRecord,
        *,
        attempt: int = 1,
    ) -> None:
        self.plan = plan
        self.attempt = attempt
        self.label = plan.label
        self.env = env
        self.options = options
        self.view = view
        self.run_dir = RunDir(Path(plan.episode_dir))
        self.progress = ArmProgress(
            self.label, plan.settings.steps, tasks_total=len(plan.tasks) or None, grid=grid_cell(plan)
        )
        self.alerts = AlertMonitor(self.progress, self.run_dir.purple, self._announce)
        self.steps_tail = StepsTail(self.run_dir.green)
        self.events_tail = JsonlTail(self.run_dir.events, EventRecord)
        self.children: dict[ProcessRole, Child] = {}
        self.watch = ChildWatch()
        self.access = ArmAccess.generate()
        every_env = {name: value for process in plan.processes for name, value in process.env.items()}
        self.secrets = secret_values({**plan.settings.env, **every_env}, self.access.values())
        self.evaluation: EvaluationResult | None = None
        self._alerts_saved = 0  # alerts already in result.json
        self._stop = threading.Event()
        self._term = threading.Event()  # a SIGTERM reached this supervisor: its reading follows (request_stop)
        self._wake = threading.Event()  # a stop request or the client's exit: the arm's thread looks at once
        self._stop_reason = ""
        self._stop_kind: FailureKind = "stopped"
        self._stopped_by: str | None = None
        self._log_path = supervisor_log(self.run_dir)
        self._log_broken = False
        self._record_unwritable = False  # the private record could not be written: the arm failed saying so
        self.report_path: Path | None = self.run_dir.report
        self._started = time.monotonic()
        self.report = new_report(plan, env, status="started", attempt=attempt)
        self.report.logs[SUPERVISOR_ROLE] = self.run_dir.relative(self._log_path)
        self.report.processes[SUPERVISOR_ROLE] = supervisor.model_copy(
            update={"log": self.report.logs[SUPERVISOR_ROLE]}
        )

    # events -----------------------------------------------------------------------------------------------
    def _event(self, text: str, *, alert: bool = False) -> None:
        """Shown at once (neutralised, secrets masked), and kept in the supervisor's log while that can still be
        written."""
        text = mask_known(shown_text(text, MAX_LOG_LINE_CHARS, one_line=False), self.secrets)
        self.view.line(self.label, text, alert=alert)
        if self._log_broken:
            return
        try:
            with open_log(self._log_path) as log:
                log.write(f"{log_stamp()} {'ALERT ' if alert else ''}{text}\n")
        except OSError as error:
            self._log_broken = True
            self.view.line(self.label, f"cannot write {self._log_path}: {error.strerror or error}", alert=True)

    def _announce(self, text: str) -> None:
        """The alert monitor's sink (it already keeps the alert): print and log it at once; the arm's own thread
        saves it into the report on its next poll."""
        self._event(text, alert=True)

    def _state(self, state: ArmPhase) -> None:
        self.progress.state = state
        self._event(f"state {state}")

    def _save(self) -> None:
        """Write result.json; only the arm's own thread calls this, so the report never changes while it is dumped.

        A report that cannot be written (disk full, output/ gone, read-only) fails the arm now: a run whose record
        is lost must not go on as if it were kept.
        """
        self.report.alerts = list(self.progress.alerts)
        self._alerts_saved = len(self.report.alerts)
        try:
            self.run_dir.write_report(self.report)
        except OSError as error:
            raise _ArmFailed(
                Failure(process=None, reason=f"cannot write {self.run_dir.report}: {error.strerror or error}")
            ) from None

    def _save_new_alerts(self) -> None:
        if self._alerts_saved != len(self.progress.alerts):
            self._save()

    def request_stop(self, reason: str, *, kind: FailureKind = "stopped", stopped_by: str | None = None) -> None:
        """Stop the arm; it ends `interrupted` (naming `stopped_by`, or whoever left a stop request), or `failed`
        when the stop is its Slurm job's time limit or the job was taken away."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop_kind = kind
            self._stopped_by = stopped_by
            self._stop.set()
            self._wake.set()

    def term_received(self) -> None:
        """A SIGTERM reached the supervisor; the stop it means follows once it is read (request_stop)."""
        self._term.set()

    def _outside_term(self) -> bool:
        """In a Slurm job, whether a failure came with a SIGTERM from outside: a stop, read from who signalled whom."""
        if self.report.slurm is not None and not self._stop.is_set() and self._term.wait(TERM_ARRIVES_S):
            self._stop.wait(TERM_READ_S)
        return self._stop.is_set()

    def _check_stop(self) -> None:
        who = None if self._stop.is_set() else self.run_dir.stop_requested_by()
        if who is not None:
            self.request_stop(f"stopped by {who}")
        if self._stop.is_set():
            raise _Stopped(self._stop_reason)

    # lifecycle --------------------------------------------------------------------------------------------
    def run(self) -> ArmOutcome:
        status: ArmOutcomeStatus = "failed"
        failure: Failure | None = None
        try:
            self._save()
            self._record_started(self.report.processes[SUPERVISOR_ROLE], None)
            self._reserve_space()
            for warning in self.plan.warnings:
                self._event(f"warning: {warning}", alert=True)
            for note in self.plan.notes:
                self._event(f"note: {note}")
            repoint_links(self.plan.links, self._record_alert)
            self._start_servers()
            self._wait_ready()
            self._run_client()
            status = "finished"
        except _Stopped as stopped:
            status, failure = self._stopped(str(stopped))
        except _ArmFailed as failed:
            status, failure = "failed", self._blamed(failed.failure)
            if self._outside_term():  # a child that died of the stop (Slurm signals every process of the job)
                status, failure = self._stopped(f"{self._stop_reason} ({failed.failure.reason})")
        except Exception as error:  # a supervisor bug still ends the arm cleanly, reported, children stopped
            status = "failed"
            failure = Failure(process=None, kind="supervisor", reason=f"mcu-arms: {type(error).__name__}: {error}")
        self._finalise(status, failure)
        return self._outcome()

    def _blamed(self, failure: Failure) -> Failure:
        """The failure as the evidence tells it (evidence.py): a full disk or a stopped server named first, what the
        process that noticed said after it."""
        found = culprit(self.children, self.watch, self.run_dir.path, self.env.cwd)
        if found is None or found[1] in failure.reason:
            return failure
        process, reason = found
        code = self.children[process].poll() if process in self.children else None
        return failure.model_copy(
            update={
                "process": process,
                "kind": _kind_of(process) if process is not None else "infrastructure",
                "reason": f"{reason}; then {failure.reason}",
                "exit_code": code if process is not None else failure.exit_code,
            }
        )

    def _stopped(self, reason: str) -> tuple[ArmOutcomeStatus, Failure]:
        """`interrupted` when someone stopped it (the report names who, when a stop request did), else `failed`: its
        Slurm job's time limit, or the job taken away (requeued, preempted: infrastructure, retried)."""
        if self._stop_kind != "stopped":
            return "failed", Failure(process=None, kind=self._stop_kind, reason=reason)
        return "interrupted", Failure(
            process=None, kind="stopped", reason=reason, stopped_by=self.run_dir.stop_requested_by() or self._stopped_by
        )

    def _start(self, role: ProcessRole, plan: ProcessPlan | None = None) -> Child:
        child = Child(
            plan or self.plan.process(role),
            self.env.variables,
            secret_env=self.access.environment_for(role),
            secrets=self.secrets,
            contain=True,
            umask=PRIVATE_UMASK if role == "purple" else None,
        )
        try:
            child.start()
        except OSError as error:
            raise _ArmFailed(Failure(process=role, reason=f"{role} could not be started: {error}")) from None
        self.children[role] = child
        self.report.processes[role] = ProcessRecord(
            role=role,
            pid=child.pid,
            create_time=child.create_time,
            argv=child.plan.argv,
            log=self.run_dir.relative(child.plan.log),
            owner_token=child.token,
            cgroup=str(child.cgroup.path) if child.cgroup is not None else None,
        )  # in the report first: a private record that cannot be written (a full state dir) still stops it by it
        self._record_started(ProcessRecord(role=role, pid=child.pid, create_time=child.create_time, log=""), child)
        self._save()
        self._event(f"{role} started, pid {child.pid}")
        return child

    def _record_started(self, process: ProcessRecord, child: Child | None) -> None:
        """Keep in the private record what was just started (what `stop` and `status` may act on): the supervisor by
        its pid and create time, a child also by its owner token's hash and its marked cgroup."""
        if process.pid is None or process.create_time is None:
            return  # it is gone already: nothing to find later
        started = StartedProcess(
            role=process.role,
            pid=process.pid,
            create_time=process.create_time,
            token_hash=token_hash(child.token) if child else None,
            cgroup=str(child.cgroup.path) if child and child.cgroup else None,
            cgroup_marker=child.cgroup.marker if child and child.cgroup else None,
        )
        try:
            record_started(self.env.variables, self.run_dir.path, self.plan.arm, self.plan.episode, started)
        except (OSError, UserError) as error:
            self._record_unwritable = True
            reason = f"cannot keep the private record of what runs: {self._record_problem(error)}"
            raise _ArmFailed(Failure(process=None, reason=reason)) from None

    def _record_problem(self, error: OSError | UserError) -> str:
        """What went wrong with the private record, naming where it is kept (a full or read-only state dir)."""
        if isinstance(error, UserError):
            return error.render()
        return f"{records_dir(self.env.variables)}: {error.strerror or error}"

    def _forget_stopped(self, survivors: set[str]) -> None:
        """Drop from the private record what this run started and stopped; survivors stay findable by `stop`. When
        the record could not be written during the run, the arm's failure has said so: a failure here is not said
        twice."""
        roles = [role for role in [SUPERVISOR_ROLE, *self.children] if role not in survivors]
        try:
            forget_started(self.env.variables, self.run_dir.path, roles)
        except (OSError, UserError) as error:
            if not self._record_unwritable:
                self._record_alert(f"cannot update the private record of what runs: {self._record_problem(error)}")

    def _start_servers(self) -> None:
        self._state("starting")
        for role in SERVER_ROLES:
            self._check_stop()
            if role == "purple" and self.plan.settings.purple_url is not None:
                self._event(f"purple at {self.plan.settings.purple_url}: {NOT_OWNED}")
                continue
            self._start_server(role)

    def _start_server(self, role: ProcessRole) -> None:
        """The server started on a socket bound here and handed over (the port check and the bind are one act): it
        alone holds the socket then, so whatever answers on the port is this server. A socket the episode's job
        bound on its node (supervise/episode.py) is handed over as it is; another program's purple binds its own
        (its readiness then checks who listens)."""
        plan = self.plan.process(role)
        if plan.listen_fd is not None or self._foreign(role):
            self._start(role)
            return
        try:
            sock = claim_listener(self.plan.host, plan.port, reserved=set())
        except UserError as error:
            raise _ArmFailed(Failure(process=None, reason=f"{role}: {error.render()}")) from None
        with sock:
            self._start(role, plan.model_copy(update={"listen_fd": sock.fileno()}))

    def _died(self, child: Child, when: str) -> _ArmFailed:
        code = child.poll()
        return _ArmFailed(
            Failure(
                process=child.role,
                kind=_kind_of(child.role),
                reason=f"{child.role} {describe_exit(code)} {when}",
                exit_code=code,
                log_tail=child.log_tail(),
            )
        )

    def _wait_ready(self) -> None:
        """Both servers ready: each of ours when its card answers on the socket handed to it; another program's
        purple when its card answers, in either A2A shape, and (started by us) the port's listener is that child or
        its descendant."""
        began = time.monotonic()
        pending: dict[ProcessRole, Child | None] = {role: self.children.get(role) for role in SERVER_ROLES}
        deadlines = {role: began + self._ready_timeout(role) for role in pending}
        waiting_on: dict[str, str] = {}
        while pending:
            self._check_stop()
            for role, child in list(pending.items()):
                if child is not None and child.poll() is not None:
                    raise self._died(child, "during start-up")
                verdict: bool | str | None
                if child is None:
                    verdict = self._served_card(role)
                elif self._foreign(role):
                    verdict = self._readiness(child)
                    if verdict is True:
                        verdict = self._served_card(role)
                else:
                    verdict = True if card_answers(child.plan.url or "") else None
                if verdict is True:
                    del pending[role]
                    self._event(f"{role} ready on {self.plan.process(role).url}")
                elif verdict:
                    waiting_on[role] = verdict
            if not pending:
                break
            late = [role for role in pending if time.monotonic() > deadlines[role]]
            if late:
                role, child = late[0], pending[late[0]]
                url = self.plan.process(role).url
                detail = waiting_on.get(role, f"its agent card at {url} never answered")
                raise _ArmFailed(
                    Failure(
                        process=role,
                        kind="infrastructure" if self._foreign(role) else _kind_of(role),
                        reason=f"{role} not ready within {self._ready_timeout(role):g} s: {detail}",
                        log_tail=child.log_tail(wait_s=0) if child is not None else [],
                    )
                )
            self._stop.wait(READY_POLL_FAST_S if time.monotonic() - began < READY_FAST_FOR_S else READY_POLL_S)
        self.report.ready_at = iso_seconds(self.env.clock())
        self._state("ready")
        self._save()

    def _foreign(self, role: ProcessRole) -> bool:
        """Is this role another program's A2A purple (agent "a2a")?"""
        return role == "purple" and self.plan.settings.agent == A2A_AGENT

    def _ready_timeout(self, role: ProcessRole) -> float:
        """The arm's [purple] ready_timeout for another program's purple, the run's for our own servers."""
        own = self.plan.settings.purple_ready_timeout if self._foreign(role) else None
        return own if own is not None else self.options.ready_timeout_s

    def _served_card(self, role: ProcessRole) -> bool | str | None:
        """Another program's purple serves an A2A card (0.3 or 1.x): its identity is recorded in the report; a card
        of the wrong shape is named (and waited on: a server may serve a placeholder while it starts)."""
        url = self.plan.process(role).url or ""
        card = fetch_card(url)
        if card is None:
            return None
        problem = card_problem(card)
        if problem is not None:
            return f"{problem} (at {url}{AGENT_CARD_PATH})"
        self.report.purple_card = card_identity(card)
        self._event(f"{role} card: {card['name']} {card['version']} (card {self.report.purple_card.digest})")
        return True

    def _readiness(self, child: Child) -> bool | str | None:
        """True when ready; a string saying what is wrong; None while the card does not answer yet."""
        if not card_answers(child.plan.url or ""):
            return None
        process = child.process()
        if process is None:
            return None  # it just exited: poll() reports it on the next round
        if listens_in_tree(process, child.plan.port or 0):
            return True
        return f"port {child.plan.port} answers, but its listener is not this arm's {child.role} nor a child of it"

    def _run_client(self) -> None:
        self._check_stop()
        client = self._start("client")
        self._state("running")
        threading.Thread(target=self._wake_on_exit, args=(client,), name=f"exit-{self.label}", daemon=True).start()
        while True:
            self._check_stop()
            for role in SERVER_ROLES:
                if role in self.children and self.children[role].poll() is not None:
                    raise self._died(self.children[role], "while the evaluation ran")
            self.watch.observe(self.children)
            frozen = self.watch.frozen_server(self.children)
            if frozen is not None:
                role, reason = frozen
                raise _ArmFailed(
                    Failure(
                        process=role,
                        kind=_kind_of(role),
                        reason=reason,
                        log_tail=self.children[role].log_tail(wait_s=0),
                    )
                )
            self._read_progress()
            self.alerts.check_progress()
            self.alerts.check_purple_reports()
            self._save_new_alerts()
            self._check_thresholds()
            code = client.poll()
            if code is not None:
                self._event(f"client {describe_exit(code)}")
                self._read_progress()
                if code != 0:
                    raise self._died(client, "before the evaluation completed")
                self.evaluation = self._read_evaluation(client)
                return
            self._wake.wait(POLL_S)
            self._wake.clear()

    def _wake_on_exit(self, client: Child) -> None:
        """The arm's thread reads the client's exit as it happens, not on its next poll."""
        if client.popen is not None:
            client.popen.wait()
        self._wake.set()

    def _check_thresholds(self) -> None:
        """Fail the arm as soon as its infrastructure trouble passes a threshold, not 200 hours later."""
        thresholds, progress = self.plan.thresholds, self.progress
        reason = None
        if thresholds.init_must_succeed and progress.init_failures:
            reason = progress.init_failures[0].text()
        elif progress.infrastructure_in_a_row >= thresholds.infrastructure_in_a_row:
            causes = ", ".join(f"{cause} {count}" for cause, count in progress.infrastructure.most_common())
            reason = (
                f"{progress.task}: {progress.infrastructure_in_a_row} infrastructure noops in a row at step "
                f"{progress.step} (threshold {thresholds.infrastructure_in_a_row}; so far: {causes})"
            )
        elif (
            progress.step >= thresholds.min_steps_for_share
            and progress.task_infrastructure > thresholds.infrastructure_share * progress.step
        ):
            reason = (
                f"{progress.task}: {progress.task_infrastructure} of {progress.step} steps were infrastructure noops, "
                f"above the threshold of {thresholds.infrastructure_share:.0%}"
            )
        if reason is not None:
            raise _ArmFailed(Failure(process=None, reason=f"infrastructure: {reason}"))

    def _read_progress(self) -> None:
        self.progress.add_steps(self.steps_tail.poll())
        self.progress.add_events(self.events_tail.poll())

    def _read_evaluation(self, client: Child) -> EvaluationResult:
        path = self.run_dir.evaluation
        try:
            return EvaluationResult.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as error:
            reason = error.strerror if isinstance(error, OSError) else validation_summary(error, limit=1)
            raise _ArmFailed(
                Failure(
                    process="client",
                    reason=f"the evaluation completed but {path} cannot be read as an evaluation result: {reason}",
                    exit_code=0,
                    log_tail=client.log_tail(),
                )
            ) from None

    # the end ----------------------------------------------------------------------------------------------
    def _stop_children(self) -> set[str]:
        """Stop every child; returns the roles that left a survivor. While the evaluation may still be stepping they
        are stopped one after the other in STOP_ORDER; once it is complete nothing steps any more, and they are
        stopped at once (each still TERM -> wait -> KILL by its own pid, token and cgroup)."""
        roles = [role for role in STOP_ORDER if role in self.children]
        if not roles:
            return set()
        self.watch.observe(self.children)  # each child's status as last seen, before the stop changes it
        began = time.monotonic()
        at_once = self.evaluation is not None
        self._event(f"stopping {', '.join(roles)} {'at once' if at_once else 'in turn'}")
        grace = self.options.stop_grace_s
        if at_once:
            outcomes = stopped_at_once({role: self.children[role] for role in roles}, grace)
        else:
            outcomes = {role: self.children[role].stop(grace) for role in roles}
        self._event(f"children stopped in {time.monotonic() - began:.2f} s")
        survivors: set[str] = set()
        for role in roles:
            child, outcome = self.children[role], outcomes[role]
            record = self.report.processes[role]
            state = self.watch.state_of(role, child)
            record.exit_code, record.last_status, record.signal = state.exit_code, state.last_status, state.signal
            if outcome.killed:
                self._record_alert(
                    f"{role}: {outcome.killed} process(es) still running {grace:g} s after SIGTERM were killed"
                )
            if outcome.survivors:
                survivors.add(role)
                self._record_alert(f"{role}: pids {outcome.survivors} survived SIGKILL")
            if outcome.contained:
                self._record_alert(
                    f"{role}: {len(outcome.contained)} process(es) had left its process group and dropped its owner "
                    f"token; found in its cgroup and stopped (pids {outcome.contained})"
                )
        return survivors

    def _finalise(self, status: ArmOutcomeStatus, failure: Failure | None) -> None:
        try:
            self._forget_stopped(self._stop_children())
        except Exception as error:  # reported, and the report is still written
            self._record_alert(f"stopping children failed: {type(error).__name__}: {error}")
        self._read_progress()  # what the green logged since the last poll
        stopped = failure is not None and failure.kind == self._stop_kind and self._stop.is_set()
        if stopped and self.evaluation is None and self.run_dir.evaluation.is_file():
            self.evaluation = self._evaluation_on_disk()
            if self.evaluation is not None:  # complete before the stop took effect: a result, not an interruption
                status, failure = "finished", None
        report = self.report
        if failure is not None and failure.process in self.children:
            failure.exit_code = self.children[failure.process].exit_code
        report.status = status  # type: ignore[assignment]
        report.failure = failure
        report.finished_at = iso_seconds(self.env.clock())
        report.wall_s = round(time.monotonic() - self._started, 3)
        if self.evaluation is not None:
            for alert in summarise_evaluation(report, self.evaluation, self.run_dir.relative(self.run_dir.evaluation)):
                self._record_alert(alert)
            breaches = threshold_breaches(self.evaluation, self.plan.thresholds)
            if breaches and status == "finished":
                status = "failed"
                failure = Failure(process=None, reason="infrastructure: " + "; ".join(breaches))
                report.status, report.failure = status, failure
        elif self.progress.steps_total:
            self._keep_progress(report)
        report.agent = self._agent_summary()
        self.progress.finished = time.monotonic()
        self.progress.state = status  # type: ignore[assignment]  # never skipped or queued here: see run()
        self._save_final()
        if failure is not None:
            self._event(f"{status}: {failure.reason}", alert=status == "failed")
            for line in failure.log_tail[-5:]:
                self._event(f"  | {line}")
        else:
            self._event(f"state {status}")

    def _evaluation_on_disk(self) -> EvaluationResult | None:
        try:
            return EvaluationResult.model_validate_json(self.run_dir.evaluation.read_bytes())
        except (OSError, ValidationError):
            return None

    def _reserve_space(self) -> None:
        """Hold back a little disk in the episode while the arm runs (released for the final report)."""
        try:
            with self.run_dir.space_reserve.open("xb") as reserve:
                reserve.write(b"\0" * SPACE_RESERVE_BYTES)
        except OSError as error:
            self._record_alert(f"cannot reserve disk for the final report: {error.strerror or error}")

    def _save_final(self) -> None:
        """The final report, in the episode if it can be written there (the disk held back at the start is released
        for it), else in the state dir — never lost."""
        try:
            self.run_dir.space_reserve.unlink(missing_ok=True)
        except OSError:
            pass
        try:
            self._save()
            return
        except _ArmFailed as unwritable:
            reason = unwritable.failure.reason
        self.report.status = "failed"
        if self.report.failure is None or not self.report.failure.reason.startswith("cannot write"):
            self.report.alerts.append(reason)
        self.report.failure = self.report.failure or Failure(process=None, reason=reason)
        fallback = lost_reports_dir(self.env.variables) / f"{self.plan.arm}-{self.run_dir.name}-{os.getpid()}.json"
        try:
            write_json_exclusive(fallback, self.report)
            self._event(f"{reason}; the report was written to {fallback} instead", alert=True)
            self.report_path = fallback
        except OSError as error:
            self._event(f"{reason}; the report could not be written anywhere ({error.strerror or error})", alert=True)
            self.report_path = None

    def _keep_progress(self, report: RunReport) -> None:
        """Without an evaluation (the arm failed or was stopped), keep what the green's step logs showed before the
        end: steps run, milestones reached with their step and noops by cause. Milestones not reached are not listed
        (only the evaluation knows them)."""
        progress = self.progress
        report.steps_run = progress.steps_total
        report.milestones = [
            MilestoneRecord(task=task, identity=identity, step=step) for task, identity, step in progress.milestones
        ]
        report.noops = dict(progress.noops)
        report.infrastructure = dict(progress.infrastructure)
        report.behaviour = dict(progress.behaviour)

    def _agent_summary(self) -> AgentSummary | None:
        """The purple's own report, when it wrote one (an agent of a kind that writes none has no summary)."""
        found = sorted(self.run_dir.purple.glob(f"*{AGENT_REPORT_SUFFIX}")) if self.run_dir.purple.is_dir() else []
        for path in found:
            try:
                return agent_summary(path)
            except ValueError as error:
                self._record_alert(str(error))
        return None

    def _record_alert(self, text: str) -> None:
        self.progress.alerts.append(text)
        self._event(text, alert=True)

    def record_leftovers(self, text: str) -> None:
        """After the arm ended: what the run found left behind and stopped, added to the finished report."""
        self._record_alert(text)
        self._save()

    def child_pids(self) -> set[int]:
        return {child.pid for child in list(self.children.values()) if child.pid is not None}

    def _outcome(self) -> ArmOutcome:
        return outcome_of(
            self.report,
            episode_dir=self.plan.episode_dir,
            report_path=str(self.report_path) if self.report_path else None,
            attempt=self.attempt,
        )


def stopped_at_once(children: dict[ProcessRole, Child], grace_s: float) -> dict[ProcessRole, StopOutcome]:
    """Each child stopped on a thread of its own, all at the same time; a stop that raised is raised here."""
    outcomes: dict[ProcessRole, StopOutcome] = {}
    errors: list[BaseException] = []

    def stop(role: ProcessRole) -> None:
        try:
            outcomes[role] = children[role].stop(grace_s)
        except BaseException as error:  # re-raised on the arm's thread, which reports it
            errors.append(error)

    threads = [threading.Thread(target=stop, args=(role,), name=f"stop-{role}") for role in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return outcomes


def _kind_of(role: ProcessRole) -> FailureKind:
    """A process that dies or never gets ready: the agent under test when it is the purple, else infrastructure."""
    return "agent" if role == "purple" else "infrastructure"


def _ports_of(plan: ArmPlan) -> set[tuple[str, int]]:
    return {(plan.host, plan.green_port), (plan.host, plan.purple_port)}


def supervise_here(
    plans: list[ArmPlan],
    env: Environment,
    options: RunOptions,
    out: Console,
    signalled: list[str],
    wake: threading.Event,
) -> list[ArmOutcome]:
    """Run the episodes at most `options.max_parallel` at a time (never two on one port at once), retrying one that
    failed for infrastructure reasons up to `options.retries` times; the view shows every episode started."""
    from mcu_arms.arms.prepare import prepare_arm

    view = make_view(out, options.progress_interval_s)
    supervisor = supervisor_record()
    pending: deque[tuple[ArmPlan, int]] = deque((plan, 1) for plan in plans)
    running: dict[threading.Thread, ArmRunner] = {}
    finished: list[tuple[ArmRunner, ArmOutcome]] = []
    progresses: list[ArmProgress] = []
    done_lock = threading.Lock()
    stop_reason: str | None = None

    def run_one(runner: ArmRunner) -> None:
        outcome = runner.run()
        with done_lock:
            finished.append((runner, outcome))
        wake.set()

    def start_next() -> None:
        busy = set().union(*(_ports_of(runner.plan) for runner in running.values()))
        for _ in range(len(pending)):
            if len(running) >= options.max_parallel:
                return
            plan, attempt = pending.popleft()
            if _ports_of(plan) & busy:
                pending.append((plan, attempt))
                continue
            prepared = prepare_arm(plan, env)[0]
            runner = ArmRunner(prepared, env, options, view, supervisor, attempt=attempt)
            thread = threading.Thread(target=run_one, args=(runner,), name=f"arm-{runner.label}", daemon=True)
            running[thread] = runner
            started.append(runner)
            progresses.append(runner.progress)
            busy |= _ports_of(plan)
            thread.start()

    outcomes: list[ArmOutcome] = []
    started: list[ArmRunner] = []
    began = time.monotonic()
    adopted = AdoptedOrphans(enabled=containment_support().cgroup is None)
    next_adoption_poll = time.monotonic() + ADOPTED_POLL_S
    try:
        while pending or running:
            if time.monotonic() >= next_adoption_poll:
                adopted.poll(_children_of(started))
                next_adoption_poll = time.monotonic() + ADOPTED_POLL_S
            if signalled and stop_reason is None:
                stop_reason = f"interrupted by {signalled[0]}"
            if options.fail_fast and stop_reason is None and any(o.status == "failed" for o in outcomes):
                stop_reason = (
                    f"stopped by --fail-fast: arm '{next(o.arm for o in outcomes if o.status == 'failed')}' failed"
                )
            if stop_reason is not None:
                by = f"mcu-arms run (pid {os.getpid()}), {stop_reason}" if signalled else None
                for runner in running.values():
                    runner.request_stop(stop_reason, stopped_by=by)
                outcomes += [_not_started(plan, stop_reason) for plan, _ in pending]
                pending.clear()
            with done_lock:
                completed, finished[:] = list(finished), []
            for runner, outcome in completed:
                thread = next(thread for thread, r in running.items() if r is runner)
                thread.join()
                del running[thread]
                stopped = runner.run_dir.stop_requested_by() is not None  # a user's stop is final, whatever `retries`
                if retryable(outcome) and runner.attempt <= options.retries and stop_reason is None and not stopped:
                    outcome = outcome.model_copy(update={"retried": True})
                    view.line(runner.label, f"retrying: attempt {runner.attempt + 1} of {options.retries + 1}")
                    pending.append((runner.plan, runner.attempt + 1))
                outcomes.append(outcome)
            if stop_reason is None:
                start_next()
            queued = [
                ArmProgress(_queued_label(plan, attempt), plan.settings.steps, state="queued", grid=grid_cell(plan))
                for plan, attempt in pending
            ]
            view.refresh(progresses + queued, summary=_tally(len(plans), outcomes, running, pending, began).text())
            if pending or running:  # the last episode's end is not followed by a refresh period's wait
                wake.wait(1.0 / REFRESH_PER_SECOND)
                wake.clear()
    except BaseException as error:  # a failing view must not leave the arms running unwatched while we wait on them
        for runner in running.values():
            runner.request_stop(f"mcu-arms: the supervising loop failed: {type(error).__name__}: {error}")
        raise
    finally:
        for thread in list(running):
            thread.join()
        _stop_adopted(adopted, started, options.stop_grace_s)
        view.close(progresses)
    return outcomes


def grid_cell(plan: ArmPlan) -> tuple[str, int] | None:
    """Where the episode sits in the live view's arm x seed grid: only an arm that runs several seeds has one."""
    return (plan.arm, plan.settings.seed) if plan.replicates > 1 else None


def _queued_label(plan: ArmPlan, attempt: int) -> str:
    return plan.label if attempt == 1 else f"{plan.label} (attempt {attempt})"


def _tally(total: int, outcomes: list[ArmOutcome], running: dict, pending: deque, began: float) -> CampaignTally:
    """This run's episodes by state, for the live view's summary line (k of n done, ETA from the pace so far)."""
    return CampaignTally(
        total=total,
        done=sum(o.status == "finished" for o in outcomes),
        running=len(running),
        queued=len(pending),
        failed=sum(o.status == "failed" and not o.retried for o in outcomes),
        interrupted=sum(o.status == "interrupted" and not o.retried for o in outcomes),
        retried=sum(o.retried for o in outcomes),
        ended=len(outcomes),
        in_progress=sum(runner.progress.done_share() for runner in running.values()),
        elapsed_s=time.monotonic() - began,
    )


def _not_started(plan: ArmPlan, reason: str) -> ArmOutcome:
    return ArmOutcome(
        arm=plan.arm,
        seed=plan.settings.seed,
        status="interrupted",
        message=f"not started: {reason}",
        failure=Failure(process=None, kind="stopped", reason=f"not started: {reason}"),
    )


def _children_of(runners: list[ArmRunner]) -> set[int]:
    return {pid for runner in runners for pid in runner.child_pids()}


def _stop_adopted(adopted: AdoptedOrphans, runners: list[ArmRunner], grace_s: float) -> None:
    """What the arms left behind (orphans re-parented to this run), stopped and said in every report of the run: a
    process that left its group and its token cannot be told apart by arm."""
    outcome = adopted.stop_all(_children_of(runners), grace_s)
    if outcome.contained:
        text = (
            f"{len(outcome.contained)} process(es) left behind by this run's arms (out of their groups, without their "
            f"owner tokens) were found as orphans of mcu-arms and stopped: pids {outcome.contained}"
        )
        if outcome.survivors:
            text += f"; pids {outcome.survivors} survived SIGKILL"
        for runner in runners:
            runner.record_leftovers(text)
