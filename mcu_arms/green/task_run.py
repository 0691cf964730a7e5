"""One MCU task's run: init the purple agent, then observation -> action -> simulator step up to max_steps.

The loop does not care which simulator runs underneath (see sims/base.py). It talks to the purple agent over ONE
long-lived non-streaming A2A client per episode with one context_id (the purple keys its episode state by context),
and a timeout sized from step_timeout, never the SDK's 5 s default. A turn that yields no usable action (timeout,
transport error, unparseable or invalid reply) becomes a noop for that step, counted per cause with the first
reasons kept; it never ends the episode.

The whole episode runs on the evaluation's simulator thread, in that thread's own event loop (`run_off_loop`): the
server's event loop stays responsive, and a step costs no thread hand-off (two extra wake-ups per step measurably
slow a loaded 2-core host). Progress events (contracts/events.py) are relayed to the server's loop.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ValidationError

from mcu_arms.contracts.errors import UserError, validation_summary
from mcu_arms.contracts.evaluation import (
    CappedCounter,
    InitOutcome,
    LatencyStats,
    NoopCauseStats,
    TaskMetrics,
    VideoResult,
)
from mcu_arms.contracts.events import GreenEvent, InitFailed, MilestoneReached, TaskProgress
from mcu_arms.contracts.game_state import DEFAULT_OBSERVE, GameState, ObserveMode, wants_frame, wants_state
from mcu_arms.contracts.simulators import BackendRequest, import_backend, simulator_descriptor, simulators
from mcu_arms.contracts.skills import GameEvent, SkillOutcome
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES, EndedBy
from mcu_arms.contracts.steps import StepRecord, truncate_received
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.contracts.wire import (
    DEFAULT_OBS_ENCODING,
    DEFAULT_OBS_SIZE,
    DEFAULT_VIDEO_MODEL,
    AckPayload,
    InitPayload,
    ObsEncoding,
    ObservationPayload,
)
from mcu_arms.green.actions import ParsedAction, noop_result, parse_reply, through_agent_mode
from mcu_arms.green.observation import NO_FRAME, EncodedFrame, FrameEncoder
from mcu_arms.green.steplog import StepLog

if TYPE_CHECKING:
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.green.scoring import MilestoneEvent, RewardTracker, TaskScore, VideoEvaluation
    from mcu_arms.green.sims.base import Recording, SimStep, Simulator

EventSink = Callable[[GreenEvent], Coroutine[Any, Any, None]]

RECORDING_DIR = "recording"  # in the task's folder: the simulator's video of the task (MineStudio: episode_1.mp4)

BASE_PROMPT = """You are an AI agent playing Minecraft. Each turn you receive one observation: a JSON object
{"type": "obs", "step": N, "obs": "<base64 image of your first-person view>", "encoding": "png" | "jpeg" |
"jpeg_bgr"} ("jpeg_bgr": a JPEG whose channels are in BGR order, as cv2.imencode writes an RGB array); answer with
exactly one action as a JSON object, in one of three formats:
1. env:      {"type": "action", "action_type": "env", "action": {"forward": 1, ..., "camera": [pitch, yaw]}}
2. expanded: {"type": "action", "action_type": "agent", "buttons": [20 values of 0/1], "camera": [pitch, yaw]}
3. compact:  {"type": "action", "action_type": "agent", "buttons": [index 0..8640], "camera": [index 0..120]}
Button keys, in the order the expanded format uses: attack, back, forward, jump, left, right, sneak, sprint, use,
drop, inventory, hotbar.1 ... hotbar.9. Buttons are 0 or 1; omitted env keys are released. camera is a turn in
degrees, pitch then yaw, each within -180..180. The compact format is VPT's joint action space (MineStudio's
"agent" action type). Any other key (chat, commands, mobs, voxels, pickItem) is dropped and counted. An answer that
is late, malformed or invalid is replaced by a no-op for that step and counted against you."""

STATE_PROMPT = """This arm observes structured state: each observation also carries "state", what you could know
of the game (vitals, inventory, the visible tiles and creatures, what you face, daylight, crafting stations in reach,
and the simulator's capability list); "obs" is empty when the arm observes the state alone."""


def make_simulator(
    name: str,
    obs_size: tuple[int, int] = DEFAULT_OBS_SIZE,
    reset_mode: str | None = None,
    table: BaseModel | None = None,
    action_mode: str | None = None,
) -> Simulator:
    """The named simulator's backend, imported only now (a backend may need a heavy, optional extra).

    Its descriptor says which reset and action modes it takes and what its table holds; the backend builds itself
    from those choices (MineStudio renders at `obs_size`, as upstream's green asks it to; the embedded backend draws
    128x128 Crafter frames, which the frame encoder resizes).
    """
    descriptor = simulator_descriptor(name)
    _refuse_a_mode_it_lacks(name, "reset_mode", reset_mode, "starts each task its own way")
    _refuse_a_mode_it_lacks(name, "action_mode", action_mode, "takes env actions as they are")
    if table is not None and descriptor.table_model is not None and not isinstance(table, descriptor.table_model):
        try:
            table = descriptor.table_model.model_validate(table.model_dump())
        except ValidationError as error:
            raise UserError(f"[{descriptor.table}]: {validation_summary(error)}", key=descriptor.table) from None
    request = BackendRequest(
        obs_size=obs_size,
        reset_mode=descriptor.resolved_reset(reset_mode),
        action_mode=descriptor.resolved_action_mode(action_mode),
        table=table if descriptor.table_model is not None else None,
    )
    backend: type[Simulator] = import_backend(descriptor)
    return backend.open(request)


def _refuse_a_mode_it_lacks(name: str, key: str, mode: str | None, instead: str) -> None:
    """A reset or action mode (`key`) the simulator's descriptor does not list is an error naming those that take it."""
    taken: tuple[str, ...] = getattr(simulator_descriptor(name), f"{key}s")  # its reset_modes or action_modes
    if mode is None or mode in taken:
        return
    takers = [d.name for d in simulators().values() if mode in getattr(d, f"{key}s")]
    raise UserError(
        f"{key} '{mode}' is for {' and '.join(takers) or 'no simulator'}: the {name} simulator {instead}",
        key=key,
        allowed=", ".join(taken) or None,
    )


@dataclass(frozen=True)
class RunSettings:
    """How one task runs; all but max_steps and env come as they are from the request's EvalConfig."""

    from_config: ClassVar[set[str]] = {
        "step_timeout",
        "seed",
        "save_frames",
        "progress_every",
        "video_eval",
        "video_model",
        "obs_size",
        "obs_encoding",
        "observe",
    }

    max_steps: int
    step_timeout: float
    seed: int
    save_frames: bool
    progress_every: int
    video_eval: bool
    env: Mapping[str, str]  # where video evaluation looks for OPENAI_API_KEY
    video_model: str = DEFAULT_VIDEO_MODEL
    obs_size: tuple[int, int] = DEFAULT_OBS_SIZE
    obs_encoding: ObsEncoding = DEFAULT_OBS_ENCODING
    auto_eval_dir: Path | None = None  # MCU's auto_eval checkout: grade video with MCU's rubric; None: ours
    observe: ObserveMode = DEFAULT_OBSERVE


@dataclass(frozen=True)
class Seen:
    """What the agent is shown of one simulator step: the encoded frame (NO_FRAME when frames are off), the state,
    and (simulators that take skills) what the last skill came to and what the player felt meanwhile."""

    frame: EncodedFrame
    state: GameState | None
    skill: SkillOutcome | None = None
    events: list[GameEvent] | None = None


class AgentChannel:
    """One episode's conversation with the purple agent: one client, one context, the green's own deadline.

    `exchange` returns the reply text or raises a2a_support.AgentTimeout / AgentTransportError.
    """

    def __init__(self, url: str, step_timeout: float) -> None:
        self.url = url
        self.step_timeout = step_timeout
        self.context_id = uuid.uuid4().hex
        self._client: Any = None
        self._opened: Any = None

    async def __aenter__(self) -> AgentChannel:
        from mcu_arms.a2a_client import client_timeout_for_step, open_client

        self._opened = open_client(self.url, client_timeout_for_step(self.step_timeout), streaming=False)
        self._client = await self._opened.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._opened is not None:
            await self._opened.__aexit__(*exc_info)
            self._opened = None

    async def exchange(self, payload: BaseModel) -> str:
        from mcu_arms.a2a_client import AgentTimeout, payload_to_message, send_and_collect

        message = payload_to_message(payload, context_id=self.context_id)
        try:
            async with asyncio.timeout(self.step_timeout):
                return await send_and_collect(self._client, message, self.step_timeout)
        except TimeoutError as error:
            raise AgentTimeout(f"no answer within {self.step_timeout:g} s") from error


def _json_safe(value: Any) -> Any:
    """Simulator info as plain JSON types (numpy scalars and arrays appear in backends' info)."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    return repr(value)


class TaskRun:
    """Runs one task against one purple agent and returns its TaskMetrics. Construct, then `await run()`."""

    def __init__(
        self,
        task: TaskSpec,
        simulator: Simulator,
        agent_url: str,
        settings: RunSettings,
        task_dir: Path,
        emit: EventSink,
    ) -> None:
        self.task = task
        self.sim = simulator
        self.agent_url = agent_url
        self.settings = settings
        self.task_dir = task_dir
        self.emit = emit
        self.encoder = FrameEncoder(settings.obs_size, settings.obs_encoding, keep_frames=settings.save_frames)
        self.stop_requested = threading.Event()  # set from the server's thread when the evaluation is canceled
        self.noops: dict[str, NoopCauseStats] = {}
        self.dropped_keys = CappedCounter()
        self.adjustments: Counter[str] = Counter()
        self.formats: Counter[str] = Counter()
        self.agent_notes = NoopCauseStats()
        self.agent_failures = CappedCounter()
        self.infrastructure_noops = 0
        self.infrastructure_run = 0
        self.longest_infrastructure_run = 0
        self.no_effect_steps = 0
        self.agent_ms: list[float] = []
        self.sim_ms: list[float] = []
        self.steps_run = 0
        self.ended_by: EndedBy = "max_steps"
        self.error: str | None = None
        self.init: InitOutcome | None = None
        self.support = simulator.supports(task)
        self.agent_mode = simulator.action_mode() == "agent"
        self.recording_problem: str | None = None

    async def run(self) -> TaskMetrics:
        from mcu_arms.a2a_client import AgentError
        from mcu_arms.green.scoring import RewardTracker

        started_at, started = iso_seconds(), time.monotonic()
        tracker = RewardTracker(self.task, self.support.unavailable)
        log = StepLog(self.task_dir, save_frames=self.settings.save_frames)
        recording: Recording | None = None
        try:
            self.sim.set_frames(self._frames_needed())
            self.sim.record_to(self.task_dir / RECORDING_DIR if self.settings.video_eval else None)
            seen = self._observe(self.sim.reset(self.task, self.settings.seed))
            async with AgentChannel(self.agent_url, self.settings.step_timeout) as channel:
                self.init = await self._send_init(channel)
                if not self.init.ok:
                    await self.emit(
                        InitFailed(task=self.task.name, cause=self.init.cause or "", message=self.init.message)
                    )
                await self._loop(channel, log, tracker, seen)
        except AgentError as error:
            self.ended_by, self.error = "error", f"agent unreachable: {error}"
        except Exception as error:  # a simulator crash ends this task, loudly, not the evaluation
            self.ended_by, self.error = "error", f"{type(error).__name__}: {error}"
        finally:
            log.close()
            recording = self._finish_recording()
        video = await self._evaluate_video(tracker, log, recording)
        return self._metrics(tracker, video, log, started_at, time.monotonic() - started)

    async def _send_init(self, channel: AgentChannel) -> InitOutcome:
        from mcu_arms.a2a_client import AgentAnswerTooLarge, AgentTimeout, AgentTransportError

        prompt = BASE_PROMPT
        for extra in (self.sim.agent_instructions(), STATE_PROMPT if wants_state(self.settings.observe) else ""):
            if extra:
                prompt = f"{prompt}\n\n{extra}"
        started = time.perf_counter()
        try:
            world_seed, unknown = self.sim.world_seed(self.settings.seed)
            init = InitPayload(
                prompt=prompt, text=self.task.text, world_seed=world_seed, world_seed_unknown=unknown or None
            )
            text = await channel.exchange(init)
        except AgentTimeout as error:
            return InitOutcome(ok=False, cause="timeout", message=str(error))
        except AgentAnswerTooLarge as error:
            return InitOutcome(ok=False, cause="response_too_large", message=str(error))
        except AgentTransportError as error:
            return InitOutcome(ok=False, cause="transport_error", message=str(error))
        round_trip_ms = round((time.perf_counter() - started) * 1000, 3)
        try:
            ack = AckPayload.model_validate_json(text)
        except ValidationError as error:
            reason = f"no ack in reply {truncate_received(text)!r}: {validation_summary(error, limit=1)}"
            return InitOutcome(ok=False, cause="unparseable", message=reason, round_trip_ms=round_trip_ms)
        if not ack.success:
            return InitOutcome(ok=False, cause="refused", message=ack.message, round_trip_ms=round_trip_ms)
        return InitOutcome(ok=True, message=ack.message, round_trip_ms=round_trip_ms)

    async def _loop(
        self,
        channel: AgentChannel,
        log: StepLog,
        tracker: RewardTracker,
        seen: Seen,
    ) -> None:
        settings = self.settings
        name, max_steps = self.task.name, settings.max_steps
        for step in range(max_steps):
            if self.stop_requested.is_set():
                self.ended_by = "canceled"
                break
            started = time.perf_counter()
            received, parsed = await self._ask(channel, step, seen)
            parsed = self._as_the_simulator_applies(parsed)
            agent_ms = (time.perf_counter() - started) * 1000
            sim_step, sim_ms, seen = self._advance(parsed, step, seen, log)
            events = [
                paid
                for counters in sim_step.counter_ticks or [sim_step.counters]
                for paid in tracker.update(step, counters)
            ]  # backends count from their reset (sims/base.py)
            self._count(step, parsed, agent_ms, sim_ms, sim_step)
            log.write(self._record(step, received, parsed, agent_ms, sim_ms, events, sim_step))
            self.steps_run = step + 1
            for event in events:
                await self.emit(
                    MilestoneReached(
                        task=name,
                        step=step,
                        entry_kind=event.kind,
                        identity=event.identity,
                        reached=len(tracker.reached),
                        total=len(tracker.entries),
                        reward=tracker.sim_reward,
                        max_reward=tracker.max_reward,
                    )
                )
            if self.steps_run % settings.progress_every == 0 and self.steps_run < max_steps:
                await self.emit(self._progress(tracker))
            if sim_step.done:
                self.ended_by = "simulator_done"
                break
        if seen.frame.png is not None:
            log.save_frame(self.steps_run, seen.frame.png)  # the view after the last action, for video evaluation

    async def _ask(self, channel: AgentChannel, step: int, seen: Seen) -> tuple[str | None, ParsedAction]:
        from mcu_arms.a2a_client import AgentAnswerTooLarge, AgentTimeout, AgentTransportError

        shown = wants_frame(self.settings.observe)
        observation = ObservationPayload(
            step=step,
            obs=base64.b64encode(seen.frame.obs if shown else b"").decode("ascii"),
            encoding=self.encoder.encoding if shown else None,
            state=seen.state,
            last_skill=seen.skill,
            events=seen.events,
        )
        try:
            received = await channel.exchange(observation)
        except AgentTimeout as error:
            return None, noop_result("timeout", str(error))
        except AgentAnswerTooLarge as error:
            return None, noop_result("response_too_large", str(error))
        except AgentTransportError as error:
            return None, noop_result("transport_error", str(error))
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as error:  # a reply that crashes a parser must not end the task unscored
            return None, noop_result("transport_error", f"the reply could not be read: {type(error).__name__}")
        parsed = parse_reply(received)
        if parsed.skill is not None and not self.sim.accepts_skills:
            return received, noop_result(
                "invalid_action",
                f"a skill action ({parsed.skill.label()}): the {self.sim.name} simulator takes env "
                'actions only (skills are for simulators whose capabilities say actions = "skills")',
            )
        return received, parsed

    def _as_the_simulator_applies(self, parsed: ParsedAction) -> ParsedAction:
        """In agent action mode an env or expanded action goes through the compact joint space, as upstream's green
        sends it (the step log then shows what was applied, and the adjustments are counted); a compact action is
        already in it."""
        if self.agent_mode and parsed.skill is None and parsed.format != "compact":
            applied, adjustments = through_agent_mode(parsed.action)
            return parsed.model_copy(update={"action": applied, "adjustments": [*parsed.adjustments, *adjustments]})
        return parsed

    def _advance(self, parsed: ParsedAction, step: int, seen: Seen, log: StepLog) -> tuple[SimStep, float, Seen]:
        """Keep the frame the agent saw, step (or carry out the skill), and build the next observation."""
        if seen.frame.png is not None:
            log.save_frame(step, seen.frame.png)
        started = time.perf_counter()
        if parsed.say:
            self.sim.say(parsed.say)
        sim_step = self.sim.act(parsed.skill) if parsed.skill is not None else self.sim.step(parsed.action)
        sim_ms = (time.perf_counter() - started) * 1000
        return sim_step, sim_ms, self._observe(sim_step)

    def _frames_needed(self) -> bool:
        """Frames are rendered and encoded only for an agent that observes them or a run that saves them."""
        return wants_frame(self.settings.observe) or self.settings.save_frames

    def _observe(self, sim_step: SimStep) -> Seen:
        frame = self.encoder.encode(sim_step.frame) if sim_step.frame is not None else NO_FRAME
        state = self.sim.state() if wants_state(self.settings.observe) else None
        events = sim_step.events if self.sim.accepts_skills else None
        return Seen(frame=frame, state=state, skill=sim_step.skill, events=events)

    def _count(self, step: int, parsed: ParsedAction, agent_ms: float, sim_ms: float, sim_step: SimStep) -> None:
        self.agent_ms.append(agent_ms)
        self.sim_ms.append(sim_ms)
        if parsed.noop_cause is not None:
            self.noops.setdefault(parsed.noop_cause, NoopCauseStats()).record(step, parsed.reason)
        if parsed.noop_cause in INFRASTRUCTURE_CAUSES:
            self.infrastructure_noops += 1
            self.infrastructure_run += 1
            self.longest_infrastructure_run = max(self.longest_infrastructure_run, self.infrastructure_run)
        else:
            self.infrastructure_run = 0
        if parsed.failure_cause is not None:
            self.agent_failures.add([parsed.failure_cause])
        if sim_step.no_effect:
            self.no_effect_steps += 1
        if parsed.format is not None:
            self.formats[parsed.format] += 1
        if parsed.agent_note:
            self.agent_notes.record(step, parsed.agent_note)
        self.dropped_keys.add(parsed.dropped_keys, parsed.dropped_unnamed)
        self.adjustments.update(parsed.adjustments)

    def _record(
        self,
        step: int,
        received: str | None,
        parsed: ParsedAction,
        agent_ms: float,
        sim_ms: float,
        events: list[MilestoneEvent],
        sim_step: SimStep,
    ) -> StepRecord:
        applied = dict(parsed.action)
        applied["camera"] = list(applied["camera"])
        return StepRecord(
            skill=parsed.skill.model_dump(mode="json") if parsed.skill is not None else None,
            skill_outcome=sim_step.skill.model_dump(mode="json") if sim_step.skill is not None else None,
            step=step,
            t=round(time.time(), 3),
            received=truncate_received(received),
            applied=applied,
            noop_cause=parsed.noop_cause,
            reason=parsed.reason or (parsed.agent_note or ""),
            dropped_keys=parsed.dropped_keys,
            dropped_unnamed=parsed.dropped_unnamed,
            adjustments=parsed.adjustments,
            action_format=parsed.format,
            agent_ms=round(agent_ms, 3),
            sim_ms=round(sim_ms, 3),
            reward=sum(event.reward for event in events),
            events=[event.model_dump() for event in events],
            no_effect=sim_step.no_effect,
            done=sim_step.done,
            info=_json_safe(sim_step.info),
        )

    def _progress(self, tracker: RewardTracker) -> TaskProgress:
        return TaskProgress(
            task=self.task.name,
            steps_done=self.steps_run,
            max_steps=self.settings.max_steps,
            reward=tracker.sim_reward,
            max_reward=tracker.max_reward,
            reached=len(tracker.reached),
            total=len(tracker.entries),
            noops=sum(stats.count for stats in self.noops.values()),
        )

    def _finish_recording(self) -> Recording | None:
        """The simulator's recording of this task, written out; a failure to write it is said in the result
        (recording_problem), and video evaluation then grades the observation frames."""
        try:
            return self.sim.finish_recording()
        except Exception as error:  # the episode's result stands without its video
            self.recording_problem = f"the recording could not be written ({type(error).__name__}: {error})"
            return None

    async def _evaluate_video(
        self, tracker: RewardTracker, log: StepLog, recording: Recording | None
    ) -> VideoEvaluation:
        """Grade the simulator's recording of the render when there is one (as MCU does), else the observation
        frames the step log saved."""
        from mcu_arms.green.video_eval import evaluate_video

        return await asyncio.to_thread(
            evaluate_video,
            self.task,
            None if recording is not None else log.frames_dir,
            recording,
            enabled=self.settings.video_eval,
            env=self.settings.env,
            model=self.settings.video_model,
            needed=not tracker.is_perfect(),
            reached=set(tracker.reached),
            auto_eval_dir=self.settings.auto_eval_dir,
        )

    def _metrics(
        self, tracker: RewardTracker, video: VideoEvaluation, log: StepLog, started_at: str, duration_s: float
    ) -> TaskMetrics:
        from mcu_arms.green.scoring import score_task

        score: TaskScore = score_task(self.task, tracker, video)
        scored, value, source = score.scored, score.score, score.score_source
        if self.error is not None:  # an episode cut short by infrastructure is not a result
            scored, value, source = False, None, "unscored"
        return TaskMetrics(
            max_score=score.max_score,
            sim_score=score.sim_score,
            normalised_sim_score=score.normalised_sim_score,
            score=value,
            **dict(score.criteria),
            category=self.task.category,
            scoring_kind=score.scoring_kind,
            scored=scored,
            score_source=source,
            milestones=score.milestones,
            milestones_available=score.milestones_available,
            milestones_total=score.milestones_total,
            sim_reward=tracker.sim_reward,
            max_reward=tracker.max_reward,
            reward_events=[event.model_dump() for event in tracker.events],
            steps_run=self.steps_run,
            max_steps=self.settings.max_steps,
            ended_by=self.ended_by,
            noops=dict(self.noops),
            agent_reported_noops=self.agent_notes if self.agent_notes.count else None,
            noop_total=sum(stats.count for stats in self.noops.values()),
            dropped_keys=self.dropped_keys.kept(),
            action_adjustments=dict(sorted(self.adjustments.items())),
            action_formats=dict(sorted(self.formats.items())),
            sim_fallbacks=self.sim.fallback_counts(),
            unavailable_entries=sorted(tracker.unavailable),
            unavailable_reasons=dict(sorted(self.support.reasons.items())),
            sim_restarts=self.sim.restarts(),
            init=self.init,
            video=VideoResult(
                status=video.status,
                reason=video.reason,
                task_progress=video.task_progress,
                model=video.model,
                rubric=video.rubric,
                graded_frames=video.graded_frames,
                recording_problem=self.recording_problem,
            ),
            agent_latency=LatencyStats.of(self.agent_ms),
            sim_step_ms_mean=round(sum(self.sim_ms) / len(self.sim_ms), 3) if self.sim_ms else None,
            duration_s=round(duration_s, 3),
            started_at=started_at,
            finished_at=iso_seconds(),
            error=self.error,
            steps_log=str(log.path),
            frames_dir=str(log.frames_dir) if log.frames_dir is not None else None,
            infrastructure_noops=self.infrastructure_noops,
            longest_infrastructure_run=self.longest_infrastructure_run,
            agent_failures=self.agent_failures.kept(),
            no_effect_steps=self.no_effect_steps,
        )


async def run_off_loop(run: TaskRun, worker: Executor, emit: EventSink) -> TaskMetrics:
    """Run `run` on `worker` (the evaluation's simulator thread) in an event loop of its own.

    `emit` runs on the calling loop; the run's events are relayed to it in order. Canceling the caller asks the run
    to stop at its next step and waits for it, so the simulator is never used by two threads at once.
    """
    caller_loop = asyncio.get_running_loop()

    async def relay(event: GreenEvent) -> None:
        if not run.stop_requested.is_set():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(emit(event), caller_loop))

    run.emit = relay
    running = caller_loop.run_in_executor(worker, asyncio.run, run.run())
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        run.stop_requested.set()
        await asyncio.wait([running])
        raise
