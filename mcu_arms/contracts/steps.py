"""The per-task step log (`<task>/steps.jsonl`): one typed record per step, and the one reader of such logs.

The green writes a line per step, flushed at once, so that a live view can tail an episode and a crash loses at most
the step in flight. What the agent sent is kept as received (truncated when huge) next to what was applied, so that
a noop or a dropped key can be traced to the exact reply. Readers never trust a last line that has no newline yet:
it may be half written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_LINE_BYTES
from mcu_arms.contracts.reading import open_untrusted, size_text

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
        self._skipping = False

    def poll(self) -> list[Record]:
        """The complete new lines, read MAX_LINE_BYTES at a time at most; a line longer than that counts as invalid
        and is skipped, never held whole."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(MAX_LINE_BYTES)
        except OSError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        if self._skipping:  # the rest of a line past MAX_LINE_BYTES: dropped as it arrives, never held
            if not lines:
                self._partial = b""
                return []
            lines.pop(0)
            self._skipping = False
        if len(self._partial) > MAX_LINE_BYTES:
            self.invalid += 1
            self._partial, self._skipping = b"", True
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
    """Every complete record of a small JSON-lines file (an event log), and the tail that read them (for its
    `invalid` count). A step log can be hundreds of MB: read it with JsonlScan or StepLogIndex instead."""
    tail = JsonlTail(path, model)
    return tail.poll(), tail


class JsonlScan(Generic[Record]):
    """One pass over a JSON-lines file in READ_BLOCK pieces: memory bounded by a block and MAX_LINE_BYTES, whatever
    the file's size. Iterating yields (offset, length, record) for each complete line that is a valid record; then
    `invalid` counts the lines that were not and `torn` says whether a last line lacks its newline. A line longer
    than MAX_LINE_BYTES makes the file unreadable: a UserError naming the file and the line, raised as soon as the
    line passes the bound (the file is untrusted input, contracts/reading.py)."""

    def __init__(self, path: Path, model: type[Record]) -> None:
        self.path = path
        self.model = model
        self.invalid = 0
        self.torn = False

    def __iter__(self) -> Iterator[tuple[int, int, Record]]:
        offset = 0
        partial = b""
        number = 0
        with open_untrusted(self.path, "log") as handle:
            while block := handle.read(READ_BLOCK):
                lines = (partial + block).split(b"\n")
                partial = lines.pop()
                if len(partial) > MAX_LINE_BYTES:
                    raise UserError(
                        f"line {number + len(lines) + 1} is longer than the {size_text(MAX_LINE_BYTES)} a line may be",
                        path=self.path,
                    )
                for line in lines:
                    number += 1
                    length = len(line) + 1
                    if line.strip():
                        try:
                            yield offset, length, self.model.model_validate_json(line)
                        except ValidationError:
                            self.invalid += 1
                    offset += length
        self.torn = bool(partial.strip())


READ_BLOCK = 1 << 20
# Beside each step log once a reader has indexed it: where each step's line is, and what the reader derived from
# the whole log (a summary), valid while the log keeps the size and mtime it had.
INDEX_SUFFIX = ".index"
INDEX_VERSION = 1


class StepLogIndex:
    """Where each step's record is in a step log (sorted by step), built in one streaming pass and cached beside the
    log, so that a reader loads a page of steps by seeking rather than holding the log. `summary` is what the
    builder's caller derived in the same pass (a JSON object, kept in the cache under its `kind`)."""

    def __init__(self, log: Path, size: int, mtime_ns: int) -> None:
        self.log = log
        self.size = size
        self.mtime_ns = mtime_ns
        self.steps = array("q")
        self.offsets = array("q")
        self.lengths = array("q")
        self.invalid = 0
        self.torn = False
        self.summary: dict[str, Any] | None = None
        self.kind = ""

    @property
    def path(self) -> Path:
        return self.log.with_name(self.log.name + INDEX_SUFFIX)

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def open(cls, log: Path, kind: str, visit: Callable[[StepRecord], None] | None = None) -> StepLogIndex:
        """The log's cached index when it is current and carries a `kind` summary; else one built now (every record
        handed to `visit`) and cached when the folder lets us write. An index found stale is rebuilt."""
        cached = cls.load(log)
        if cached is not None and cached.kind == kind:
            return cached
        index = cls.build(log, visit)
        index.kind = kind
        return index

    @classmethod
    def build(cls, log: Path, visit: Callable[[StepRecord], None] | None = None) -> StepLogIndex:
        found = log.stat()
        index = cls(log, found.st_size, found.st_mtime_ns)
        scan = JsonlScan(log, StepRecord)
        in_order = True
        for offset, length, record in scan:
            if index.steps and record.step < index.steps[-1]:
                in_order = False
            index.steps.append(record.step)
            index.offsets.append(offset)
            index.lengths.append(length)
            if visit is not None:
                visit(record)
        index.invalid, index.torn = scan.invalid, scan.torn
        if not in_order:
            order = sorted(range(len(index.steps)), key=index.steps.__getitem__)
            for name in ("steps", "offsets", "lengths"):
                column = getattr(index, name)
                setattr(index, name, array("q", (column[i] for i in order)))
        return index

    @classmethod
    def load(cls, log: Path) -> StepLogIndex | None:
        """The cached index, if it is there, ours (a regular file, not a link), and made from the log as it is now."""
        index_path = log.with_name(log.name + INDEX_SUFFIX)
        try:
            found = log.stat()
            if not stat_is_regular(index_path):
                return None
            with index_path.open("rb") as handle:
                header = json.loads(handle.readline())
                if header.get("version") != INDEX_VERSION or (header.get("size"), header.get("mtime_ns")) != (
                    found.st_size,
                    found.st_mtime_ns,
                ):
                    return None
                index = cls(log, found.st_size, found.st_mtime_ns)
                count = int(header["count"])
                for name in ("steps", "offsets", "lengths"):
                    column = array("q")
                    column.fromfile(handle, count)
                    setattr(index, name, column)
        except (OSError, ValueError, EOFError, KeyError, TypeError, RecursionError):
            return None
        index.invalid, index.torn = int(header.get("invalid", 0)), bool(header.get("torn", False))
        index.kind, index.summary = str(header.get("kind", "")), header.get("summary")
        return index

    def save(self) -> None:
        """Cache this index beside its log (written whole, then renamed); a folder we cannot write is left as it is."""
        header = {
            "version": INDEX_VERSION,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "count": len(self.steps),
            "invalid": self.invalid,
            "torn": self.torn,
            "kind": self.kind,
            "summary": self.summary,
        }
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
                for column in (self.steps, self.offsets, self.lengths):
                    column.tofile(handle)
            if self.path.is_symlink():
                raise OSError(f"{self.path} is a link this project did not make")
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)

    def page(self, first_step: int, end_step: int) -> list[StepRecord]:
        """The records of steps first_step .. end_step - 1, read by seeking: memory bounded by the page."""
        low, high = bisect_left(self.steps, first_step), bisect_left(self.steps, end_step)
        records: list[StepRecord] = []
        with self.log.open("rb") as handle:
            for position in range(low, high):
                handle.seek(self.offsets[position])
                line = handle.read(self.lengths[position])
                try:
                    records.append(StepRecord.model_validate_json(line))
                except ValidationError:
                    continue  # the log changed under us since it was indexed; the next index sees it as it is
        return records


def stat_is_regular(path: Path) -> bool:
    """A regular file, not reached through a link."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
