"""The per-task step log (`<task>/steps.jsonl`): one typed record per step, and the one reader of such logs.

The green writes a line per step, flushed at once, so that a live view can tail an episode and a crash loses at most
the step in flight. What the agent sent is kept as received (truncated when huge) next to what was applied, so that
a noop or a dropped key can be traced to the exact reply. Readers never trust a last line that has no newline yet:
it may be half written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

STEPS_SCHEMA_VERSION = 1
# Longest reply text kept verbatim in a step record; longer replies are cut and marked.
MAX_RECEIVED_CHARS = 4000
STEPS_FILE = "steps.jsonl"
# Beside the step log when the arm saves frames: the frame the agent saw at step N is FRAMES_DIR/frame_name(N), and
# one more after the last step (the view after the last action).
FRAMES_DIR = "frames"
FRAME_NAME = re.compile(r"^(\d{6,})\.png$")
# The keys of a record's `info` (the simulator's own dict) that readers chart: the vitals each backend reports
# (embedded: health, food, drink, energy; MineStudio: health, food_level), the item counts and the death counter.
VITAL_KEYS: tuple[str, ...] = ("health", "food", "food_level", "drink", "energy")
INVENTORY_KEY = "inventory"
DEATHS_KEY = "deaths"


class StepRecord(BaseModel):
    step: int
    t: float  # wall-clock time (Unix seconds) when the step's simulator step finished
    received: str | None  # the agent's reply text as received (truncated), None when no reply arrived
    applied: dict[str, Any]  # the action the simulator got (the noop's keys when it got a skill)
    skill: dict[str, Any] | None = None  # the skill request carried out instead (contracts/skills.py SkillRequest)
    skill_outcome: dict[str, Any] | None = None  # what it came to, in the simulator's words (SkillOutcome)
    noop_cause: str | None = None
    reason: str = ""
    dropped_keys: list[str] = Field(default_factory=list)
    dropped_unnamed: int = 0  # keys dropped beyond the ones named
    adjustments: list[str] = Field(default_factory=list)
    action_format: str | None = None
    agent_ms: float  # round trip to the agent, including parsing its reply
    sim_ms: float  # the simulator step alone
    reward: float = 0.0  # what this step paid
    events: list[dict[str, Any]] = Field(default_factory=list)  # milestone/reward payouts on this step
    no_effect: list[str] = Field(default_factory=list)  # inputs this simulator could not carry out (behaviour)
    done: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class StepProgress(BaseModel):
    """The part of a StepRecord that progress and status need; parsing skips the rest (the reply, the info)."""

    model_config = ConfigDict(extra="ignore")

    step: int
    t: float
    noop_cause: str | None = None
    agent_ms: float | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    no_effect: list[str] = Field(default_factory=list)


def frame_name(step: int) -> str:
    return f"{step:06d}.png"


def frame_step(name: str) -> int | None:
    """The step a frame file shows, or None when the name is not a frame's."""
    match = FRAME_NAME.match(name)
    return int(match.group(1)) if match else None


def truncate_received(text: str | None) -> str | None:
    """The reply as it is logged: verbatim up to MAX_RECEIVED_CHARS, then cut with the original length noted."""
    if text is None or len(text) <= MAX_RECEIVED_CHARS:
        return text
    return f"{text[:MAX_RECEIVED_CHARS]}...[truncated, {len(text)} chars in all]"


Record = TypeVar("Record", bound=BaseModel)


class JsonlTail(Generic[Record]):
    """Reads the complete new lines of one JSON-lines file as `model` records, remembering where it stopped.

    A line without its newline is kept until the rest arrives; a line that is not a valid record is skipped and
    counted in `invalid` (a torn tail after a crash, or a writer that is not ours).
    """

    def __init__(self, path: Path, model: type[Record]) -> None:
        self.path = path
        self.model = model
        self.offset = 0
        self.invalid = 0
        self._partial = b""

    def poll(self) -> list[Record]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except OSError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        return list(self._parse(lines))

    def _parse(self, lines: list[bytes]) -> Iterator[Record]:
        for line in lines:
            if not line.strip():
                continue
            try:
                yield self.model.model_validate_json(line)
            except ValidationError:
                self.invalid += 1

    @property
    def torn_tail(self) -> bool:
        """A last line is there without its newline (being written, or cut short by a crash)."""
        return bool(self._partial.strip())


def read_jsonl(path: Path, model: type[Record]) -> tuple[list[Record], JsonlTail[Record]]:
    """Every complete record of a JSON-lines file, and the tail that read them (for its `invalid` count)."""
    tail = JsonlTail(path, model)
    return tail.poll(), tail
