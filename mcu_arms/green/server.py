"""The green agent's A2A server: receives an EvalRequest, runs its MCU tasks in a simulator, streams progress, scores.

One evaluation is one A2A task. The executor enqueues the Task first (the SDK's streaming rule), then status
updates: evaluation started, each task started, progress every `progress_every` steps and on every milestone, each
task finished with its score; it ends with one artifact ("Result": the text summary, then the result as a DataPart
shaped as upstream's, contracts/evaluation.py) and COMPLETED. A request with `shard_index`, `num_shards` or
`num_instances` (AgentBeats' sharded assessments) runs its part of the category (contracts/shards.py), stated in
the result's `shard`. Config keys it does not know are accepted and named
(a ConfigKeysIgnored event, and the result's `ignored_config_keys`). A request it cannot run is REJECTED saying
what is wrong; a crash becomes FAILED with the reason — nothing escapes the executor, because the SDK would turn an
exception into an opaque InternalError.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from a2a.helpers import get_message_text, new_data_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus
from pydantic import BaseModel, ValidationError

from mcu_arms.a2a_client import AgentError, open_client
from mcu_arms.a2a_transport import (
    Skill,
    build_app,
    build_card,
    card_url_for,
    check_listen_address,
    serve_app,
    take_tokens,
)
from mcu_arms.atomic import AlreadyExists, make_dirs_nofollow, write_json_exclusive
from mcu_arms.contracts.catalog import CATEGORIES, capped_steps
from mcu_arms.contracts.errors import UserError, validation_summary
from mcu_arms.contracts.evaluation import CategoryResult, EvaluationResult, SimulatorInfo, SkippedTask, summary_text
from mcu_arms.contracts.events import (
    ConfigKeysIgnored,
    EvaluationFinished,
    EvaluationStarted,
    GreenEvent,
    Notice,
    TaskFinished,
    TaskSkipped,
    TaskStarted,
)
from mcu_arms.contracts.game_state import wants_frame, wants_state
from mcu_arms.contracts.rubric import AUTO_EVAL_ENV, auto_eval_problem, chosen_auto_eval_dir, rubric_of
from mcu_arms.contracts.shards import ShardInfo, shard_of
from mcu_arms.contracts.simulators import (
    SimulatorDescriptor,
    import_backend,
    simulator_descriptor,
    simulator_names,
    simulators,
)
from mcu_arms.contracts.steps import STEPS_FILE
from mcu_arms.contracts.tasks import TaskSpec, select_tasks
from mcu_arms.contracts.timestamps import file_stamp, iso_seconds
from mcu_arms.contracts.wire import EvalRequest
from mcu_arms.green.sims.base import Simulator, SimulatorUnavailable
from mcu_arms.green.task_run import (
    RunSettings,
    TaskRun,
    make_simulator,
    run_off_loop,
)
from mcu_arms.layout import EVALUATION_FILE, task_dir
from mcu_arms.process.procs import log_line

AGENT_ROLE = "agent"
RESULT_ARTIFACT = "Result"
# How long the purple agent's card may take to arrive when the request is checked.
PARTICIPANT_CHECK_TIMEOUT_S = 10.0


class RequestRejected(Exception):
    """The request cannot be run as given; the message says what to change."""


class ResultConflict(Exception):
    """A result appeared at the evaluation's result path while it ran: it is left as found, ours is kept beside it."""


@dataclass(frozen=True)
class _ValidRequest:
    """A validated request: what to run, where, and how long."""

    request: EvalRequest
    tasks: list[TaskSpec]
    skipped: list[SkippedTask]
    simulator: Simulator
    max_steps: int
    max_steps_note: str | None
    output_dir: Path
    auto_eval_dir: Path | None  # MCU's rubric for video evaluation; None: ours
    shard: ShardInfo | None  # the part of the category a sharded request runs; None: all of it


