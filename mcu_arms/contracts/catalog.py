"""The fixed vocabularies every layer agrees on: categories, agent kinds, simulators.

Kept free of heavy imports so that `plan` and the arm validator can use it.
"""

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

EMBEDDED_CATEGORIES: frozenset[str] = frozenset(
    {"mine_diamond_from_scratch", "crafting", "mining_and_collecting", "combat"}
)

AGENT_KINDS: tuple[str, ...] = ("worldmodel", "prolong", "steve1", "scripted", "random", "noop")
CODEX_AGENTS: frozenset[str] = frozenset({"worldmodel", "prolong"})

SIMULATORS: tuple[str, ...] = ("minestudio", "embedded")


def default_max_steps(category: str) -> int:
    """MCU's step budget: long-term categories get 12,000 steps, the rest 1,200."""
    return LONG_TERM_MAX_STEPS if category in LONG_TERM_CATEGORIES else STANDARD_MAX_STEPS


def step_cap(category: str) -> int | None:
    """MCU caps standard categories at 1,200 steps; long-term ones are uncapped."""
    return None if category in LONG_TERM_CATEGORIES else STANDARD_MAX_STEPS
