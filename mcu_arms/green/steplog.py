"""The per-task step log (`<task>/steps.jsonl`) and frame files, written as the episode runs.

One JSON line per step, flushed at once, so that a live view can tail an episode and a crash loses at most the
step in flight. What the agent sent is kept as received (truncated when huge) next to what was applied, so that a
noop or a dropped key can be traced to the exact reply.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, Field

# Longest reply text kept verbatim in a step record; longer replies are cut and marked.
MAX_RECEIVED_CHARS = 4000
STEPS_FILE = "steps.jsonl"


class StepRecord(BaseModel):
    step: int
    t: float  # wall-clock time (Unix seconds) when the step's simulator step finished
    received: str | None  # the agent's reply text as received (truncated), None when no reply arrived
    applied: dict[str, Any]  # the action the simulator got
    noop_cause: str | None = None
    reason: str = ""
    dropped_keys: list[str] = Field(default_factory=list)
    adjustments: list[str] = Field(default_factory=list)
    action_format: str | None = None
    agent_ms: float  # round trip to the agent, including parsing its reply
    sim_ms: float  # the simulator step alone
    reward: float = 0.0  # what this step paid
    events: list[dict[str, Any]] = Field(default_factory=list)  # milestone/reward payouts on this step
    done: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


def truncate_received(text: str | None) -> str | None:
    """The reply as it is logged: verbatim up to MAX_RECEIVED_CHARS, then cut with the original length noted."""
    if text is None or len(text) <= MAX_RECEIVED_CHARS:
        return text
    return f"{text[:MAX_RECEIVED_CHARS]}...[truncated, {len(text)} chars in all]"


class StepLog:
    """Appends StepRecords to `<task_dir>/steps.jsonl` and frames to `<task_dir>/frames/` when asked."""

    def __init__(self, task_dir: Path, *, save_frames: bool) -> None:
        self.task_dir = task_dir
        self.path = task_dir / STEPS_FILE
        self.frames_dir: Path | None = task_dir / "frames" if save_frames else None
        task_dir.mkdir(parents=True, exist_ok=True)
        if self.frames_dir is not None:
            self.frames_dir.mkdir(exist_ok=True)
        self._file: IO[str] | None = self.path.open("x", encoding="utf-8")  # never over an earlier log
        self.lines_written = 0

    def write(self, record: StepRecord) -> None:
        if self._file is None:
            raise ValueError(f"step log {self.path} is closed")
        self._file.write(record.model_dump_json() + "\n")
        self._file.flush()
        self.lines_written += 1

    def save_frame(self, step: int, png: bytes) -> None:
        """Write the frame the agent saw at `step` (already PNG-encoded for the observation)."""
        if self.frames_dir is not None:
            (self.frames_dir / f"{step:06d}.png").write_bytes(png)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> StepLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


