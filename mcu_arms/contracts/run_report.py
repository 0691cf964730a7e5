"""The run report, `output/<arm>/episode_NNN/result.json` (linked as `logs/<arm>_result.json`).

Written at launch with status `started` and finalised atomically as `finished`, `failed` or `interrupted`. It is
the unit `compare` reads and the unit a rerun checks (same fingerprint + finished -> skipped). Paths in it are
relative to the episode directory, so an archived or moved `output/` still resolves. The green's evaluation lives
in its own file (`green/evaluation.json`); the report keeps the summary of it and of the agent's own report.

Versioned: a report of an older schema is migrated when read (`_migrate`), never rewritten behind the user's back.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from mcu_arms.contracts.agent_report import AgentSummary
from mcu_arms.contracts.errors import UserError, user_error
from mcu_arms.contracts.evaluation import EvaluationResult, TaskMetrics
from mcu_arms.contracts.settings import Settings
from mcu_arms.contracts.states import ProcessRole, RunStatus

RUN_REPORT_SCHEMA_VERSION = 2
VIDEO_NOT_RUN = frozenset({"no_api_key", "failed"})


class Provenance(BaseModel):
    mcu_arms_version: str
    git_sha: str | None
    git_dirty: bool | None
    python: str
    packages: dict[str, str | None]
    host: str
    platform: str


class ProcessRecord(BaseModel):
    role: str  # a ProcessRole, or SUPERVISOR_ROLE for the `mcu-arms run` that supervises the arm
    pid: int | None = None
    create_time: float | None = None
    argv: list[str] = Field(default_factory=list)
    log: str  # relative to the episode directory
    exit_code: int | None = None
    owner_token: str | None = None  # in the process's environment and its descendants': how orphans are found


class Failure(BaseModel):
    process: ProcessRole | None  # None: mcu-arms itself
    reason: str
    exit_code: int | None = None
    log_tail: list[str] = Field(default_factory=list)


class MilestoneRecord(BaseModel):
    task: str
    identity: str
    step: int | None
    available: bool = True


class RunReport(BaseModel):
    schema_version: int = RUN_REPORT_SCHEMA_VERSION
    status: RunStatus
    arm: str
    episode: int
    source: str  # the arm file, relative to the project when inside it
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
    evaluation_file: str | None = None  # the green's EvaluationResult, relative to the episode directory
    agent: AgentSummary | None = None  # from the purple's own report, when it writes one
    warnings: list[str] = Field(default_factory=list)  # what the plan warned about before the run (caps, payload)
    alerts: list[str] = Field(default_factory=list)  # silent degradation made loud during the run
    logs: dict[str, str] = Field(default_factory=dict)  # role -> log, relative to the episode directory
    output_dirs: dict[str, str] = Field(default_factory=dict)  # green / purple -> dir, relative likewise

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Read a schema-1 report (the first tranche's) as schema 2."""
        if not isinstance(data, dict) or data.get("schema_version", 1) >= RUN_REPORT_SCHEMA_VERSION:
            return data
        data = dict(data)
        data["schema_version"] = RUN_REPORT_SCHEMA_VERSION
        data.pop("episode_dir", None)
        if data.pop("evaluation", None) is not None:
            data["evaluation_file"] = "evaluation.json"  # schema 1 kept the client's copy at the episode's top
        purple = data.pop("purple_report", None)
        if isinstance(purple, dict):
            data["agent"] = _summary_from_schema_1(purple)
        output_dirs = data.get("output_dirs") or {}
        output_dirs.pop("episode", None)
        return data


