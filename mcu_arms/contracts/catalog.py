"""The fixed vocabularies every layer agrees on: categories, agent kinds, reset modes, and MCU's step budget (the
simulators are described in contracts/simulators.py)."""

from __future__ import annotations

from typing import Literal, get_args

CATEGORIES: tuple[str, ...] = (
    "building",
    "combat",
    "crafting",
    "decoration",
    "ender_dragon",
    "explore",
    "find",
    "mine_diamond_from_scratch",
    "mining_and_collecting",
    "motion",
    "tool_use",
    "trapping",
)

LONG_TERM_CATEGORIES: frozenset[str] = frozenset({"mine_diamond_from_scratch", "ender_dragon"})
STANDARD_MAX_STEPS = 1200
LONG_TERM_MAX_STEPS = 12000

AGENT_KINDS: tuple[str, ...] = ("worldmodel", "prolong", "steve1", "scripted", "planned", "random", "noop")
# The agent kind of a purple that is another program's A2A server, started by its own command or reached at its
# address ([purple] in the arm file): no Policy of ours.
A2A_AGENT = "a2a"
CODEX_AGENTS: frozenset[str] = frozenset({"worldmodel", "prolong"})
# The built-in agents that read the frame's pixels (the baselines ignore it).
FRAME_READING_AGENTS: frozenset[str] = frozenset({"worldmodel", "prolong", "steve1", "scripted"})
# The agents that read the structured state (contracts/game_state.py) instead of the frame.
STATE_AGENTS: frozenset[str] = frozenset({"planned"})
# Agents driven by a planner and a policy model (their reports count decisions, invalid outputs, model latencies).
PLANNED_AGENTS: frozenset[str] = frozenset({"planned"})
# Why an agent plays one simulator only (which one: that simulator's descriptor names it among its native agents).
ONE_SIMULATOR_AGENTS: dict[str, str] = {"scripted": "plays Crafter frames", "steve1": "is a Minecraft policy"}

DEFAULT_SIMULATOR = "minestudio"  # an arm file's, and an evaluation request's, when it names none

# How the MineStudio backend starts each task, both a function of (seed, task) only:
# "hard": a new world from the seed for every task (exactly where a fresh seeded run of that task starts);
# "seeded_fast": one world per simulator instance, each task cleaned up (/kill, time, weather, entities) and
# teleported to a biome and point derived from (seed, task): cheaper, but the world keeps what earlier tasks did.
ResetMode = Literal["hard", "seeded_fast"]
RESET_MODES: tuple[str, ...] = get_args(ResetMode)
DEFAULT_RESET_MODE: ResetMode = "hard"

# How the MineStudio backend applies an agent's action, whatever format it came in:
# "agent": as upstream MCU-AgentBeats' green does, through MineStudio's agent action mode (env and expanded actions are
# turned into the compact joint action first: camera quantised to 11 mu-law bins per axis within ±10 degrees,
# forward+back and left+right cancel, the later key of a group wins, inventory alone and without camera);
# "env": env action mode, the camera exact up to ±180 degrees and the keys as sent (not MCU's action semantics).
ActionMode = Literal["agent", "env"]
ACTION_MODES: tuple[str, ...] = get_args(ActionMode)
DEFAULT_ACTION_MODE: ActionMode = "agent"


def default_max_steps(category: str) -> int:
    """MCU's step budget: long-term categories get 12,000 steps, the rest 1,200."""
    return LONG_TERM_MAX_STEPS if category in LONG_TERM_CATEGORIES else STANDARD_MAX_STEPS


def capped_steps(category: str, requested: int | None) -> tuple[int, str | None]:
    """The steps MCU runs for `requested` (None: its default), and a note when its 1,200-step cap cut them.

    Standard categories are capped at 1,200 steps as MCU does; long-term ones are not. The planner and the green
    agent both ask this one function.
    """
    steps = requested or default_max_steps(category)
    if category not in LONG_TERM_CATEGORIES and steps > STANDARD_MAX_STEPS:
        note = f"steps {steps} capped at {STANDARD_MAX_STEPS} for the standard category '{category}', as MCU does"
        return STANDARD_MAX_STEPS, note
    return steps, None
