"""The `planned` purple agent: seed 002's planner, policy, action runner and damage reflex on structured state.

Each step's observation carries a GameState (the arm observes `state`). In order, every step:
1. a background planner answer that has arrived is applied (or discarded as stale);
2. the reflex: a health drop interrupts the running action at once, locally, before any model is asked, and the
   agent enters its threat loop; the interruption and its latency are logged;
3. the running high-level action gives this step's simulator action, unless it is done;
4. at a decision point the action runner offers candidates (threat: fight / flee / go home; recovery; vitals; the plan
   step), the policy chooses one, the choice is validated (else the action runner's own first choice, counted), and the
   chosen action starts.
Models are asked only at decision points and for plans, never every step. Every action ends as one trajectory line
(contracts/trajectory.py); the counters go to `planned_report.json` (contracts/agent_report.py).
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from mcu_arms.contracts.agent_report import PlannedEpisode, PlannedSettings, summarise_planned
from mcu_arms.contracts.crafter_keymap import env_action_for
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.game_state import GameState
from mcu_arms.contracts.planned import (
    DEFAULT_PLANNER_TIMEOUT_S,
    DEFAULT_POLICY_BACKEND,
    DEFAULT_POLICY_TIMEOUT_S,
    MAX_CANDIDATES,
    Decision,
    PlanStep,
)
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.skills import SkillOutcome, SkillRequest
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.contracts.trajectory import (
    TRAJECTORY_FILE,
    ActionResult,
    CandidateAction,
    ModelInfo,
    Phase,
    ReflexInterruption,
    TrajectoryRecord,
)
from mcu_arms.contracts.wire import MAX_SAY_LINES, AckPayload, ActionPayload, InitPayload, ObservationPayload
from mcu_arms.layout import claim_task_dir
from mcu_arms.process.procs import log_line
from mcu_arms.purple.base import Policy, failure_noop
from mcu_arms.purple.planned.action_runner import ActionRunner
from mcu_arms.purple.planned.models import ChatModel, DecisionService, ModelCallFailed
from mcu_arms.purple.planned.planner import PlanTracker
from mcu_arms.purple.planned.policy import ChatPolicy, DecisionServicePolicy, InvalidDecision, validate_decision
from mcu_arms.purple.planned.running import Outcome, RunningAction
from mcu_arms.purple.report_writer import write_episode_reports

RUN_ID = uuid.uuid4().hex  # one purple process: one arm run
KIND = "planned"
DECISIONS_PER_STEP = 3  # actions that end at once (nothing to do) may chain this many decisions in one step
REPORT_EVERY_ACTIONS = 25


@dataclass
class _Decided:
    """What a running action was decided on, kept until its trajectory line is written."""

    state: GameState
    candidates: list[CandidateAction]
    decision: Decision
    latency_ms: float | None
    invalid: str | None
    phase: Phase
    subgoal: PlanStep | None
    reflex: ReflexInterruption | None  # the interruption this decision answered, if any


@dataclass
class _Running:
    action: RunningAction
    decided: _Decided


def planned_settings(options: PurpleOptions) -> PlannedSettings:
    """The options the planned agent needs, or a UserError naming the missing flag."""
    for flag in ("planner_base_url", "planner_model", "policy_base_url", "policy_model"):
        if getattr(options, flag) is None:
            raise UserError(f"the planned agent needs --{flag.replace('_', '-')}", key=f"--{flag.replace('_', '-')}")
    if options.output_dir is None:
        raise UserError("the planned agent needs a directory for its trajectories and report", key="--output-dir")
    given = options.model_dump(include=set(PlannedSettings.model_fields))
    given["planner_timeout"] = options.planner_timeout or DEFAULT_PLANNER_TIMEOUT_S
    given["policy_backend"] = options.policy_backend or DEFAULT_POLICY_BACKEND
    given["policy_timeout"] = options.policy_timeout or DEFAULT_POLICY_TIMEOUT_S
    return PlannedSettings(**given)


def _key(variable: str | None, environ: Mapping[str, str], flag: str) -> str | None:
    if variable is None:
        return None
    value = environ.get(variable)
    if not value:
        raise UserError(f"the API key variable {variable} is not set (or empty) in the purple's environment", key=flag)
    return value


class PlannedPolicy(Policy):
    """One episode of the planned agent; constructed by the server per A2A context (cheap: no network here)."""

    def __init__(self, options: PurpleOptions, environ: Mapping[str, str] | None = None) -> None:
        self.options = options
        self.settings = planned_settings(options)
        environ = os.environ if environ is None else environ
        self._planner_key = _key(self.settings.planner_env_key, environ, "--planner-env-key")
        self._policy_key = _key(self.settings.policy_env_key, environ, "--policy-env-key")
        self.output_dir: Path = options.output_dir  # type: ignore[assignment]
        self.episode: PlannedEpisode | None = None
        self._reset()

    def _reset(self) -> None:
        self.goal = ""
        self.episode_id = uuid.uuid4().hex
        self.rng = random.Random(self.options.seed)
        self.task_dir: Path | None = None
        self._trajectory: IO[str] | None = None
        self._planner: ChatModel | None = None
        self._policy: DecisionServicePolicy | ChatPolicy | None = None
        self.tracker: PlanTracker | None = None
        self.action_runner: ActionRunner | None = None
        self.running: _Running | None = None
        self.last_health: float | None = None
        self.threat_mode = False
        self.pending_reflex: ReflexInterruption | None = None
        self.refused: str | None = None  # why init refused the episode: every step then says so
        self.world_seed: int | None = None
        self.said: list[str] = []  # chat lines tagged by source, sent with the next action (ActionPayload.say)
        self._plan_shown: object = None
        self._warned: set[str] = set()

    # --- the episode ---------------------------------------------------------------------------------------------
    async def init(self, payload: InitPayload) -> AckPayload:
        await self._close_episode()
        self._reset()
        self.goal = payload.text
        self.world_seed = payload.world_seed
        self.task_dir = claim_task_dir(self.output_dir)
        self._trajectory = (self.task_dir / TRAJECTORY_FILE).open("x", encoding="utf-8")
        self.episode = PlannedEpisode(
            task_dir=str(self.task_dir),
            task=payload.text,
            started_at=iso_seconds(),
            trajectory=str((self.task_dir / TRAJECTORY_FILE).relative_to(self.output_dir)),
            world_seed=payload.world_seed,
            world_seed_unknown=None
            if payload.world_seed is not None
            else (payload.world_seed_unknown or "the green sent no world seed (a green that predates the field)"),
        )
        settings = self.settings
        self._planner = ChatModel(
            "planner",
            settings.planner_base_url,
            settings.planner_model,
            self._planner_key,
            settings.planner_timeout,
            settings.planner_thinking,
        )
        try:
            await self._planner.check_served()
            if settings.policy_backend == "decision_service":
                service = DecisionService(
                    settings.policy_base_url,
                    settings.policy_model,
                    settings.policy_revision,
                    self._policy_key,
                    settings.policy_timeout,
                )
                self._policy = DecisionServicePolicy(service)
                self.settings = settings.model_copy(update={"policy_served": await service.check_revision()})
            else:
                chat = ChatModel(
                    "policy",
                    settings.policy_base_url,
                    settings.policy_model,
                    self._policy_key,
                    settings.policy_timeout,
                    settings.policy_thinking,
                )
                self._policy = ChatPolicy(chat)
                await chat.check_served()
        except ModelCallFailed as failure:
            return self._refuse(f"{failure.cause}: {failure}")
        self._write_report()
        return AckPayload(
            message=f"planned agent ready: planner {settings.planner_model}, policy "
            f"{settings.policy_model} ({settings.policy_backend})"
        )

    def _refuse(self, reason: str) -> AckPayload:
        self.refused = f"planned agent cannot start: {reason}"
        self._warn(reason)
        self._write_report()
        return AckPayload(success=False, message=self.refused)

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        received = time.perf_counter()
        state, step = payload.state, payload.step
        if self.episode is None:
            return failure_noop("no_init", "no init received")
        if self.refused is not None:
            return failure_noop("agent_unavailable", self.refused)
        self.episode.observations += 1
        if state is None:
            return failure_noop(
                "bad_observation", 'the planned agent reads structured state: the arm needs observe = "state"'
            )
        if self.action_runner is None:
            if state.capabilities is None:
                return failure_noop("bad_observation", "the state carries no capability list")
            try:
                self.action_runner = ActionRunner(state.capabilities, self.rng)
            except ValueError as error:
                return failure_noop("agent_unavailable", self._refuse(str(error)).message)
            self.episode.capabilities = state.capabilities
            assert self._planner is not None  # init made it before acknowledging
            self.tracker = PlanTracker(self._planner, self.goal, state.capabilities, self.episode, self._warn)
            await self.tracker.first(state)
        assert self.tracker is not None  # made with the executor, on the first observation
        self.tracker.poll()
        self._say_plan()
        self.action_runner.last_skill = payload.last_skill
        self._reflex(state, step, received, payload.last_skill)
        for _ in range(DECISIONS_PER_STEP):
            if self.running is not None:
                action = self.running.action.next(state)
                if isinstance(action, SkillRequest):
                    return ActionPayload(action_type="skill", skill=action, say=self._take_said())
                if isinstance(action, str):
                    return ActionPayload(action_type="env", action=env_action_for(action), say=self._take_said())
                self._end_action(action, state, step)
            await self._decide(state, step)
        return ActionPayload(action_type="env", action=env_action_for("noop"), say=self._take_said())

    # --- chat ----------------------------------------------------------------------------------------------------
    def _take_said(self) -> list[str] | None:
        said, self.said = self.said[-MAX_SAY_LINES:], []
        return said or None

    def _say_plan(self) -> None:
        """A plan newly accepted (or reworded) is announced once, as the planner's."""
        plan = self.tracker.plan if self.tracker is not None else None
        if plan is None or plan is self._plan_shown:
            return
        self._plan_shown = plan
        steps = ", ".join(f"{step.method} {step.item} {step.count}" for step in plan.steps)
        self.said.append(f"[planner] plan: {steps}")

    async def close(self) -> None:
        await self._close_episode()

    async def _close_episode(self) -> None:
        if self.tracker is not None:
            await self.tracker.close()
        for client in (self._planner, self._policy):
            if client is not None:
                await client.close()
        self._planner = self._policy = None
        if self._trajectory is not None:
            self._trajectory.close()
            self._trajectory = None
        if self.episode is not None:
            self._write_report()
            log_line(
                f"planned episode {self.episode.task!r}: {self.episode.actions} actions, {self.episode.decisions} "
                f"decisions, invalid outputs {dict(self.episode.invalid_outputs)}, model failures "
                f"{dict(self.episode.model_failures)}, reflex interrupts {self.episode.reflex_interrupts}"
            )
            self.episode = None

    # --- the reflex ----------------------------------------------------------------------------------------------
    def _reflex(self, state: GameState, step: int, received: float, skill: SkillOutcome | None) -> None:
        """A health drop stops the running action now, before anything waits on a model. On a simulator that takes
        skills, its own reflex stopped the skill at the damage already: how long that took is kept beside."""
        assert self.episode is not None  # act returns before a reflex when init never came
        health, before = state.vitals.health.value, self.last_health
        self.last_health = health
        if before is None or health >= before:
            return
        running = self.running
        outcome = running.action.interrupt(state) if running is not None else None
        reflex = ReflexInterruption(
            observed_step=step,
            interrupted_step=step,
            health_before=before,
            health_after=health,
            interrupted_action=running.action.candidate.id if running is not None else None,
            latency_ms=round((time.perf_counter() - received) * 1000, 3),  # stopped, and no model was waited on
            threats=sorted({e.kind for e in state.entities or [] if e.hostile}),
            simulator_stop_ms=skill.stopped_after_damage_ms if skill is not None else None,
        )
        self.threat_mode = True
        stopped = f", stopped {reflex.interrupted_action}" if reflex.interrupted_action else ""
        self.said.append(f"[reflex] health {before:g} -> {health:g}{stopped}")
        self.episode.reflex_interrupts += 1
        self.episode.reflex_latency_ms_max = max(self.episode.reflex_latency_ms_max or 0.0, reflex.latency_ms)
        if outcome is not None:
            self._end_action(outcome, state, step, reflex=reflex)
        else:
            self.pending_reflex = reflex  # shown on the line of the decision it led to

    # --- deciding ------------------------------------------------------------------------------------------------
    def _candidates(self, state: GameState, step: int) -> tuple[list[CandidateAction], Phase, PlanStep | None]:
        action_runner, tracker = self.action_runner, self.tracker
        assert action_runner is not None and tracker is not None  # act made both before the first decision
        if self.threat_mode or action_runner.threatened(state):
            if action_runner.threatened(state):
                self.threat_mode = True
                return action_runner.threat(state), "threat", None
            if not action_runner.healthy(state):
                return action_runner.recovery(state), "recovery", None
            self.threat_mode = False  # the threat is gone and health allows: back to work, candidates re-checked
        survival = action_runner.survival(state)
        subgoal = tracker.current(state, step)
        work = action_runner.for_step(subgoal, state) if subgoal is not None else action_runner.explore()
        offered = survival + [c for c in work if c.id not in {s.id for s in survival}]
        phase: Phase = "survival" if survival else ("plan" if subgoal is not None else "no_plan")
        return offered[:MAX_CANDIDATES], phase, subgoal

    async def _decide(self, state: GameState, step: int) -> None:
        candidates, phase, subgoal = self._candidates(state, step)
        ids = [candidate.id for candidate in candidates]
        assert self.episode is not None and self.action_runner is not None  # act checked both before deciding
        self.episode.decisions += 1
        decision, latency, invalid = await self._choose(state, candidates, phase, subgoal)
        if decision.source == "fallback":
            self.episode.fallbacks += 1
        if latency is not None:
            self.episode.decision_latency_ms.append(latency)
        chosen = candidates[ids.index(decision.choice)]
        chance = decision.probabilities.get(decision.choice)
        by = "policy" if decision.source == "policy" else f"action runner ({decision.source})"
        self.said.append(f"[policy] {phase}: {chosen.id}" + (f" p={chance:.2f}" if by == "policy" else f" by the {by}"))
        reflex, self.pending_reflex = self.pending_reflex, None
        decided = _Decided(state, candidates, decision, latency, invalid, phase, subgoal, reflex)
        self.running = _Running(self.action_runner.start(chosen, state, step), decided)

    async def _choose(
        self, state: GameState, candidates: list[CandidateAction], phase: Phase, subgoal: PlanStep | None
    ) -> tuple[Decision, float | None, str | None]:
        """The policy's validated choice, or the action runner's first candidate (a single candidate needs no model)."""
        ids = [candidate.id for candidate in candidates]
        fallback = Decision(choice=ids[0], probabilities={i: float(i == ids[0]) for i in ids}, source="fallback")
        if len(ids) == 1:
            return fallback.model_copy(update={"source": "only_candidate"}), None, None
        context = {
            "goal": self.goal,
            "subgoal": subgoal.model_dump() if subgoal is not None else None,
            "phase": phase,
            "state": state.model_dump(mode="json", exclude={"capabilities"}, exclude_none=True),
        }
        assert self.episode is not None and self._policy is not None  # init made both before acknowledging
        self.episode.policy_calls += 1
        try:
            answer, latency = await self._policy.ask(context, candidates)
        except ModelCallFailed as failure:
            self.episode.model_failures[failure.cause] += 1
            self._warn(f"{failure.cause}: {failure}; decisions fall back to the action runner's first choice")
            return fallback, None, None
        try:
            return validate_decision(answer, ids), latency, None
        except InvalidDecision as invalid:
            self.episode.invalid_outputs["invalid_policy_output"] += 1
            self.episode.invalid_reasons[f"invalid_policy_output: {invalid.code}"] += 1
            self._warn(f"invalid_policy_output: {invalid}")
            return fallback, latency, f"{invalid.code}: {invalid}"

    # --- logging -------------------------------------------------------------------------------------------------
    def _end_action(
        self, outcome: Outcome, state: GameState, step: int, reflex: ReflexInterruption | None = None
    ) -> None:
        running, self.running = self.running, None
        if running is None:
            return
        action, decided = running.action, running.decided
        assert self.episode is not None and self._trajectory is not None  # init opened both
        self.episode.actions += 1
        self.episode.action_statuses[outcome.status] += 1
        if outcome.status == "action_needs_replan" and self.tracker is not None:
            self.tracker.request("replan", state, f"{action.candidate.id} was interrupted: {outcome.detail}")
        settings = self.settings
        record = TrajectoryRecord(
            run_id=RUN_ID,
            episode_id=self.episode_id,
            step=action.started_step,
            end_step=step,
            world_seed=self.world_seed,
            goal=self.goal,
            subgoal=decided.subgoal,
            phase=decided.phase,
            planner=ModelInfo(backend="chat", model=settings.planner_model, revision=settings.planner_revision),
            policy=ModelInfo(
                backend=settings.policy_backend, model=settings.policy_model, revision=settings.policy_revision
            ),
            state=decided.state.model_copy(update={"capabilities": None}),
            available_actions=decided.candidates,
            selected_action=decided.decision.choice,
            action_probabilities=decided.decision.probabilities,
            decision_source=decided.decision.source,
            invalid_output=decided.invalid,
            action_status=outcome.status,
            result=ActionResult(inventory_delta=outcome.inventory_delta, steps=outcome.steps, detail=outcome.detail),
            next_state=state.model_copy(update={"capabilities": None}),
            planner_latency_ms=self.tracker.take_latency() if self.tracker is not None else None,
            decision_latency_ms=decided.latency_ms,
            action_duration_ms=round((time.perf_counter() - action.started_at) * 1000, 3),
            reflex=reflex or decided.reflex,
        )
        self._trajectory.write(record.model_dump_json() + "\n")
        self._trajectory.flush()
        if self.episode.actions % REPORT_EVERY_ACTIONS == 0:
            self._write_report()

    def _warn(self, message: str) -> None:
        """Each kind of trouble once per episode in the report (the supervisor raises it as an alert), all in the
        log."""
        log_line(f"planned: {message}")
        kind = message.split(":", 1)[0]
        if self.episode is not None and kind not in self._warned:
            self._warned.add(kind)
            self.episode.warnings.append(message)

    def _write_report(self) -> None:
        if self.episode is None or self.task_dir is None:
            return
        write_episode_reports(
            self.output_dir,
            self.task_dir,
            self.episode,
            KIND,
            lambda episodes: summarise_planned(self.settings, episodes),
        )


def make_policy(options: PurpleOptions) -> Policy:
    return PlannedPolicy(options)
