"""From the green's evaluation JSON and the purple's own report to the run report's summary fields.

Every fallback the evaluation counted (noops, dropped keys, simulator fallbacks, unscored tasks, failed inits,
video evaluation that was asked for and did not run) also becomes an alert line, so that it is read, not just stored.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcu_arms.contracts.evaluation import EvaluationResult
from mcu_arms.report.run_report import MilestoneRecord, RunReport
from mcu_arms.supervise.progress import ArmProgress

VIDEO_NOT_RUN = frozenset({"no_api_key", "failed"})


def apply_evaluation(report: RunReport, data: dict[str, Any]) -> list[str]:
    """Fill the report's summary from the evaluation; returns alert lines for every fallback it counted."""
    report.evaluation = data
    try:
        result = EvaluationResult.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return [f"evaluation.json does not match the EvaluationResult model ({where}: {first['msg']}); summary left empty"]
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


def apply_progress(report: RunReport, progress: ArmProgress) -> None:
    """Without an evaluation (the arm failed or was stopped), keep what the green's step logs showed before the end:
    steps run, milestones reached with their step and noops by cause. Milestones not reached are not listed (only
    the evaluation knows them)."""
    report.steps_run = progress.steps_total
    report.milestones = [
        MilestoneRecord(task=task, identity=identity, step=step) for task, identity, step in progress.milestones
    ]
    report.noops = dict(progress.noops)


def _task_alerts(name: str, metrics: Any, task_noops: dict[str, int], video_requested: bool) -> list[str]:
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


def read_purple_report(purple_dir: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The purple's own report (E/purple/*_report.json): its content when there is one, keyed by file when several."""
    if not purple_dir.is_dir():
        return None, []
    reports: dict[str, Any] = {}
    problems: list[str] = []
    for path in sorted(purple_dir.glob("*_report.json")):
        try:
            reports[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            problems.append(f"purple report {path} cannot be read: {error}")
    if not reports:
        return None, problems
    if len(reports) == 1:
        return next(iter(reports.values())), problems
    return reports, problems
