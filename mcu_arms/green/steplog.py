"""Writing the per-task step log (`<task>/steps.jsonl`, records in contracts/steps.py) and frame files as the
episode runs.

A line is written whole or not at all: when the disk fills mid-line, the file is cut back to the end of the last
whole line before the error goes on, so a reader never meets a torn record.
"""

from __future__ import annotations

import os
from pathlib import Path

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
        # never over an earlier log
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._size = 0
        self.lines_written = 0

    def write(self, record: StepRecord) -> None:
        if self._fd is None:
            raise ValueError(f"step log {self.path} is closed")
        line = (record.model_dump_json() + "\n").encode("utf-8")
        written = 0
        try:
            while written < len(line):
                written += os.write(self._fd, line[written:])
        except OSError as error:
            os.ftruncate(self._fd, self._size)
            raise OSError(error.errno, error.strerror, str(self.path)) from error  # the file named: "disk full writing"
        self._size += written
        self.lines_written += 1

    def save_frame(self, step: int, png: bytes) -> None:
        """Write the frame the agent saw at `step` (already PNG-encoded for the observation)."""
        if self.frames_dir is not None:
            path = self.frames_dir / f"{step:06d}.png"
            try:
                path.write_bytes(png)
            except OSError as error:
                raise OSError(error.errno, error.strerror, str(path)) from error

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StepLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