class GreenExecutor(AgentExecutor):
    """Runs one evaluation per A2A request and reports it as a streamed task.

    Every request's output_dir lies under `output_root` (resolved, no `..`, no link escapes it, none followed while
    its directories are made), and no two evaluations write into one output_dir at once.
    """

    def __init__(self, output_root: Path, *, secured: bool = False) -> None:
        self.output_root = Path(os.path.realpath(output_root))
        self.secured = secured
        self._writing: set[Path] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task = context.current_task
        if task is None:
            task = Task(
                id=context.task_id or "",
                context_id=context.context_id or "",
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message] if message is not None else [],
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            await self._evaluate(message, updater)
        except RequestRejected as rejection:
            log_line(f"rejected: {rejection}")
            await updater.reject(_text(updater, f"Rejected: {rejection}"))
        except Exception as error:  # never silent: the client sees FAILED with the reason, the log the traceback
            log_line(f"evaluation failed: {type(error).__name__}: {error}\n{traceback.format_exc()}")
            try:
                await updater.failed(_text(updater, f"Evaluation failed: {type(error).__name__}: {error}"))
            except RuntimeError:  # the task already reached a terminal state; the log above has the reason
                pass

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Mark the evaluation canceled; the SDK then cancels the running execute() and its episode."""
        caller = "a caller holding this arm's token" if self.secured else "a caller of this open server"
        log_line(f"cancel requested for task {context.task_id} by {caller}")
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel(_text(updater, f"Evaluation canceled by a tasks/cancel request from {caller}"))

    async def _evaluate(self, message: Message | None, updater: TaskUpdater) -> None:
        request = self._parse(message)
        output_dir = self._claim_output_dir(request.config.output_dir)
        sim_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simulator")
        try:
            plan = await self._validate(request, output_dir, sim_thread)
            try:
                await self._run(plan, updater, sim_thread)
            finally:
                await asyncio.get_running_loop().run_in_executor(sim_thread, plan.simulator.close)
        finally:
            sim_thread.shutdown(wait=False, cancel_futures=True)
            self._writing.discard(output_dir)

    def _claim_output_dir(self, requested: str | None) -> Path:
        """The request's output_dir, made under the output root and held until the evaluation ends."""
        root = self.output_root
        given = Path(requested) if requested else Path(datetime.now(UTC).strftime("%Y%m%d_%H%M%S"))
        if ".." in given.parts:
            raise RequestRejected(f"output_dir {requested} contains '..'; name a directory under {root}")
        real = Path(os.path.realpath(given if given.is_absolute() else root / given))
        if real != root and root not in real.parents:
            raise RequestRejected(
                f"output_dir {requested} is outside this green's output root {root} (resolved: {real}); name a "
                "directory under it, or start the green with another --output-root"
            )
        try:
            root.mkdir(parents=True, exist_ok=True)
            output_dir = make_dirs_nofollow(root, real.relative_to(root).parts)
        except OSError as error:
            where = error.filename or real
            raise RequestRejected(f"output_dir {where} cannot be created: {error.strerror or error}") from None
        if output_dir in self._writing:
            raise RequestRejected(f"output_dir {output_dir} is being written by a running evaluation; name another")
        self._writing.add(output_dir)
        return output_dir

    @staticmethod
    def _parse(message: Message | None) -> EvalRequest:
        text = get_message_text(message).strip() if message is not None else ""
        if not text:
            raise RequestRejected("empty request: send the EvalRequest as JSON text")
        try:
            return EvalRequest.model_validate_json(text)
        except ValidationError as error:
            raise RequestRejected(f"invalid evaluation request: {validation_summary(error)}") from None

    async def _validate(self, request: EvalRequest, output_dir: Path, sim_thread: ThreadPoolExecutor) -> _ValidRequest:
        config = request.config
        if AGENT_ROLE not in request.participants:
            roles = ", ".join(sorted(request.participants)) or "none"
            raise RequestRejected(f"participants must name the role '{AGENT_ROLE}' (got: {roles})")
        if config.task_category not in CATEGORIES:
            raise RequestRejected(f"unknown task_category '{config.task_category}' (valid: {', '.join(CATEGORIES)})")
        try:
            descriptor = simulator_descriptor(config.simulator, key="config.simulator")
        except UserError as error:
            raise RequestRejected(error.render()) from None
        if wants_state(config.observe) and not descriptor.serves_state():
            state_from = [d.name for d in simulators().values() if d.serves_state()]
            raise RequestRejected(
                f"observe '{config.observe}' needs structured state, which the {config.simulator} simulator cannot "
                f"provide (it serves frames only; state comes from: {', '.join(sorted(state_from))})"
            )
        frameless = not descriptor.serves_frames() and wants_frame(config.observe)
        if frameless or (config.video_eval and "video" not in descriptor.serves):
            wanted = f"observe '{config.observe}'" if frameless else "video_eval"
            raise RequestRejected(
                f"{wanted} needs frames, and the {config.simulator} simulator serves none: use observe 'state'"
            )
        try:
            tasks = select_tasks(config.task_category, config.tasks)
        except UserError as error:
            raise RequestRejected(error.render()) from None
        self._check_nothing_to_overwrite(output_dir, tasks)
        auto_eval_dir = chosen_auto_eval_dir(config.auto_eval_dir, os.environ)
        problem = auto_eval_problem(auto_eval_dir) if auto_eval_dir is not None else None
        if problem:
            source = "config auto_eval_dir" if config.auto_eval_dir else AUTO_EVAL_ENV
            raise RequestRejected(f"{source}: {problem}")
        try:
            simulator: Simulator = await asyncio.get_running_loop().run_in_executor(
                sim_thread,
                partial(
                    make_simulator,
                    config.simulator,
                    obs_size=config.obs_size,
                    reset_mode=config.reset_mode,
                    table=config.simulator_table(descriptor.table),
                    action_mode=config.action_mode,
                ),
            )
        except (SimulatorUnavailable, UserError) as error:
            raise RequestRejected(f"simulator '{config.simulator}' cannot run here: {error}") from None
        try:
            runnable, skipped = self._runnable(tasks, simulator, named=bool(config.tasks))
            await self._check_participant(request.participants[AGENT_ROLE], config.step_timeout)
        except RequestRejected:
            simulator.close()
            raise
        max_steps, note = capped_steps(config.task_category, config.max_steps)
        shard = None
        if config.num_shards > 1 or config.num_instances is not None:
            shard = shard_of(
                [task.name for task in runnable], config.shard_index, config.num_shards, config.num_instances
            )
            runnable = [task for task in runnable if task.name in shard.instances]
        return _ValidRequest(request, runnable, skipped, simulator, max_steps, note, output_dir, auto_eval_dir, shard)

    @staticmethod
    def _check_nothing_to_overwrite(output_dir: Path, tasks: list[TaskSpec]) -> None:
        """A result is never overwritten: an output_dir that already holds one (or a task's step log) is refused."""
        existing = [output_dir / EVALUATION_FILE, *(task_dir(output_dir, task.name) / STEPS_FILE for task in tasks)]
        found = [str(path) for path in existing if path.exists()]
        if found:
            raise RequestRejected(
                f"output_dir {output_dir} already holds the results of an earlier evaluation ({', '.join(found[:3])}"
                f"{', ...' if len(found) > 3 else ''}); name a new output_dir"
            )

    @staticmethod
    def _runnable(
        tasks: list[TaskSpec], simulator: Simulator, *, named: bool
    ) -> tuple[list[TaskSpec], list[SkippedTask]]:
        """Split into tasks this simulator can run and the rest. Named tasks must all run; for a whole category the
        others are skipped and listed in the result."""
        runnable: list[TaskSpec] = []
        skipped: list[SkippedTask] = []
        for task in tasks:
            support = simulator.supports(task)
            if support.runnable:
                runnable.append(task)
            else:
                skipped.append(SkippedTask(task=task.name, reason=support.reason))
        if skipped and (named or not runnable):
            by_reason: dict[str, list[str]] = {}
            for entry in skipped:
                by_reason.setdefault(entry.reason, []).append(entry.task)
            reasons = "; ".join(f"{reason} (tasks: {', '.join(names)})" for reason, names in by_reason.items())
            raise RequestRejected(f"not runnable on simulator '{simulator.name}': {reasons}")
        return runnable, skipped

    @staticmethod
    async def _check_participant(url: str, step_timeout: float) -> None:
        """Fail the request now, not after a simulator reset, when the purple agent cannot be reached."""
        try:
            async with open_client(url, min(step_timeout, PARTICIPANT_CHECK_TIMEOUT_S), streaming=False):
                pass
        except AgentError as error:
            raise RequestRejected(f"participant '{AGENT_ROLE}' at {url} is unreachable: {error}") from None

    async def _run(self, plan: _ValidRequest, updater: TaskUpdater, sim_thread: ThreadPoolExecutor) -> None:
        config = plan.request.config
        simulator = plan.simulator
        started_at, started = iso_seconds(), time.monotonic()

        async def emit(event: GreenEvent) -> None:
            line = event.text()
            log_line(line)
            await updater.update_status(TaskState.TASK_STATE_WORKING, _event_message(updater, line, event))

        await emit(
            EvaluationStarted(
                category=config.task_category,
                tasks=[task.name for task in plan.tasks],
                skipped={entry.task: entry.reason for entry in plan.skipped},
                simulator_label=simulator.label(),
                max_steps=plan.max_steps,
                max_steps_note=plan.max_steps_note,
                step_timeout=config.step_timeout,
                seed=config.seed,
                video_model=config.video_model if config.video_eval else None,
                video_rubric=rubric_of(plan.auto_eval_dir),
                obs_size=config.obs_size,
                obs_encoding=config.obs_encoding,
                output_dir=str(plan.output_dir),
            )
        )
        if config.ignored_keys():
            await emit(ConfigKeysIgnored(keys=config.ignored_keys()))
        if plan.max_steps_note:
            await emit(Notice(message=plan.max_steps_note))
        for skipped in plan.skipped:
            await emit(TaskSkipped(task=skipped.task, reason=skipped.reason))
        settings = RunSettings(
            max_steps=plan.max_steps,
            env=dict(os.environ),
            auto_eval_dir=plan.auto_eval_dir,
            **config.model_dump(include=RunSettings.from_config),
        )
        agent_url = plan.request.participants[AGENT_ROLE]
        metrics = {}
        for index, task in enumerate(plan.tasks):
            entries = len(task.reward_cfg) + len(task.milestones)
            unavailable = len(simulator.supports(task).unavailable)
            await emit(
                TaskStarted(
                    task=task.name, index=index, count=len(plan.tasks), entries=entries, reachable=entries - unavailable
                )
            )
            run = TaskRun(task, simulator, agent_url, settings, task_dir(plan.output_dir, task.name), emit)
            outcome = await run_off_loop(run, sim_thread, emit)
            metrics[task.name] = outcome
            for restart in outcome.sim_restarts:
                await emit(
                    Notice(
                        message=f"simulator restarted before {task.name}: {restart.cause} in "
                        f"{restart.failed_task} during {restart.failed_during}: {restart.detail}"
                    )
                )
            await emit(
                TaskFinished(
                    task=task.name,
                    score=outcome.score,
                    max_score=outcome.max_score,
                    score_source=outcome.score_source,
                    steps_run=outcome.steps_run,
                    noop_total=outcome.noop_total,
                    error=outcome.error,
                )
            )
        result = EvaluationResult(
            participants=dict(plan.request.participants),
            results=[CategoryResult.of(config.task_category, metrics, plan.skipped)],
            simulator=SimulatorInfo(
                name=simulator.name,
                version=simulator.version(),
                label=simulator.label(),
                reset_mode=simulator.reset_mode(),
                action_mode=simulator.action_mode(),
            ),
            seed=config.seed,
            max_steps=plan.max_steps,
            max_steps_note=plan.max_steps_note or "",
            config=config.known(),
            ignored_config_keys=config.ignored_keys(),
            video_rubric=rubric_of(plan.auto_eval_dir),
            started_at=started_at,
            finished_at=iso_seconds(),
            duration_s=round(time.monotonic() - started, 3),
            output_dir=str(plan.output_dir),
            shard=plan.shard,
        )
        self._write_result(plan.output_dir, result)
        summary = summary_text(result)
        log_line(summary)
        await updater.add_artifact(
            parts=[Part(text=summary, media_type="text/plain"), new_data_part(result.artifact_data())],
            name=RESULT_ARTIFACT,
        )
        category = result.results[0]
        finished = EvaluationFinished(
            total_score=category.total_score,
            total_max_score=category.total_max_score,
            scored_tasks=category.scored_tasks,
            num_tasks=category.num_tasks,
        )
        await updater.complete(_event_message(updater, finished.text(), finished))

    @staticmethod
    def _write_result(output_dir: Path, result: EvaluationResult) -> None:
        """Write the result where it belongs, never over a file that appeared there meanwhile: then ours is kept
        beside it and the evaluation fails, since a result nobody asked for now sits where readers look."""
        path = output_dir / EVALUATION_FILE
        try:
            write_json_exclusive(path, result)
        except AlreadyExists:
            aside = path.with_name(f"{path.stem}.{file_stamp(datetime.now(UTC))}{path.suffix}")
            write_json_exclusive(aside, result)
            raise ResultConflict(
                f"{path} appeared while this evaluation ran and was left as found; this evaluation's result is in "
                f"{aside}"
            ) from None


