"""Writing the per-task step log (`<task>/steps.jsonl`, records in contracts/steps.py) and frame files as the
episode runs."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from mcu_arms.contracts.steps import STEPS_FILE, StepRecord


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


