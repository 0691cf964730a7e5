"""Which MCU tasks each simulator can run and score: decided here once, for `plan`, `tasks` and the green agent.

Scoring reads MineStudio-style cumulative counters (`counters[event][object]`). The embedded (Crafter) backend
produces them from Crafter's achievements (`ACHIEVEMENT_COUNTERS`); a reward entry whose (event, object) pairs none
of those produce has no analogue there and can never be reached — it still counts in the total, and is reported as
unavailable by identity. Pure data and pydantic: light to import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcu_arms.contracts.tasks import RewardEntry, TaskSpec

EMBEDDED_CATEGORIES: frozenset[str] = frozenset(
    {"mine_diamond_from_scratch", "crafting", "mining_and_collecting", "combat"}
)

# Each occurrence of a Crafter achievement adds one to these MineStudio (event, object) counters.
ACHIEVEMENT_COUNTERS: dict[str, tuple[tuple[str, str], ...]] = {
    "collect_wood": (("mine_block", "log"), ("mine_block", "oak_log"), ("pickup", "oak_log")),
    "place_table": (("craft_item", "crafting_table"), ("use_item", "crafting_table")),
    "make_wood_pickaxe": (("craft_item", "wooden_pickaxe"),),
    "make_stone_pickaxe": (("craft_item", "stone_pickaxe"),),
    "make_iron_pickaxe": (("craft_item", "iron_pickaxe"),),
    "make_wood_sword": (("craft_item", "wooden_sword"),),
    "make_stone_sword": (("craft_item", "stone_sword"),),
    "make_iron_sword": (("craft_item", "iron_sword"),),
    "collect_stone": (("mine_block", "stone"), ("mine_block", "cobblestone"), ("pickup", "cobblestone")),
    "collect_coal": (("mine_block", "coal_ore"), ("pickup", "coal")),
    "collect_iron": (("mine_block", "iron_ore"), ("pickup", "iron_ore")),
    "collect_diamond": (("mine_block", "diamond_ore"), ("pickup", "diamond")),
    "place_furnace": (("craft_item", "furnace"), ("use_item", "furnace")),
    "place_stone": (("use_item", "cobblestone"),),
    "place_plant": (("use_item", "oak_sapling"),),
    "collect_sapling": (("pickup", "oak_sapling"),),
    "defeat_zombie": (("kill_entity", "zombie"),),
    "defeat_skeleton": (("kill_entity", "skeleton"),),
    "eat_cow": (("kill_entity", "cow"),),
}
OBSERVABLE_ON_EMBEDDED: frozenset[tuple[str, str]] = frozenset(
    pair for pairs in ACHIEVEMENT_COUNTERS.values() for pair in pairs
)


@dataclass
class TaskSupport:
    """Whether a simulator can run a task, and which of its reward entries it can never observe."""

    runnable: bool
    reason: str = ""  # why not, when not runnable
    unavailable: list[str] = field(default_factory=list)  # identities of entries that can never pay here


def category_reason(simulator: str, category: str) -> str | None:
    """Why a whole category cannot run on `simulator`, or None when some of its tasks can."""
    if simulator == "embedded" and category not in EMBEDDED_CATEGORIES:
        return (
            f"category '{category}' has no Crafter analogue (embedded runs: {', '.join(sorted(EMBEDDED_CATEGORIES))})"
        )
    return None


def has_embedded_analogue(entry: RewardEntry) -> bool:
    return any((entry.event, obj) in OBSERVABLE_ON_EMBEDDED for obj in entry.objects)


def task_support(simulator: str, task: TaskSpec) -> TaskSupport:
    """Whether `simulator` can run and score `task`, and which of its entries it cannot observe."""
    if simulator != "embedded":
        return TaskSupport(runnable=True)
    reason = category_reason(simulator, task.category)
    if reason is not None:
        return TaskSupport(runnable=False, reason=f"needs minestudio: {reason}")
    entries = (*task.reward_cfg, *task.milestones)
    unavailable = [entry.identity for entry in entries if not has_embedded_analogue(entry)]
    if len(unavailable) == len(entries):
        wanted = "; ".join(f"{e.event} {'/'.join(e.objects)}" for e in entries) or "video evaluation only"
        return TaskSupport(
            runnable=False,
            reason=f"needs minestudio: task {task.name!r} has no Crafter analogue ({wanted})",
            unavailable=unavailable,
        )
    return TaskSupport(runnable=True, unavailable=unavailable)


def runnable_tasks(simulator: str, tasks: list[TaskSpec]) -> tuple[list[TaskSpec], dict[str, TaskSupport]]:
    """The tasks `simulator` can run, and every task's support (for the warnings and the skipped list)."""
    support = {task.name: task_support(simulator, task) for task in tasks}
    return [task for task in tasks if support[task.name].runnable], support
