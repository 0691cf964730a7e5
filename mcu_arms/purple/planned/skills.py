"""High-level actions on a simulator that takes skills (capabilities.actions == "skills": the mineflayer one).

Each candidate becomes ONE skill request (contracts/skills.py): collect logs, craft a table, go to a block. The
simulator runs it to its end within that one step, and the next observation shows what came of it. That is when
the action is judged — from the inventory delta and the view the state shows, never from the simulator's own
status, which is kept in the detail beside it ("the simulator said timeout"). A health drop seen on that next
observation stops the action in the agent's reflex as on any simulator; the simulator's own reflex had already
stopped the skill at the damage, and how fast is in the outcome (`stopped_after_damage_ms`).
"""

from __future__ import annotations

import math

from mcu_arms.contracts.game_state import GameState
from mcu_arms.contracts.skills import ArgValue, SkillOutcome, SkillRequest
from mcu_arms.contracts.trajectory import ActionStatus
from mcu_arms.purple.planned.running import BLAST_RADIUS, EXPLODING, Outcome, RunningAction, slot_for

EXPLORE_BLOCKS = 16  # how far one exploring walk heads off
REACHED_BLOCKS = 3  # a go_to ended this near its target has reached it
FLEE_BLOCKS = 10
WAIT_MS = 3000
MS_PER_BLOCK_COLLECTED = 20_000  # a collect's time limit: this per block wanted, plus a start
COLLECT_START_MS = 10_000
MAX_SKILL_MS = 600_000
SIDE_EFFECTS = frozenset({"craft", "smelt", "place", "equip", "eat", "deposit", "withdraw"})  # for the state to say
CLEAR_OF_BLAST = BLAST_RADIUS + 3  # how far a retreat from an exploding creature goes


