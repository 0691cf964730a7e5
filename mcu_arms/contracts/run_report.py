"""The run report, `output/<arm>/episode_NNN/result.json` (linked as `logs/<arm>_result.json`).

Written at launch with status `started` and finalised atomically as `finished`, `failed` or `interrupted`. It is
the unit `compare` reads and the unit a rerun checks (same fingerprint + finished -> skipped). Paths in it are
relative to the episode directory, so an archived or moved `output/` still resolves. The green's evaluation lives
in its own file (`green/evaluation.json`); the report keeps the summary of it and of the agent's own report.

Versioned: a report of an older schema is migrated when read (`_migrate`), never rewritten behind the user's back.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from mcu_arms.contracts.agent_card import CardIdentity
from mcu_arms.contracts.agent_report import AgentSummary
from mcu_arms.contracts.errors import UserError, user_error
from mcu_arms.contracts.evaluation import EvaluationResult, TaskMetrics, top_counts
from mcu_arms.contracts.limits import MAX_REPORT_BYTES
from mcu_arms.contracts.reading import read_json, stored_path_problem
from mcu_arms.contracts.redaction import scrub
from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.contracts.settings import CampaignTag, Settings, Thresholds
from mcu_arms.contracts.slurm import SlurmJob
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES, FailureKind, ProcessRole, RunStatus

RUN_REPORT_SCHEMA_VERSION = 2
VIDEO_NOT_RUN = frozenset({"no_api_key", "failed"})


class Provenance(BaseModel):
    mcu_arms_version: str
    # How that mcu-arms was installed (mcu_arms/version.py); absent from reports written before it was recorded.
    # From a checkout, its commit and whether it had changes: the version alone does not name the code then.
    mcu_arms_install: Literal["wheel", "checkout"] | None = None
    mcu_arms_commit: str | None = None
    mcu_arms_dirty: bool | None = None
    git_sha: str | None
    git_dirty: bool | None
    python: str
    packages: dict[str, str | None]
    host: str
    platform: str


class ProcessRecord(BaseModel):
    role: str  # a ProcessRole, or SUPERVISOR_ROLE for the `mcu-arms run` that supervises the arm
    pid: int | None = Field(default=None, gt=0)  # a report naming pid 0 or below is not a report
    create_time: float | None = None
    argv: list[str] = Field(default_factory=list)
    log: str  # relative to the episode directory
    exit_code: int | None = None
    owner_token: str | None = None  # in the process's environment and its descendants': how orphans are found
    cgroup: str | None = None  # its own cgroup v2, where the host allows one: finds even those that drop the token
    # What the supervisor last saw of it (absent from reports written before these were kept): psutil's status while
    # it ran (psutil.STATUS_*: "running", "sleeping", "stopped"...), and the signal that ended it, by name (None when
    # it exited on its own; "SIGTERM" when the supervisor stopped it at the end).
    last_status: str | None = None
    signal: str | None = None

    @field_validator("argv")
    @classmethod
    def _no_secret_in_argv(cls, argv: list[str]) -> list[str]:
        """A report keeps the command line as it may be shown: secret-shaped arguments masked."""
        return [scrub(part) for part in argv]


class Failure(BaseModel):
    process: ProcessRole | None  # None: mcu-arms itself
    kind: FailureKind = "infrastructure"
    reason: str
    exit_code: int | None = None
    log_tail: list[str] = Field(default_factory=list)
    stopped_by: str | None = None  # who asked for the stop (`mcu-arms stop (pid N)`, a run's Ctrl-C), when one did


class MilestoneRecord(BaseModel):
    task: str
    identity: str
    step: int | None
    available: bool = True


class TaskScore(BaseModel):
    """One scored task's score in an episode (the EvaluationResult's task_metrics[task].score and max_score)."""

    score: float
    max_score: float


class RunReport(BaseModel):
    schema_version: int = RUN_REPORT_SCHEMA_VERSION
    status: RunStatus
    arm: str
    episode: int
    attempt: int = 1  # >1: a retry of an episode of the same arm and seed that failed for infrastructure reasons
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
    sim_score: float | None = None  # the tasks' normalised_sim_score summed (each scaled to its max_score)
    # Per scored task, its score and max_score (their sums are score and max_score); None: written before they were
    # recorded. The unscored tasks, left out of both, are named in unscored_tasks.
    task_scores: dict[str, TaskScore] | None = None
    unscored_tasks: list[str] = Field(default_factory=list)
    steps_run: int | None = None
    milestones: list[MilestoneRecord] = Field(default_factory=list)
    noops: dict[str, int] = Field(default_factory=dict)
    dropped_keys: dict[str, int] = Field(default_factory=dict)
    sim_fallbacks: dict[str, int] = Field(default_factory=dict)
    # Trouble by cause, never mixed: infrastructure can fail the arm (thresholds), behaviour is information.
    infrastructure: dict[str, int] = Field(default_factory=dict)
    behaviour: dict[str, int] = Field(default_factory=dict)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    notes: list[str] = Field(default_factory=list)  # behaviour worth reading (no-effect inputs, deaths): not alerts
    evaluation_file: str | None = None  # the green's EvaluationResult, relative to the episode directory
    agent: AgentSummary | None = None  # from the purple's own report, when it writes one
    # The agent card another program's purple served (agent "a2a"): what it said it is, and the card's digest.
    purple_card: CardIdentity | None = None
    warnings: list[str] = Field(default_factory=list)  # what the plan warned about before the run (caps, payload)
    plan_notes: list[str] = Field(default_factory=list)  # the plan's fixed facts (a milestone never reachable here)
    tags: dict[str, str] = Field(default_factory=dict)  # `run --tag KEY=VALUE`: why this run was made, to filter by
    note: str | None = None  # `run --note TEXT`
    alerts: list[str] = Field(default_factory=list)  # infrastructure trouble and silent degradation, made loud
    logs: dict[str, str] = Field(default_factory=dict)  # role -> log, relative to the episode directory
    output_dirs: dict[str, str] = Field(default_factory=dict)  # green / purple -> dir, relative likewise
    # Where the run was written (--output-dir, MCU_ARMS_OUTPUT_DIR or output/), as it was then: a record, never
    # needed to find the files, which are relative to the episode wherever it now is. None before it was recorded.
    output_root: str | None = None
    # The Slurm job the episode ran as (None: run on the host that started it). Its processes (pids in
    # `processes`) are on `slurm.node`; only this job id is ever cancelled for it.
    slurm: SlurmJob | None = None
    campaign: CampaignTag | None = None  # the campaign this episode ran for (None: run as an arm of its own)
    # The look of a sequential run this episode belonged to (None: a fixed-n run).
    sequential: SequentialLook | None = None

    @field_validator("noops", "dropped_keys", "sim_fallbacks")
    @classmethod
    def _bounded_counts(cls, counts: dict[str, int]) -> dict[str, int]:
        return top_counts(counts)

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Read a schema-1 report (the first tranche's) as schema 2."""
        if not isinstance(data, dict) or data.get("schema_version", 1) >= RUN_REPORT_SCHEMA_VERSION:
            return data
        data = dict(data)
        data["schema_version"] = RUN_REPORT_SCHEMA_VERSION
        episode_dir = data.pop("episode_dir", None)
        if isinstance(episode_dir, str):
            _relative_to(data, episode_dir)
        if data.pop("evaluation", None) is not None:
            data["evaluation_file"] = "evaluation.json"  # schema 1 kept the client's copy at the episode's top
        purple = data.pop("purple_report", None)
        if isinstance(purple, dict):
            data["agent"] = _summary_from_schema_1(purple)
        output_dirs = data.get("output_dirs") or {}
        output_dirs.pop("episode", None)
        noops = data.get("noops") or {}
        data["infrastructure"] = {cause: n for cause, n in noops.items() if cause in INFRASTRUCTURE_CAUSES}
        data["behaviour"] = {cause: n for cause, n in noops.items() if cause not in INFRASTRUCTURE_CAUSES}
        return data

    @property
    def infrastructure_share(self) -> float | None:
        """Infrastructure noops over the steps run, or None before any step."""
        noops = sum(self.infrastructure.get(cause, 0) for cause in INFRASTRUCTURE_CAUSES)
        return noops / self.steps_run if self.steps_run else None

    def milestone_counts(self) -> tuple[int, int, int]:
        """(reached, total, reachable on this simulator) over every task's milestones or reward entries."""
        reached = sum(1 for m in self.milestones if m.step is not None)
        return reached, len(self.milestones), sum(1 for m in self.milestones if m.available)