def _event_message(updater: TaskUpdater, text: str, event: BaseModel) -> Message:
    """A status message for humans (text) and for programs (the same event as data)."""
    return updater.new_agent_message(parts=[Part(text=text), new_data_part(event.model_dump(mode="json"))])


def _text(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message(parts=[Part(text=text)])


def build_green_card(url: str, *, secured: bool = False):  # an a2a AgentCard
    simulator_choices = "|".join(f'"{name}"' for name in simulator_names())
    return build_card(
        name="mcu-arms green evaluator",
        description=(
            "Runs MCU Minecraft tasks against a purple A2A agent and scores them. Send an EvalRequest as JSON text: "
            '{"participants": {"agent": URL}, "config": {"task_category": ..., '
            f'"simulator": {simulator_choices}}}}}.'
        ),
        url=url,
        skills=[
            Skill(
                id="mcu_evaluation",
                name="MCU evaluation",
                description="Evaluate an agent on one MCU task category; streams progress, returns the scores.",
                tags=("mcu", "minecraft", "benchmark"),
                examples=(
                    '{"participants": {"agent": "http://127.0.0.1:9019"}, "config": {"task_category": "crafting"}}',
                ),
            )
        ],
        streaming=True,
        secured=secured,
    )


def default_output_root() -> Path:
    """Where a standalone green writes, as the MCU agent does: ./output (each request in a timestamped dir)."""
    return Path.cwd() / "output"


def build_green_app(url: str, *, output_root: Path | None = None, token: str | None = None):
    """The green's Starlette app; with a `token`, it answers only callers that present it."""
    executor = GreenExecutor(output_root or default_output_root(), secured=token is not None)
    return build_app(build_green_card(url, secured=token is not None), executor, token=token)


def serve(
    host: str,
    port: int,
    card_url: str | None,
    *,
    output_root: Path | None = None,
    expose: bool = False,
    warm_up: str | None = None,
) -> None:
    """Serve the green agent until SIGINT/SIGTERM (blocking). A busy port aborts with a UserError.

    The token it requires and the one it presents to its participants come from its environment (contracts/access).
    `warm_up` names the simulator the first request is expected to ask for: its backend warms up while the green
    waits (a request for any other simulator is served as ever).
    """
    descriptor = None if warm_up is None else simulator_descriptor(warm_up, key="--warm-up")
    token = take_tokens()
    access = check_listen_address(host, token=token, expose=expose)
    root = output_root or default_output_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"cannot create the output root: {error.strerror or error}", path=root, key="--output-root"
        ) from None
    if not root.is_dir():
        raise UserError("the output root is not a directory", path=root, key="--output-root")
    url = card_url_for(host, port, card_url)
    app = build_green_app(url, output_root=root, token=token)
    log_line(
        f"green agent listening on {host}:{port} card_url={url} output_root={root} python={sys.version.split()[0]}"
    )
    log_line(access)
    if descriptor is not None:
        threading.Thread(target=_warm_up, args=(descriptor,), name="warm-up", daemon=True).start()
    serve_app(app, host, port)


def _warm_up_backend(descriptor: SimulatorDescriptor) -> None:
    backend: type[Simulator] = import_backend(descriptor)
    backend.warm_up()


def _warm_up(descriptor: SimulatorDescriptor) -> None:
    """A failure here is only logged: the request that needs the backend meets the same error and reports it."""
    began = time.monotonic()
    try:
        _warm_up_backend(descriptor)
    except Exception as error:
        log_line(f"warm-up of simulator '{descriptor.name}' failed ({type(error).__name__}: {error})")
        return
    log_line(f"simulator '{descriptor.name}' warmed up in {time.monotonic() - began:.2f} s")