class SkillAction(RunningAction):
    """One candidate, one skill request, judged on the observation after it."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.side_effects = self.candidate.skill in SIDE_EFFECTS
        self.request, self.refusal = request_for(self.action_runner, self.candidate, self.before)
        self.sent = False

    def act(self, state: GameState) -> SkillRequest | Outcome:
        if self.request is None:
            return self.finish(state, "failed", self.refusal)
        if not self.sent:
            self.sent = True
            return self.request
        status, detail = judge(self, state)
        said = simulator_said(self.action_runner.last_skill)
        return self.finish(state, status, f"{detail}; {said}" if said else detail)


def simulator_said(outcome: SkillOutcome | None) -> str:
    if outcome is None:
        return ""
    reason = f" ({outcome.reason})" if outcome.reason else ""
    return f"the simulator said {outcome.status}{reason} after {outcome.duration_ms / 1000:.1f} s"


def request_for(action_runner, candidate, state: GameState) -> tuple[SkillRequest | None, str]:
    """The skill request that carries out `candidate` now, or None and why it cannot."""
    skill, target = candidate.skill, candidate.target
    if skill == "collect":
        recipe = action_runner.recipe("collect", target or "")
        wanted = max(1, (candidate.count or 1) - state.count(recipe.item))
        limit = min(MAX_SKILL_MS, COLLECT_START_MS + MS_PER_BLOCK_COLLECTED * wanted)
        return SkillRequest(kind="collect", args={"block": recipe.source, "count": wanted}, timeout_ms=limit), ""
    if skill == "craft":
        recipe = action_runner.recipe("craft", target or "")
        return SkillRequest(kind="craft", args={"item": recipe.item, "count": recipe.yields}), ""
    if skill == "smelt":
        recipe = action_runner.recipe("smelt", target or "")
        return SkillRequest(kind="smelt", args={"item": next(iter(recipe.consumes)), "count": 1}), ""
    if skill in ("place", "eat"):
        return SkillRequest(kind=skill, args={"item": target}), ""
    if skill == "equip":
        return SkillRequest(kind="equip", args={"item": target, "destination": slot_for(target or "")}), ""
    if skill in ("deposit", "withdraw"):
        return SkillRequest(kind=skill, args={"item": target, "count": candidate.count or 1}), ""
    if skill == "go_home":
        if state.home is None or state.position is None:
            return None, "no home remembered, or no position to walk from"
        here, home = state.position, state.home
        x, y, z = (round(value, 1) for value in (here.x + home.east, here.y + (home.up or 0), here.z + home.south))
        return SkillRequest(kind="go_to", args={"x": x, "y": y, "z": z, "range": 2}), ""
    if skill == "go_to":
        kind = "entity" if any(entity.kind == target for entity in state.entities or []) else "block"
        return SkillRequest(kind="go_to", args={kind: target}), ""
    if skill == "fight":
        return SkillRequest(kind="attack", args={"entity": target}), ""
    if skill == "flee":
        hostiles = [entity.kind for entity in state.entities or [] if entity.hostile]
        exploding = next((kind for kind in hostiles if kind in EXPLODING), None)
        threat = exploding or next(iter(hostiles), None)
        distance = float(CLEAR_OF_BLAST if exploding else FLEE_BLOCKS)
        args: dict[str, ArgValue] = {"distance": distance} | ({"from": threat} if threat else {})
        return SkillRequest(kind="retreat", args=args), ""
    if skill == "explore":
        if state.position is None:
            return SkillRequest(kind="move", args={"direction": "forward", "duration_ms": 2000}), ""
        heading = action_runner.rng.uniform(0, 2 * math.pi)
        x = state.position.x + EXPLORE_BLOCKS * math.cos(heading)
        z = state.position.z + EXPLORE_BLOCKS * math.sin(heading)
        return SkillRequest(kind="go_to", args={"x": round(x, 1), "z": round(z, 1), "range": 2}), ""
    if skill == "wait":
        return SkillRequest(kind="wait", args={"duration_ms": WAIT_MS}), ""
    return None, f"the {action_runner.capabilities.simulator} simulator has no skill for {skill}"


def judge(action, state: GameState) -> tuple[ActionStatus, str]:
    """Succeeded or failed, from what the state shows after the skill (never from what the skill said)."""
    action_runner, candidate = action.action_runner, action.candidate
    skill, target = candidate.skill, candidate.target or ""
    if skill in ("collect", "craft", "smelt"):
        item = action_runner.recipe(skill, target).item
        gained = action.gained(state, item)
        return ("succeeded" if gained > 0 else "failed"), f"{item} {gained:+d}, {state.count(item)} held"
    if skill == "place":
        spent = action.gained(state, target) < 0
        seen = state.view is not None and target in state.view.tiles
        return ("succeeded" if spent and seen else "failed"), f"{target} {'placed' if spent and seen else 'not placed'}"
    if skill == "equip":
        slot = slot_for(target)
        worn = (state.equipment or {}).get(slot)
        return ("succeeded" if worn == target else "failed"), f"{slot}: {worn or 'nothing'} (read after the skill)"
    if skill in ("deposit", "withdraw"):
        moved = action.gained(state, target)
        done = moved < 0 if skill == "deposit" else moved > 0
        return ("succeeded" if done else "failed"), f"{target} {moved:+d} in the inventory"
    if skill == "go_home":
        home = state.home
        reached = home is not None and abs(home.east) + abs(home.south) <= REACHED_BLOCKS
        return ("succeeded" if reached else "failed"), "home" if reached else "not home"
    if skill == "eat":
        gained = action.gained(state, "food")
        return ("succeeded" if gained > 0 else "failed"), f"food {gained:+d}"
    if skill == "go_to":
        near = action_runner.nearest(state, target)
        reached = near is not None and abs(near[0]) + abs(near[1]) <= REACHED_BLOCKS
        return ("succeeded" if reached else "failed"), f"{'next to' if reached else 'not at'} the {target}"
    if skill == "fight":
        left = [e for e in state.entities or [] if e.kind == target and e.distance <= 6]
        return ("succeeded" if not left else "failed"), f"{len(left)} {target} near"
    if skill == "flee":
        threatened = action_runner.threatened(state)
        return ("failed" if threatened else "succeeded"), "still in reach" if threatened else "out of reach"
    if skill == "explore":
        if candidate.target:
            found = action_runner.nearest(state, target) is not None
            return ("succeeded" if found else "failed"), f"{target} {'in view' if found else 'not in view'}"
        moved = _moved(action.before, state)
        return ("succeeded" if moved >= REACHED_BLOCKS else "failed"), f"moved {moved:.0f} blocks"
    gained = action.gained(state, "health")
    return ("succeeded" if gained > 0 else "failed"), f"health {gained:+d}"


def _moved(before: GameState, after: GameState) -> float:
    if before.position is None or after.position is None:
        return 0.0
    return math.dist((before.position.x, before.position.z), (after.position.x, after.position.z))
