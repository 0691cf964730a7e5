"""The planner: a goal into ordered steps, validated against the simulator's capabilities, kept while it works.

The plan contract is in contracts/planned.py. An invalid plan is rejected with its reasons and asked again (the
model sees why). Once accepted, a plan is worked down by a cursor: the step under it is judged against the real
inventory each time it is reached, and skipped when already satisfied. Re-plans run in the background while the
accepted plan keeps executing: one that arrives after its step has passed is discarded as stale, and one that
changes any accepted step's method, item or count (or their order) is rejected; only the wording may change.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from mcu_arms.contracts.agent_report import PlannedEpisode
from mcu_arms.contracts.errors import validation_summary
from mcu_arms.contracts.game_state import PLAN_METHODS, Capabilities, GameState
from mcu_arms.contracts.planned import MAX_PLAN_STEPS, PLAN_ATTEMPTS, Plan, PlanStep
from mcu_arms.purple.planned.models import ChatModel, ModelCallFailed
from mcu_arms.purple.planned.policy import strip_fence

RequestKind = Literal["replan", "next"]
NO_PLAN_RETRY_STEPS = 100  # without a plan, ask again this many steps after the last attempt failed

METHODS = " | ".join(f'"{method}"' for method in PLAN_METHODS)
PLANNER_PROMPT = f"""You plan short goals for a game agent. Return only a JSON object:
{{"goal": "...", "steps": [{{"subgoal": "...", "method": {METHODS}, "item": "...", "count": N}}]}}
Rules: 1 to {MAX_PLAN_STEPS} ordered steps. `count` is the minimum number held when the step is complete (for place:
placed blocks in view), between 1 and the inventory cap. Earlier materials may be consumed by later steps, so plan
enough of them, and include the prerequisites (tools, crafting stations). Use only a (method, item) pair listed in
capabilities.recipes; capabilities.aliases maps other names onto those items. If context.accepted_steps is given,
keep every step's method, item and count, and their order, exactly: you may only reword the subgoals."""


class PlanRejected(ValueError):
    """Why a planner answer is not an acceptable plan; the message goes back to the model."""


def parse_plan(text: str, capabilities: Capabilities) -> Plan:
    """A planner answer as a Plan whose every item and method the simulator can carry out (names normalised)."""
    try:
        data = json.loads(strip_fence(text))
    except json.JSONDecodeError as error:
        raise PlanRejected(f"not a JSON object ({error.msg} at character {error.pos})") from None
    try:
        plan = Plan.model_validate(data)
    except ValidationError as error:
        raise PlanRejected(f"not a plan: {validation_summary(error, limit=3)}") from None
    recipes = {(recipe.method, recipe.item) for recipe in capabilities.recipes}
    problems, steps = [], []
    for number, step in enumerate(plan.steps, start=1):
        item = capabilities.aliases.get(step.item, step.item)
        if (step.method, item) not in recipes:
            ways = sorted(method for method, known in recipes if known == item)
            if not ways and item not in capabilities.items:
                problems.append(f"step {number}: unknown item '{step.item}'")
            else:
                how = f" (it is obtained by: {', '.join(ways)})" if ways else ""
                problems.append(f"step {number}: this simulator cannot {step.method} '{step.item}'{how}")
        if capabilities.inventory_cap is not None and step.count > capabilities.inventory_cap:
            problems.append(
                f"step {number}: count {step.count} is above the inventory cap {capabilities.inventory_cap}"
            )
        steps.append(step.model_copy(update={"item": item}))
    if problems:
        raise PlanRejected("; ".join(problems))
    return plan.model_copy(update={"steps": steps})


def satisfied(step: PlanStep, state: GameState) -> bool:
    """Judged from the real state each time: held items, or (place) blocks of that kind in view."""
    if step.method == "place":
        view = state.view
        return view is not None and step.item in view.tiles and view.tiles[step.item].count >= step.count
    return state.count(step.item) >= step.count


@dataclass
class _Answer:
    kind: RequestKind
    plan: Plan | None
    latency_ms: float | None


