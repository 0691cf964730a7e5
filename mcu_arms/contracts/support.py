"""Which MCU tasks each simulator can run and score: decided here once, for `plan`, `tasks` and the green agent.

Scoring reads MineStudio-style cumulative counters (`counters[event][object]`). The embedded (Crafter) backend
produces them from Crafter's achievements (`ACHIEVEMENT_COUNTERS`); a reward entry whose (event, object) pairs none
of those produce has no analogue there and can never be reached — it still counts in the total, and is reported as
unavailable by identity, with the reason. MineStudio 1.1.6 counts Minecraft 1.16's statistics (registry names
without `minecraft:`) in the categories it observes (`MINESTUDIO_COUNTED_EVENTS`, from its HumanSurvival handlers);
an entry none of whose objects is such a statistic never pays there either, in upstream MCU as here. Entries are
never renamed, so scores stay comparable with MCU's; where a statistic for the benchmark's intent exists, the
reason names it. Pure data and pydantic: light to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mcu_arms.contracts.mineflayer import MINEFLAYER_COUNTED_EVENTS, NOT_AN_ITEM
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


# The statistic categories MineStudio 1.1.6's HumanSurvival observes (ObserveFromFullStats), as info[event][object].
MINESTUDIO_COUNTED_EVENTS: tuple[str, ...] = (
    "mine_block",
    "craft_item",
    "pickup",
    "use_item",
    "break_item",
    "kill_entity",
    "damage_dealt",
    "custom",
)
# Names MCU's task files use that MineStudio never counts, with the Minecraft 1.16 statistic for the same intent:
# objects that are no statistic, and events it does not observe.
MINESTUDIO_NOT_A_STATISTIC: dict[str, str] = {
    "boat": "oak_boat (and each other wood's boat)",
    "wool": "white_wool (and each other colour's wool)",
    "log": "oak_log, spruce_log, birch_log, jungle_log, acacia_log, dark_oak_log",
}
MINESTUDIO_UNCOUNTED_EVENT_STATISTIC: dict[str, str] = {"open_chest": "custom/open_chest"}
MINESTUDIO_NO_STATISTIC: dict[str, str] = {"mobs": "no Minecraft statistic counts a mob being spawned or built"}
MINESTUDIO_BLOCKS_AFTER_1_16 = "deepslate_"  # deepslate ores came with Minecraft 1.17; MineStudio runs 1.16
NOT_RENAMED = "not renamed, so scores stay comparable with MCU's"
NO_CRAFTER_ANALOGUE = "has no Crafter analogue"


@dataclass
class TaskSupport:
    """Whether a simulator can run a task, and which of its reward entries it can never observe, and why."""

    runnable: bool
    reason: str = ""  # why not, when not runnable
    unavailable: list[str] = field(default_factory=list)  # identities of entries that can never pay here
    reasons: dict[str, str] = field(default_factory=dict)  # identity -> why it can never pay here
    notes: list[str] = field(default_factory=list)  # objects of payable entries that never count here

    def unavailable_text(self) -> list[str]:
        """One line per reason: the identities it applies to, and the reason."""
        grouped: dict[str, list[str]] = {}
        for identity in self.unavailable:
            grouped.setdefault(self.reasons.get(identity, ""), []).append(identity)
        return [f"{', '.join(identities)} {reason}".rstrip() for reason, identities in grouped.items()]


def embedded_category_reason(category: str) -> str | None:
    """Why a whole category cannot run on the embedded simulator, or None when some of its tasks can."""
    if category not in EMBEDDED_CATEGORIES:
        return (
            f"category '{category}' has no Crafter analogue (embedded runs: {', '.join(sorted(EMBEDDED_CATEGORIES))})"
        )
    return None


def has_embedded_analogue(entry: RewardEntry) -> bool:
    return any((entry.event, obj) in OBSERVABLE_ON_EMBEDDED for obj in entry.objects)


def minestudio_object_reason(event: str, obj: str) -> str | None:
    """Why MineStudio 1.1.6 can never count `obj` under `event`, or None when it can."""
    if event not in MINESTUDIO_COUNTED_EVENTS:
        if event in MINESTUDIO_UNCOUNTED_EVENT_STATISTIC:
            statistic = MINESTUDIO_UNCOUNTED_EVENT_STATISTIC[event]
            return f"MineStudio counts no '{event}' events (the statistic is {statistic})"
        return f"MineStudio counts no '{event}' events" + (
            f" ({MINESTUDIO_NO_STATISTIC[event]})" if event in MINESTUDIO_NO_STATISTIC else ""
        )
    if obj.startswith("minecraft:"):
        return f"{event} '{obj}' has a minecraft: prefix, which MineStudio's statistic names never have"
    if obj.startswith(MINESTUDIO_BLOCKS_AFTER_1_16):
        return f"{event} '{obj}' is no Minecraft 1.16 block"
    if obj in MINESTUDIO_NOT_A_STATISTIC:
        return f"{event} '{obj}' is no Minecraft 1.16 statistic (the statistics are {MINESTUDIO_NOT_A_STATISTIC[obj]})"
    return None


def _judged_by_object(
    task: TaskSpec,
    object_reason: Callable[[str, str], str | None],
    suffix: Callable[[RewardEntry, dict[str, str]], str],
) -> TaskSupport:
    """Each entry judged object by object: one none of whose objects can ever count is unavailable (with the reasons,
    and `suffix` for the entry), one some of whose objects cannot is noted."""
    support = TaskSupport(runnable=True)
    for entry in (*task.reward_cfg, *task.milestones):
        dead = {obj: why for obj in entry.objects if (why := object_reason(entry.event, obj))}
        if len(dead) == len(entry.objects):
            support.unavailable.append(entry.identity)
            reasons = "; ".join(dict.fromkeys(dead.values()))
            support.reasons[entry.identity] = f"never pays: {reasons}{suffix(entry, dead)}"
        elif dead:
            counted = ", ".join(obj for obj in entry.objects if obj not in dead)
            support.notes.append(f"{entry.identity}: " + "; ".join(dead.values()) + f" (never counts; {counted} count)")
    return support


def _minestudio_suffix(entry: RewardEntry, dead: dict[str, str]) -> str:
    """Where the benchmark's intent has a statistic under another name, the entry is still not renamed: said so."""
    intent_has_a_statistic = entry.event in MINESTUDIO_UNCOUNTED_EVENT_STATISTIC or any(
        obj in MINESTUDIO_NOT_A_STATISTIC for obj in dead
    )
    return f"; {NOT_RENAMED}" if intent_has_a_statistic else ""


