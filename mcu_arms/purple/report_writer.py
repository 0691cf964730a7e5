"""Writing the purple agents' reports (models in contracts/agent_report.py): `<output_dir>/<kind>_report.json`.

Each episode (one A2A context) writes its own `task_NN/agent_report.json` as it goes, then rebuilds the output
directory's report from all of them under a file lock: several episodes share one output directory, and a report
written as the episode runs survives a crash of the purple process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from filelock import FileLock
from pydantic import BaseModel

from mcu_arms.atomic import write_json_atomic
from mcu_arms.contracts.agent_report import (
    EPISODE_REPORT_NAME,
    AgentSettings,
    EpisodeReport,
    report_name,
    summarise,
)
from mcu_arms.layout import TASK_DIR_GLOB

Episode = TypeVar("Episode", bound=BaseModel)


def write_episode_reports(
    output_dir: Path,
    task_dir: Path,
    episode: Episode,
    kind: str,
    summary: Callable[[list[Episode]], BaseModel],
) -> Path:
    """Write this episode's report, then rebuild the output directory's report from every episode's file."""
    write_json_atomic(task_dir / EPISODE_REPORT_NAME, episode.model_dump(mode="json"))
    target = output_dir / report_name(kind)
    with FileLock(str(output_dir / ".agent_report.lock")):
        episodes = [
            type(episode).model_validate_json(path.read_text(encoding="utf-8"))
            for path in sorted(output_dir.glob(f"{TASK_DIR_GLOB}/{EPISODE_REPORT_NAME}"))
        ]
        write_json_atomic(target, summary(episodes).model_dump(mode="json"))
    return target


def write_reports(output_dir: Path, settings: AgentSettings, episode: EpisodeReport) -> Path:
    """A codex agent's reports: its episode's counters and turn records, and the summary over every episode."""
    return write_episode_reports(
        output_dir, Path(episode.task_dir), episode, settings.kind, lambda episodes: summarise(settings, episodes)
    )
