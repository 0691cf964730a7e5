"""Which rubric grades the video: MCU's own (read from the user's checkout of MCU's `auto_eval` folder) or ours.

MCU's rubric is a rating prompt plus one criteria file per task; MCU-AgentBeats grades with them. Their text is not
ours to ship, so the user points an arm (`auto_eval_dir`) or the green (`MCU_AUTO_EVAL_DIR`) at a checkout, and
every result names the rubric that scored it. Only the stdlib here: the planner and the green both check a folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

VideoRubric = Literal["mcu", "mcu_arms"]  # MCU's prompt + per-task criteria files, or our generic prompt
AUTO_EVAL_ENV = "MCU_AUTO_EVAL_DIR"
MCU_PROMPT_FILE = Path("prompt") / "single_rating_prompt.txt"
MCU_CRITERIA_DIR = Path("criteria_files")


def auto_eval_problem(folder: Path) -> str | None:
    """What keeps `folder` from being a checkout of MCU's auto_eval folder, or None when it is one."""
    if not folder.is_dir():
        return f"{folder} is not a directory"
    missing = [str(part) for part in (MCU_PROMPT_FILE, MCU_CRITERIA_DIR) if not (folder / part).exists()]
    if missing:
        return f"{folder} has no {' or '.join(missing)}: point it at MCU's auto_eval folder"
    return None


def criteria_file(folder: Path, task: str) -> Path:
    """The task's criteria file in an auto_eval checkout (MCU names them after the task)."""
    return folder / MCU_CRITERIA_DIR / f"{task}.txt"


def chosen_auto_eval_dir(configured: str | None, env: Mapping[str, str]) -> Path | None:
    """The auto_eval checkout in force: the one configured, else MCU_AUTO_EVAL_DIR, else none (our rubric)."""
    chosen = configured or env.get(AUTO_EVAL_ENV) or None
    return Path(chosen).expanduser().resolve() if chosen else None


def rubric_of(auto_eval_dir: Path | str | None) -> VideoRubric:
    return "mcu" if auto_eval_dir else "mcu_arms"