def mineflayer_object_reason(event: str, obj: str) -> str | None:
    """Why the mineflayer backend can never count `obj` under `event`, or None when it can."""
    if event not in MINEFLAYER_COUNTED_EVENTS:
        return (
            f"the mineflayer backend counts no '{event}' events (it counts {', '.join(MINEFLAYER_COUNTED_EVENTS)}, "
            "from the bot's own actions, its inventory and the server's entity messages)"
        )
    if obj.startswith("minecraft:"):
        return f"{event} '{obj}' has a minecraft: prefix, which the backend's item and block names never have"
    if obj in NOT_AN_ITEM:
        return f"{event} '{obj}' is no Minecraft 1.21 item or block (those are {NOT_AN_ITEM[obj]})"
    return None


def mineflayer_support(task: TaskSpec) -> TaskSupport:
    """A task nothing of which can be counted cannot run: its score would come from video evaluation, and this
    backend serves no frames."""
    support = _judged_by_object(task, mineflayer_object_reason, lambda entry, dead: "")
    entries = (*task.reward_cfg, *task.milestones)
    if not entries:
        support.runnable = False
        support.reason = (
            f"task {task.name!r} is scored by video evaluation only, and the mineflayer backend serves no frames"
        )
    elif len(support.unavailable) == len(entries):
        support.runnable = False
        support.reason = f"the mineflayer backend can score nothing of task {task.name!r}: " + "; ".join(
            support.unavailable_text()
        )
    return support


def minestudio_support(task: TaskSpec) -> TaskSupport:
    return _judged_by_object(task, minestudio_object_reason, _minestudio_suffix)


def embedded_support(task: TaskSpec) -> TaskSupport:
    """Crafter runs four categories; an entry none of whose counters an achievement produces can never pay."""
    reason = embedded_category_reason(task.category)
    if reason is not None:
        return TaskSupport(runnable=False, reason=f"needs minestudio: {reason}")
    entries = (*task.reward_cfg, *task.milestones)
    unavailable = [entry.identity for entry in entries if not has_embedded_analogue(entry)]
    reasons = dict.fromkeys(unavailable, NO_CRAFTER_ANALOGUE)
    if len(unavailable) == len(entries):
        wanted = "; ".join(f"{e.event} {'/'.join(e.objects)}" for e in entries) or "video evaluation only"
        return TaskSupport(
            runnable=False,
            reason=f"needs minestudio: task {task.name!r} {NO_CRAFTER_ANALOGUE} ({wanted})",
            unavailable=unavailable,
            reasons=reasons,
        )
    return TaskSupport(runnable=True, unavailable=unavailable, reasons=reasons)