def _summary_from_schema_1(purple: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 stored the purple's report whole; its counters sat at the top (codex) or under `stats` (scripted)."""
    def number(key: str) -> int | None:
        value = purple.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    counters = purple.get("stats") if isinstance(purple.get("stats"), dict) else {}
    return {
        "kind": str(purple.get("kind", "unknown")),
        "report_file": f"{purple.get('kind', 'agent')}_report.json",
        "turns": number("turns"),
        "failed_turns": number("failed_turns"),
        "compactions": number("compactions"),
        "overflow_resets": number("overflow_resets"),
        "compaction_limit": number("compaction_limit"),
        "counters": {key: value for key, value in counters.items() if isinstance(value, int)},
    }


def read_report(path: Path) -> RunReport:
    """A run report, or a UserError naming the file (and the key) when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"not a readable run report: {error}", path=path) from None
    if isinstance(data, dict) and isinstance(data.get("schema_version"), int):
        if data["schema_version"] > RUN_REPORT_SCHEMA_VERSION:
            raise UserError(
                f"run report schema {data['schema_version']} is newer than this mcu-arms reads "
                f"({RUN_REPORT_SCHEMA_VERSION}); upgrade mcu-arms",
                path=path,
                key="schema_version",
            )
    try:
        return RunReport.model_validate(data)
    except ValidationError as error:
        problem = user_error(error, path=path)
        raise UserError(f"not a run report: {problem.message}", path=path, key=problem.key) from None


def summarise_evaluation(report: RunReport, result: EvaluationResult, evaluation_file: str) -> list[str]:
    """Fill the report's summary from the evaluation; returns alert lines for every fallback it counted.

    Every fallback the evaluation counted (noops, dropped keys, simulator fallbacks, unscored tasks, failed inits,
    video evaluation that was asked for and did not run) becomes an alert line, so that it is read, not just stored.
    """
    alerts: list[str] = []
    noops: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    fallbacks: Counter[str] = Counter()
    milestones: list[MilestoneRecord] = []
    sim_scores: list[float] = []
    steps = 0
    for category in result.results:
        for name, metrics in category.task_metrics.items():
            steps += metrics.steps_run
            if metrics.sim_score is not None:
                sim_scores.append(metrics.sim_score)
            milestones += [
                MilestoneRecord(task=name, identity=m.identity, step=m.step, available=m.available)
                for m in metrics.milestones
            ]
            task_noops = {cause: stats.count for cause, stats in metrics.noops.items()}
            noops.update(task_noops)
            dropped.update(metrics.dropped_keys)
            fallbacks.update(metrics.sim_fallbacks)
            alerts += _task_alerts(name, metrics, task_noops, report.settings.video_eval)
        if category.unscored_tasks:
            alerts.append(f"{category.task_category}: unscored, left out of the total: {', '.join(category.unscored_tasks)}")
        for skipped in category.skipped_tasks:
            alerts.append(f"{skipped.task}: skipped ({skipped.reason})")
    report.evaluation_file = evaluation_file
    report.score = round(sum(c.total_score for c in result.results), 3)
    report.max_score = round(sum(c.total_max_score for c in result.results), 3)
    report.sim_score = round(sum(sim_scores), 3) if sim_scores else None
    report.steps_run = steps
    report.milestones = milestones
    report.noops = dict(noops)
    report.dropped_keys = dict(dropped)
    report.sim_fallbacks = dict(fallbacks)
    report.simulator_label = result.simulator.label
    return alerts


def _task_alerts(name: str, metrics: TaskMetrics, task_noops: dict[str, int], video_requested: bool) -> list[str]:
    alerts = []
    if metrics.noop_total:
        causes = ", ".join(f"{cause} {count}" for cause, count in task_noops.items())
        alerts.append(f"{name}: {metrics.noop_total} of {metrics.steps_run} steps were noops ({causes})")
    if metrics.dropped_keys:
        keys = ", ".join(f"{key} x{count}" for key, count in metrics.dropped_keys.items())
        alerts.append(f"{name}: action keys dropped: {keys}")
    if any(metrics.sim_fallbacks.values()):
        shown = ", ".join(f"{key} x{count}" for key, count in metrics.sim_fallbacks.items() if count)
        alerts.append(f"{name}: simulator fallbacks: {shown}")
    if metrics.init is not None and not metrics.init.ok:
        alerts.append(f"{name}: agent init failed ({metrics.init.cause}: {metrics.init.message})")
    if metrics.error:
        alerts.append(f"{name}: episode error: {metrics.error}")
    if video_requested and metrics.video.status in VIDEO_NOT_RUN:
        alerts.append(f"{name}: video evaluation did not run ({metrics.video.status}: {metrics.video.reason})")
    return alerts
