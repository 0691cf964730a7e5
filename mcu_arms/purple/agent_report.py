"""The codex agents' report: `<output_dir>/worldmodel_report.json` (prolong: `prolong_report.json`).

Each episode (one A2A context) writes its own `task_NN/agent_report.json` after every turn, then rebuilds the
output directory's report from all of them under a file lock: several episodes share one output directory, and a
report written after every turn survives a crash of the purple process. Light: pydantic and filelock only.
"""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from filelock import FileLock
from pydantic import BaseModel, Field

from mcu_arms.atomic import write_json_atomic

REPORT_SCHEMA_VERSION = 1
EPISODE_REPORT_NAME = "agent_report.json"
TurnOutcome = Literal["ok", "failed", "timeout", "overflow"]


class TurnRecord(BaseModel):
    """One model turn: what it cost and what came of it."""

    turn: int
    step: int
    session: int
    thread_id: str | None
    resumed: bool
    outcome: TurnOutcome
    rc: int | None
    reason: str | None = None
    latency_s: float
    prompt_bytes: int
    frame_bytes: int
    rollout_bytes_before: int
    rollout_bytes_after: int
    payload_bytes: int = Field(description="prompt + attached frame + the rollout a resumed session re-sends")
    frames_in_session: int
    actions_queued: int
    compactions_in_thread: int


class EpisodeReport(BaseModel):
    """One episode's counters; the output directory's report sums these."""

    task_dir: str
    task: str
    started_at: str
    observations: int = 0
    actions_replayed: int = 0
    noops: Counter[str] = Field(default_factory=Counter)
    turns: int = 0
    failed_turns_by_rc: Counter[str] = Field(default_factory=Counter)
    failed_turns_by_reason: Counter[str] = Field(default_factory=Counter)
    sessions_started: int = 0
    sessions_completed: int = 0
    sessions_discarded: int = 0
    compactions: int = 0
    overflow_resets: int = 0
    actions_truncated: int = 0
    camera_compensated: int = 0
    leftover_processes_stopped: int = 0  # still running in a turn's group after codex exited
    warnings: list[str] = Field(default_factory=list)
    turn_records: list[TurnRecord] = Field(default_factory=list)


class AgentSettings(BaseModel):
    """What was in force for every episode of this purple process."""

    kind: str
    session_turns: int
    compact_limit: int | None
    step_timeout: float
    turn_timeout: float
    model: str | None
    provider_base_url: str | None
    provider_wire_api: str | None
    provider_env_key: str | None = None
    camera_quantised: bool
    codex_executable: str
    codex_version: str
    codex_home: str
    codex_home_audit: dict[str, bool | str]


class LatencySummary(BaseModel):
    turns: int
    median_s: float | None
    p90_s: float | None
    max_s: float | None
    max_payload_bytes: int | None


class AgentReport(BaseModel):
    schema_version: int = REPORT_SCHEMA_VERSION
    kind: str
    written_at: str
    settings: AgentSettings
    turns: int
    failed_turns: int
    failed_turns_by_rc: dict[str, int]
    failed_turns_by_reason: dict[str, int]
    sessions_started: int
    sessions_completed: int
    sessions_discarded: int
    compactions: int
    overflow_resets: int
    leftover_processes_stopped: int = 0
    compaction_limit: int | None
    noops: dict[str, int]
    latency: LatencySummary
    warnings: list[str]
    episodes: list[EpisodeReport]


def report_name(kind: str) -> str:
    return f"{kind}_report.json"


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summarise(settings: AgentSettings, episodes: list[EpisodeReport]) -> AgentReport:
    """The output directory's report: settings, totals over its episodes, and the episodes themselves."""
    by_rc: Counter[str] = Counter()
    by_reason: Counter[str] = Counter()
    noops: Counter[str] = Counter()
    for episode in episodes:
        by_rc.update(episode.failed_turns_by_rc)
        by_reason.update(episode.failed_turns_by_reason)
        noops.update(episode.noops)
    records = [record for episode in episodes for record in episode.turn_records]
    latencies = [record.latency_s for record in records]
    return AgentReport(
        kind=settings.kind,
        written_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        settings=settings,
        turns=sum(episode.turns for episode in episodes),
        failed_turns=sum(by_rc.values()),
        failed_turns_by_rc=dict(by_rc),
        failed_turns_by_reason=dict(by_reason),
        sessions_started=sum(episode.sessions_started for episode in episodes),
        sessions_completed=sum(episode.sessions_completed for episode in episodes),
        sessions_discarded=sum(episode.sessions_discarded for episode in episodes),
        compactions=sum(episode.compactions for episode in episodes),
        overflow_resets=sum(episode.overflow_resets for episode in episodes),
        leftover_processes_stopped=sum(episode.leftover_processes_stopped for episode in episodes),
        compaction_limit=settings.compact_limit,
        noops=dict(noops),
        latency=LatencySummary(
            turns=len(latencies),
            median_s=statistics.median(latencies) if latencies else None,
            p90_s=_percentile(latencies, 0.9) if latencies else None,
            max_s=max(latencies) if latencies else None,
            max_payload_bytes=max((record.payload_bytes for record in records), default=None),
        ),
        warnings=[f"{Path(e.task_dir).name}: {warning}" for e in episodes for warning in e.warnings],
        episodes=episodes,
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


def load_report(path: Path) -> AgentReport:
    """Read a report back (compare and tests use this)."""
    return AgentReport.model_validate_json(path.read_text(encoding="utf-8"))
