"""The run report, `output/<arm>/episode_NNN/result.json` (linked as `logs/<arm>_result.json`).

Written at launch with status `started` and finalised atomically as `finished`, `failed` or `interrupted`. It is
the unit `compare` reads and the unit a rerun checks (same fingerprint + finished → skipped). Light to import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from mcu_arms.arms.plan import EPISODE_PATTERN, Settings
from mcu_arms.contracts.errors import UserError
from mcu_arms.atomic import write_json_atomic

RunStatus = Literal["started", "finished", "failed", "interrupted"]
REPORT_SCHEMA_VERSION = 1


class Provenance(BaseModel):
    mcu_arms_version: str
    git_sha: str | None
    git_dirty: bool | None
    python: str
    packages: dict[str, str | None]
    host: str
    platform: str


class ProcessRecord(BaseModel):
    role: str
    pid: int | None = None
    create_time: float | None = None
    argv: list[str] = Field(default_factory=list)
    log: str
    exit_code: int | None = None
    owner_token: str | None = None  # in the process's environment and its descendants': how orphans are found


class Failure(BaseModel):
    process: str | None  # green | purple | client | None (mcu-arms itself)
    reason: str
    exit_code: int | None = None
    log_tail: list[str] = Field(default_factory=list)


class MilestoneRecord(BaseModel):
    task: str
    identity: str
    step: int | None
    available: bool = True


class RunReport(BaseModel):
    schema_version: int = REPORT_SCHEMA_VERSION
    status: RunStatus
    arm: str
    episode: int
    episode_dir: str
    source: str
    fingerprint: str
    settings: Settings
    overrides: dict[str, Any] = Field(default_factory=dict)
    compaction_limit: int
    simulator_label: str | None = None
    provenance: Provenance
    started_at: str
    ready_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None
    processes: dict[str, ProcessRecord] = Field(default_factory=dict)
    failure: Failure | None = None
    score: float | None = None
    max_score: float | None = None
    sim_score: float | None = None
    steps_run: int | None = None
    milestones: list[MilestoneRecord] = Field(default_factory=list)
    noops: dict[str, int] = Field(default_factory=dict)
    dropped_keys: dict[str, int] = Field(default_factory=dict)
    sim_fallbacks: dict[str, int] = Field(default_factory=dict)
    evaluation: dict[str, Any] | None = None  # the green's EvaluationResult as JSON
    purple_report: dict[str, Any] | None = None  # worldmodel_report.json / prolong_report.json when present
    warnings: list[str] = Field(default_factory=list)  # what the plan warned about before the run (caps, payload)
    alerts: list[str] = Field(default_factory=list)  # silent degradation made loud during the run
    logs: dict[str, str] = Field(default_factory=dict)
    output_dirs: dict[str, str] = Field(default_factory=dict)


def write_report(report: RunReport, path: Path) -> None:
    """Atomic: a reader never sees half a report."""
    write_json_atomic(path, report)


def read_report(path: Path) -> RunReport:
    """A run report, or a UserError naming the file (and the key) when it is not one."""
    try:
        return RunReport.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"not a readable run report: {error}", path=path) from None
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise UserError(f"not a run report: {first['msg']}", path=path, key=key or None) from None


@dataclass(frozen=True)
class Episode:
    number: int
    path: Path
    report: RunReport | None
    report_error: str | None = None  # a result.json that exists but cannot be read

    @property
    def report_path(self) -> Path:
        return self.path / "result.json"


def arm_episodes(arm_output: Path) -> list[Episode]:
    """An arm's episode dirs (output/<arm>/episode_NNN), newest first, each with its report when readable."""
    if not arm_output.is_dir():
        return []
    found = []
    for path in arm_output.iterdir():
        match = EPISODE_PATTERN.match(path.name)
        if not match or not path.is_dir():
            continue
        report, error = None, None
        if (path / "result.json").is_file():
            try:
                report = read_report(path / "result.json")
            except (OSError, UserError) as problem:
                error = problem.render() if isinstance(problem, UserError) else f"{path / 'result.json'}: {problem}"
        found.append(Episode(int(match.group(1)), path, report, error))
    return sorted(found, key=lambda episode: episode.number, reverse=True)