def _relative_to(data: dict[str, Any], episode_dir: str) -> None:
    """Schema 1 stored absolute paths under its episode_dir: each such path made relative to it, as schema 2 keeps
    them (one elsewhere stays absolute, and the reading rules refuse it)."""
    prefix = episode_dir.rstrip("/") + "/"

    def relative(value: Any) -> Any:
        return value[len(prefix) :] if isinstance(value, str) and value.startswith(prefix) else value

    for name in ("logs", "output_dirs"):
        if isinstance(data.get(name), dict):
            data[name] = {role: relative(path) for role, path in data[name].items()}
    if isinstance(data.get("processes"), dict):
        data["processes"] = {
            role: {**process, "log": relative(process.get("log"))} if isinstance(process, dict) else process
            for role, process in data["processes"].items()
        }


def _summary_from_schema_1(purple: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 stored the purple's report whole; its counters sat at the top (codex) or under `stats` (scripted)."""

    def number(key: str) -> int | None:
        value = purple.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    stats = purple.get("stats")
    counters = stats if isinstance(stats, dict) else {}
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
    """A run report read as untrusted input (contracts/reading.py: bounded, numbers checked, text neutralised, paths
    inside the episode), or a UserError naming the file (and the key) when it is not one."""
    data = read_json(path, MAX_REPORT_BYTES, "run report")
    if isinstance(data, dict) and isinstance(data.get("schema_version"), int):
        if data["schema_version"] > RUN_REPORT_SCHEMA_VERSION:
            raise UserError(
                f"run report schema {data['schema_version']} is newer than this mcu-arms reads "
                f"({RUN_REPORT_SCHEMA_VERSION}); upgrade mcu-arms",
                path=path,
                key="schema_version",
            )
    try:
        report = RunReport.model_validate(data)
    except ValidationError as error:
        problem = user_error(error, path=path)
        raise UserError(f"not a run report: {problem.message}", path=path, key=problem.key) from None
    _check_read_report(report, path)
    return report


# What a report counts or measures, never below zero when read.
_NOT_NEGATIVE = ("score", "max_score", "steps_run", "wall_s")
_COUNTS = ("noops", "dropped_keys", "sim_fallbacks", "infrastructure", "behaviour")


def stored_paths(report: RunReport) -> dict[str, str]:
    """Every path the report names (key -> path), each relative to its episode directory ("" names none)."""
    paths = {f"logs.{role}": log for role, log in report.logs.items()}
    paths |= {f"output_dirs.{role}": folder for role, folder in report.output_dirs.items()}
    paths |= {f"processes.{role}.log": record.log for role, record in report.processes.items()}
    if report.evaluation_file is not None:
        paths["evaluation_file"] = report.evaluation_file
    if report.agent is not None and report.agent.report_file:
        paths["agent.report_file"] = report.agent.report_file
    return {key: path for key, path in paths.items() if path}


def _check_read_report(report: RunReport, path: Path) -> None:
    """What a report read from disk must hold beyond its schema: no negative measure or count, no path out."""
    for key in _NOT_NEGATIVE:
        value = getattr(report, key)
        if value is not None and value < 0:
            raise UserError(f"not a run report: {value!r} is negative", path=path, key=key, allowed="0 or more")
    for task, scored in (report.task_scores or {}).items():
        for key in ("score", "max_score"):
            if getattr(scored, key) < 0:
                raise UserError(
                    f"not a run report: {getattr(scored, key)!r} is negative",
                    path=path,
                    key=f"task_scores.{task}.{key}",
                    allowed="0 or more",
                )
    for name in _COUNTS:
        for cause, count in getattr(report, name).items():
            if count < 0:
                raise UserError(
                    f"not a run report: a count of {count}", path=path, key=f"{name}.{cause}", allowed="0 or more"
                )
    for key, stored in stored_paths(report).items():
        problem = stored_path_problem(stored)
        if problem is not None:
            raise UserError(
                f"not a run report: it names {stored!r}, {problem}; paths in a report stay inside its episode",
                path=path,
                key=key,
            )


def task_trouble(metrics: TaskMetrics) -> tuple[dict[str, int], dict[str, int]]:
    """One task's infrastructure trouble and agent behaviour, each counted by cause (a run's are their sums)."""
    infrastructure: Counter[str] = Counter()
    behaviour: Counter[str] = Counter()
    for cause, stats in metrics.noops.items():
        (infrastructure if cause in INFRASTRUCTURE_CAUSES else behaviour)[cause] += stats.count
    if metrics.init is not None and not metrics.init.ok:
        infrastructure["init_failed"] += 1
    if metrics.error:
        infrastructure["task_error"] += 1
    behaviour.update({f"dropped.{key}": count for key, count in metrics.dropped_keys.items()})
    behaviour.update({key: count for key, count in metrics.sim_fallbacks.items() if count})
    return dict(infrastructure), dict(behaviour)


def summarise_evaluation(report: RunReport, result: EvaluationResult, evaluation_file: str) -> list[str]:
    """Fill the report's summary from the evaluation; returns alert lines for the infrastructure trouble it counted.

    Infrastructure trouble (noops the agent could not help, failed inits, task errors, video evaluation that was
    asked for and did not run) becomes an alert line, so that it is read, not just stored; agent behaviour (invalid
    answers, dropped keys, inputs without effect, deaths) goes to the report's notes, counted by cause.
    """
    alerts: list[str] = []
    notes: list[str] = []
    infrastructure: Counter[str] = Counter()
    behaviour: Counter[str] = Counter()
    noops: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    fallbacks: Counter[str] = Counter()
    milestones: list[MilestoneRecord] = []
    task_scores: dict[str, TaskScore] = {}
    unscored: list[str] = []
    sim_scores: list[float] = []
    steps = 0
    for category in result.results:
        for name, metrics in category.task_metrics.items():
            steps += metrics.steps_run
            if metrics.scored and metrics.score is not None:
                task_scores[name] = TaskScore(score=metrics.score, max_score=metrics.max_score)
            else:
                unscored.append(name)
            if metrics.normalised_sim_score is not None:
                sim_scores.append(metrics.normalised_sim_score)
            milestones += [
                MilestoneRecord(task=name, identity=m.identity, step=m.step, available=m.available)
                for m in metrics.milestones
            ]
            task_noops = {cause: stats.count for cause, stats in metrics.noops.items()}
            noops.update(task_noops)
            dropped.update(metrics.dropped_keys)
            fallbacks.update(metrics.sim_fallbacks)
            task_infrastructure, task_behaviour = task_trouble(metrics)
            infrastructure.update(task_infrastructure)
            behaviour.update(task_behaviour)
            alerts += _task_alerts(name, metrics, task_noops, report.settings.video_eval)
            notes += _task_notes(name, metrics, task_noops)
        if category.unscored_tasks:
            alerts.append(
                f"{category.task_category}: unscored, left out of the total: {', '.join(category.unscored_tasks)}"
            )
        for skipped in category.skipped_tasks:
            alerts.append(f"{skipped.task}: skipped ({skipped.reason})")
    report.evaluation_file = evaluation_file
    report.score = round(sum(c.total_score for c in result.results), 3)
    report.max_score = round(sum(c.total_max_score for c in result.results), 3)
    report.sim_score = round(sum(sim_scores), 3) if sim_scores else None
    report.task_scores = task_scores
    report.unscored_tasks = unscored
    report.steps_run = steps
    report.milestones = milestones
    report.noops = top_counts(noops)
    report.dropped_keys = top_counts(dropped)
    report.sim_fallbacks = top_counts(fallbacks)
    report.infrastructure = dict(sorted(infrastructure.items()))
    report.behaviour = dict(sorted(behaviour.items()))
    report.notes = notes
    report.simulator_label = result.simulator.label
    return alerts


def _task_alerts(name: str, metrics: TaskMetrics, task_noops: dict[str, int], video_requested: bool) -> list[str]:
    alerts = []
    infrastructure = {cause: count for cause, count in task_noops.items() if cause in INFRASTRUCTURE_CAUSES}
    if infrastructure:
        causes = ", ".join(f"{cause} {count}" for cause, count in infrastructure.items())
        share = metrics.infrastructure_noops / metrics.steps_run if metrics.steps_run else 0.0
        failures = ", ".join(f"{cause} x{count}" for cause, count in metrics.agent_failures.items())
        alerts.append(
            f"{name}: {metrics.infrastructure_noops} of {metrics.steps_run} steps ({share:.0%}) were infrastructure "
            f"noops ({causes}{'; the agent reported: ' + failures if failures else ''}), "
            f"at most {metrics.longest_infrastructure_run} in a row"
        )
    if metrics.init is not None and not metrics.init.ok:
        alerts.append(f"{name}: agent init failed ({metrics.init.cause}: {metrics.init.message})")
    if metrics.error:
        alerts.append(f"{name}: episode error: {metrics.error}")
    if video_requested and metrics.video.status in VIDEO_NOT_RUN:
        alerts.append(f"{name}: video evaluation did not run ({metrics.video.status}: {metrics.video.reason})")
    return alerts


def _task_notes(name: str, metrics: TaskMetrics, task_noops: dict[str, int]) -> list[str]:
    """What the agent did that could not be applied or had no effect: information, shown, never an alert."""
    notes = []
    behaviour = {cause: count for cause, count in task_noops.items() if cause not in INFRASTRUCTURE_CAUSES}
    if behaviour:
        causes = ", ".join(f"{cause} {count}" for cause, count in behaviour.items())
        notes.append(
            f"{name}: {sum(behaviour.values())} of {metrics.steps_run} answers could not be applied ({causes})"
        )
    if metrics.dropped_keys:
        keys = ", ".join(f"{key} x{count}" for key, count in metrics.dropped_keys.items())
        notes.append(f"{name}: action keys dropped: {keys}")
    if metrics.no_effect_steps:
        notes.append(f"{name}: {metrics.no_effect_steps} of {metrics.steps_run} steps had an input with no effect here")
    fallbacks = {key: count for key, count in metrics.sim_fallbacks.items() if count}
    if fallbacks:
        notes.append(
            f"{name}: simulator fallbacks: " + ", ".join(f"{key} x{count}" for key, count in fallbacks.items())
        )
    return notes


def threshold_breaches(result: EvaluationResult, thresholds: Thresholds) -> list[str]:
    """Why this evaluation's infrastructure trouble fails its arm (empty: it does not)."""
    breaches = []
    for category in result.results:
        for name, metrics in category.task_metrics.items():
            if thresholds.init_must_succeed and metrics.init is not None and not metrics.init.ok:
                breaches.append(
                    f"{name}: the agent's init did not succeed ({metrics.init.cause}: {metrics.init.message})"
                )
            if thresholds.task_error_fails and metrics.error:
                breaches.append(f"{name}: the task ended through an error: {metrics.error}")
            share = metrics.infrastructure_noops / metrics.steps_run if metrics.steps_run else 0.0
            if share > thresholds.infrastructure_share:
                breaches.append(
                    f"{name}: {metrics.infrastructure_noops} of {metrics.steps_run} steps ({share:.0%}) were "
                    f"infrastructure noops, above the threshold of {thresholds.infrastructure_share:.0%}"
                )
            if metrics.longest_infrastructure_run >= thresholds.infrastructure_in_a_row:
                breaches.append(
                    f"{name}: {metrics.longest_infrastructure_run} infrastructure noops in a row "
                    f"(threshold {thresholds.infrastructure_in_a_row})"
                )
    return breaches
