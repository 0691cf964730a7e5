"""The skill channel: high-level actions an agent sends to a simulator that carries them out itself.

A simulator whose capability list says `actions = "skills"` (the mineflayer one) takes, beside per-step env actions,
an ActionPayload with `action_type = "skill"` and a `SkillRequest` (collect 4 oak_log, craft a crafting_table, go
to a block, ...). One such request is one green step: the simulator runs it to its end (seconds of real time), and
the next observation carries what came of it (`SkillOutcome`) and the game events that happened meanwhile
(`GameEvent`: damage, death). Agents judge success from the inventory delta the state shows; the outcome's own
status is the simulator's account, kept beside it, never instead of it. Greens that do not know skills ignore the
added fields, and a skill sent to a simulator that takes env actions only is an invalid action there.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

# What a simulator can be asked to do in one skill request (the mineflayer sidecar's `act` kinds).
SkillKind = Literal[
    "move",
    "go_to",
    "collect",
    "dig",
    "craft",
    "smelt",
    "place",
    "equip",
    "eat",
    "attack",
    "retreat",
    "wait",
    "deposit",
    "withdraw",
]
SKILL_KINDS: tuple[SkillKind, ...] = get_args(SkillKind)
# How the simulator says a skill ended. `interrupted`: stopped early (its own damage reflex: reason "damage");
# `died`: the player died during it; `busy`: another skill was still running; `error`: the library failed.
SkillStatus = Literal["success", "failure", "timeout", "interrupted", "error", "busy", "died"]
# shield_raised / shield_lowered: the simulator's damage reflex raised a shield held in the off-hand, and lowered it.
GameEventKind = Literal[
    "damage", "heal", "death", "respawn", "kicked", "disconnected", "shield_raised", "shield_lowered"
]
ArgValue = str | int | float | bool | list[float] | None


class SkillRequest(BaseModel):
    """One high-level action: `kind` and its arguments (the simulator's capability list names them per kind)."""

    model_config = ConfigDict(extra="forbid")

    kind: SkillKind
    args: dict[str, ArgValue] = Field(default_factory=dict)
    timeout_ms: int | None = Field(default=None, gt=0, le=600_000, description="None: the simulator's default")

    def label(self) -> str:
        """`collect:oak_log` — the kind and its first argument, for logs and counters."""
        first = next((value for value in self.args.values() if isinstance(value, str)), None)
        return f"{self.kind}:{first}" if first else self.kind


class GameEvent(BaseModel):
    """Something the player felt, as the simulator reported it (not read from the state afterwards)."""

    model_config = ConfigDict(extra="ignore")

    kind: GameEventKind
    health: float | None = None
    previous: float | None = None
    amount: float | None = Field(default=None, description="damage: health lost")
    during: SkillKind | None = Field(default=None, description="the skill running when it happened")
    wall_ms: float = Field(description="Unix milliseconds when the simulator's library saw it")
    detail: str = ""


class SkillOutcome(BaseModel):
    """What a skill request came to, in the simulator's own words (agents judge by the inventory delta)."""

    model_config = ConfigDict(extra="ignore")

    kind: SkillKind
    status: SkillStatus
    duration_ms: float
    inventory_delta: dict[str, int] = Field(default_factory=dict, description="items gained (+) or spent (-)")
    reason: str | None = None
    stopped_after_damage_ms: float | None = Field(
        default=None, description="stopped by the simulator's damage reflex: from the damage event to this answer"
    )
    details: dict[str, object] = Field(default_factory=dict)
