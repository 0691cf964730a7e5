"""Writing the codex agents' report (models in contracts/agent_report.py): `<output_dir>/worldmodel_report.json`.

Each episode (one A2A context) writes its own `task_NN/agent_report.json` after every turn, then rebuilds the
output directory's report from all of them under a file lock: several episodes share one output directory, and a
report written after every turn survives a crash of the purple process.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock

from mcu_arms.atomic import write_json_atomic
from mcu_arms.contracts.agent_report import (
    EPISODE_REPORT_NAME,
    AgentSettings,
    EpisodeReport,
    report_name,
    summarise,
)


def write_reports(output_dir: Path, settings: AgentSettings, episode: EpisodeReport) -> Path:
    """Write this episode's report, then rebuild the output directory's report from every episode's file."""
    write_json_atomic(Path(episode.task_dir) / EPISODE_REPORT_NAME, episode.model_dump(mode="json"))
    target = output_dir / report_name(settings.kind)
    with FileLock(str(output_dir / ".agent_report.lock")):
        episodes = [
            EpisodeReport.model_validate_json(path.read_text(encoding="utf-8"))
            for path in sorted(output_dir.glob(f"task_*/{EPISODE_REPORT_NAME}"))
        ]
        write_json_atomic(target, summarise(settings, episodes).model_dump(mode="json"))
    return target
