"""One high-level action in progress and how it ended, shared by the keymap actions (action_runner.py) and the skill
actions (skills.py): success is the inventory delta between the state it started from and the state it ended on."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from mcu_arms.contracts.game_state import GameState, Recipe
from mcu_arms.contracts.skills import SkillOutcome, SkillRequest
from mcu_arms.contracts.trajectory import ActionStatus, CandidateAction

# Shared by the keymap actions (action_runner.py) and the skill actions (skills.py): creatures that explode, how far
# their blast reaches (steps), and the equipment slot an item goes to.
EXPLODING = frozenset({"creeper"})
BLAST_RADIUS = 7
WORN_SUFFIXES = {"_helmet": "head", "_chestplate": "torso", "_leggings": "legs", "_boots": "feet"}


def slot_for(item: str) -> str:
    if item == "shield":
        return "off-hand"
    return next((slot for suffix, slot in WORN_SUFFIXES.items() if item.endswith(suffix)), "hand")


BUDGET_STEPS = {"collect": 80, "craft": 3, "place": 12, "go_to": 30, "fight": 30, "sleep": 250, "eat": 60, "drink": 60}
DEFAULT_BUDGET_STEPS = 40


@dataclass
class Outcome:
    status: ActionStatus
    detail: str
    inventory_delta: dict[str, int]
    steps: int


def held_items(state: GameState) -> dict[str, int]:
    """Items and vitals, so that the delta shows drinking and eating as well as collecting."""
    held = dict(state.inventory)
    for name in ("health", "food", "drink", "energy"):
        gauge = getattr(state.vitals, name)
        if gauge is not None:
            held[name] = int(gauge.value)
    return held


def inventory_delta(before: GameState, after: GameState) -> dict[str, int]:
    old, new = held_items(before), held_items(after)
    return {
        item: new.get(item, 0) - old.get(item, 0)
        for item in sorted(set(old) | set(new))
        if new.get(item, 0) != old.get(item, 0)
    }


class ActionHost(Protocol):
    """What an action asks of the action runner that runs it."""

    navigator: Any  # action_runner.Navigator: walking on Crafter's keymap
    last_skill: SkillOutcome | None

    def recipe(self, method: str, item: str) -> Recipe: ...

    def nearest(self, state: GameState, kind: str) -> tuple[int, int] | None: ...

    def threatened(self, state: GameState) -> bool: ...

    def missing(self, needed: dict[str, int], state: GameState) -> str: ...

    def threats(self, state: GameState) -> list[tuple[int, int]]: ...


class RunningAction:
    """One high-level action in progress. `next(state)` is called once per step with the latest state."""

    side_effects = False

    def __init__(self, candidate: CandidateAction, action_runner: ActionHost, state: GameState, step: int) -> None:
        self.candidate = candidate
        self.action_runner = action_runner
        self.navigator = action_runner.navigator
        self.before = state
        self.started_step = step
        self.started_at = time.perf_counter()
        self.steps = 0
        self.budget = BUDGET_STEPS.get(candidate.skill, DEFAULT_BUDGET_STEPS)

    def next(self, state: GameState) -> str | SkillRequest | Outcome:
        """This step's action (a Crafter action name, or a skill request), or how the action ended."""
        if self.steps >= self.budget:
            return self.finish(state, self.timed_out_status(state), f"not done within {self.budget} steps")
        action = self.act(state)
        if not isinstance(action, Outcome):
            self.steps += 1
        return action

    def act(self, state: GameState) -> str | SkillRequest | Outcome:
        raise NotImplementedError

    def timed_out_status(self, state: GameState) -> ActionStatus:
        return "failed"

    def finish(self, state: GameState, status: ActionStatus, detail: str) -> Outcome:
        return Outcome(
            status=status, detail=detail, inventory_delta=inventory_delta(self.before, state), steps=self.steps
        )

    def interrupt(self, state: GameState) -> Outcome:
        """Stopped by the reflex. An action with side effects may or may not have happened: the next decision finds
        out from the state (`action_needs_replan`); a resumable one is offered again if it still fits."""
        status: ActionStatus = "action_needs_replan" if self.side_effects and self.steps else "interrupted"
        return self.finish(state, status, "interrupted by the damage reflex")

    def gained(self, state: GameState, item: str) -> int:
        return held_items(state).get(item, 0) - held_items(self.before).get(item, 0)