class PlanTracker:
    """The accepted plan, its cursor, and at most one background planner request at a time."""

    def __init__(
        self,
        chat: ChatModel,
        goal: str,
        capabilities: Capabilities,
        episode: PlannedEpisode,
        warn: Callable[[str], None],
    ) -> None:
        self.chat = chat
        self.goal = goal
        self.capabilities = capabilities
        self.episode = episode
        self.warn = warn
        self.plan: Plan | None = None
        self.cursor = 0
        self.revision = 0  # moves on with every step passed: an answer asked at another revision is stale
        self.pending: asyncio.Task[_Answer] | None = None
        self.retry_at_step = 0
        self.latency_ms: float | None = None  # of the call behind the plan in force, until a trajectory line shows it

    # --- asking ------------------------------------------------------------------------------------------------
    async def first(self, state: GameState) -> None:
        """The opening plan, waited for: there is nothing to work on before it."""
        plan, latency = await self._ask(state, {}, kind="invalid_plan")
        self._adopt(plan, latency)

    def request(self, kind: RequestKind, state: GameState, reason: str) -> None:
        """Ask in the background; the accepted plan keeps executing meanwhile."""
        if self.pending is not None:
            return
        context: dict[str, Any] = {"reason": reason}
        accepted = None
        if kind == "replan" and self.plan is not None:
            context["accepted_steps"] = [step.model_dump() for step in self.plan.steps]
            context["current_step"] = self.cursor
            accepted = [step.contract() for step in self.plan.steps]
        elif self.plan is not None:
            context["completed_steps"] = [step.model_dump() for step in self.plan.steps]
        asked_at = self.revision

        async def ask() -> _Answer:
            invalid = "invalid_replan" if kind == "replan" else "invalid_plan"
            plan, latency = await self._ask(state, context, kind=invalid, accepted=accepted, asked_at=asked_at)
            return _Answer(kind=kind, plan=plan, latency_ms=latency)

        self.pending = asyncio.ensure_future(ask())

    async def _ask(
        self,
        state: GameState,
        context: dict[str, Any],
        *,
        kind: str,
        accepted: list[tuple[str, str, int]] | None = None,
        asked_at: int | None = None,
    ) -> tuple[Plan | None, float | None]:
        """Ask until a valid plan comes (a re-plan: once). A background answer whose step has passed meanwhile is
        stale: discarded before anything else is made of it."""
        question = {
            "goal": self.goal,
            "state": state.model_dump(mode="json", exclude={"capabilities"}, exclude_none=True),
            "capabilities": {
                "recipes": [
                    recipe.model_dump(exclude_defaults=True)
                    for recipe in self.capabilities.recipes
                    if recipe.item in self.capabilities.items or recipe.method == "place"
                ],
                "aliases": self.capabilities.aliases,
                "inventory_cap": self.capabilities.inventory_cap,
            },
            "context": context,
        }
        messages = [{"role": "system", "content": PLANNER_PROMPT}, {"role": "user", "content": json.dumps(question)}]
        for _ in range(1 if accepted is not None else PLAN_ATTEMPTS):
            self.episode.planner_calls += 1
            try:
                text, latency = await self.chat.complete(messages)
            except ModelCallFailed as failure:
                self.episode.model_failures[failure.cause] += 1
                self.warn(f"{failure.cause}: {failure}")
                return None, None
            self.episode.planner_latency_ms.append(latency)
            if asked_at is not None and asked_at != self.revision:
                self.episode.stale_replans += 1
                return None, None
            try:
                plan = parse_plan(text, self.capabilities)
                offered = [step.contract() for step in plan.steps]
                if accepted is not None and offered != accepted:
                    raise PlanRejected(f"a re-plan changed the accepted steps {accepted} into {offered}")
                return plan, latency
            except PlanRejected as rejection:
                self.episode.invalid_outputs[kind] += 1
                self.episode.invalid_reasons[f"{kind}: {rejection}"] += 1
                self.warn(f"{kind} rejected: {rejection}")
                messages += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"Rejected: {rejection}. Answer again, following the rules."},
                ]
        return None, None

    # --- using -------------------------------------------------------------------------------------------------
    def poll(self) -> None:
        """Apply a background answer that has arrived (at the start of a step, never in the middle of one)."""
        if self.pending is None or not self.pending.done():
            return
        task, self.pending = self.pending, None
        if task.cancelled() or task.result().plan is None:
            return
        answer = task.result()
        if answer.kind == "replan" and self.plan is not None and answer.plan is not None:
            self.plan = self.plan.model_copy(update={"steps": answer.plan.steps})  # same contract, new wording
            self.episode.replans_accepted += 1
            self.latency_ms = answer.latency_ms
            return
        self._adopt(answer.plan, answer.latency_ms)

    def _adopt(self, plan: Plan | None, latency: float | None) -> None:
        if plan is None:
            return
        self.plan, self.cursor = plan, 0
        self.revision += 1
        self.episode.plans_accepted += 1
        self.latency_ms = latency

    def current(self, state: GameState, step: int) -> PlanStep | None:
        """The step to work on: steps already satisfied are passed (each pass asks for a re-plan in the background);
        with the plan done or missing, a next plan is asked for (again every NO_PLAN_RETRY_STEPS while none comes)."""
        passed = False
        while (
            self.plan is not None
            and self.cursor < len(self.plan.steps)
            and satisfied(self.plan.steps[self.cursor], state)
        ):
            self.cursor += 1
            self.revision += 1
            passed = True
        if self.plan is None or self.cursor >= len(self.plan.steps):
            if self.pending is None and step >= self.retry_at_step:
                self.retry_at_step = step + NO_PLAN_RETRY_STEPS
                reason = "no plan yet" if self.plan is None else "every step is done; the goal may need more"
                self.request("next", state, reason)
            return None
        if passed:
            self.request("replan", state, f"step {self.cursor} of the plan is reached")
        return self.plan.steps[self.cursor]

    def take_latency(self) -> float | None:
        latency, self.latency_ms = self.latency_ms, None
        return latency

    async def close(self) -> None:
        """Stop a background request and wait for it, so that its client is closed after it, never under it."""
        task, self.pending = self.pending, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
