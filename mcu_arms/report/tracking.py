"""`compare --to mlflow|wandb`: the compared episodes as experiment-tracker runs, mapped once, here, for every tracker.

Each finished episode the comparison stands on becomes one run: the arm's settings as params (the keys its
fingerprint covers, secrets masked as in every report), the results as metrics (each milestone's step logged at that
step, so a tracker's charts draw milestones against steps), who/what/where as tags, and the episode's files as
artifacts. The comparison's verdicts become one more run, the parent of the episodes. The mapping is a typed,
library-neutral `TrackingExport`; `report/to_mlflow.py` and `report/to_wandb.py` only write it.

Every run carries our own id (`mcu_arms.run_id`: arm, episode and when it started, so two projects' `demo/episode_001`
stay apart), which a writer looks up first: a rerun updates its run, never adds a second.

Light to import: pydantic and the report models only; matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcu_arms.arms.campaign import is_campaign, load_campaign
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_EVALUATION_BYTES
from mcu_arms.contracts.reading import read_bounded
from mcu_arms.contracts.run_report import RunReport, read_report
from mcu_arms.contracts.simulators import label_of
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES
from mcu_arms.contracts.text import shown_text
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, episode_name
from mcu_arms.report.analysis import Analysis
from mcu_arms.report.compare import to_markdown
from mcu_arms.report.plot import MilestonePanel, PlotArm, PlotCurve, PlotData, build_figure, plot_data
from mcu_arms.stats.survival import episodes, kaplan_meier

TrackerName = Literal["mlflow", "wandb"]
TRACKERS: tuple[TrackerName, ...] = ("mlflow", "wandb")
RunKind = Literal["episode", "comparison"]
TAG_PREFIX = "mcu_arms."
RUN_ID_TAG = f"{TAG_PREFIX}run_id"
# Tag values are bounded (MLflow keeps 8,000 characters of one); notes and alerts are cut well below that.
MAX_TAG_CHARS = 5_000
# What a tracker accepts in a metric or param key (MLflow's rule, the stricter of the two); anything else becomes "_".
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]")


class TrackedMetric(BaseModel):
    key: str
    value: float
    step: int  # the episode step it belongs to: a milestone's landing step, the last step run for totals


class TrackedArtifact(BaseModel):
    """A file of the run, by its name inside the run: copied from `source`, or written from `text`, or drawn."""

    name: str
    source: str | None = None
    text: str | None = None
    plot: PlotData | None = None


class TrackedRun(BaseModel):
    run_id: str  # ours, looked up before anything is written
    kind: RunKind
    name: str
    started_ms: int | None = None
    ended_ms: int | None = None
    params: dict[str, str] = Field(default_factory=dict)
    metrics: list[TrackedMetric] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    description: str = ""  # the run's notes and alerts, as trackers show a run's description
    artifacts: list[TrackedArtifact] = Field(default_factory=list)

    def digest(self) -> str:
        """Changes when anything written for the run would change: how a writer tells "unchanged" from "update"."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


class TrackingExport(BaseModel):
    experiment: str  # the campaign's name, else the arms' names
    comparison: TrackedRun  # the parent of the episodes
    episodes: list[TrackedRun]
    excluded: list[str] = Field(default_factory=list)  # episodes left out, each with why (an unreadable report)


class ExportOutcome(BaseModel):
    """What a writer did, per run: created, updated, or found as it would write it."""

    tracker: TrackerName
    destination: str  # the tracking URI or the offline directory (secrets masked)
    experiment: str
    created: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    excluded: list[str] = Field(default_factory=list)  # episodes left out of the export, each with why

    def text(self) -> str:
        text = (
            f"{self.tracker}: {len(self.created)} run(s) created, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged in experiment '{self.experiment}' at {self.destination}"
        )
        return "\n".join([text, *(f"excluded: {reason}" for reason in self.excluded)])


# The comparison as this module reads it: one adapter, so that the source of the verdicts can change in one place.


class VerdictLine(BaseModel):
    arm: str
    metric: str
    estimate: float | None
    p_value: float | None
    distinguishable: bool
    text: str


class ComparedEpisode(BaseModel):
    arm: str
    episode_dir: str


class Compared(BaseModel):
    """What the export needs of a comparison: its verdicts, the episodes they stand on, and its own files."""

    baseline: str
    arms: list[str]
    verdict: str
    comparable: bool
    trustworthy: bool
    differing: list[str]
    untrusted: list[str]
    lines: list[VerdictLine]
    flags: list[str]
    statistics_method: str
    episodes: list[ComparedEpisode]
    # Across 2 tasks or more: each arm's IQM and its probability of improvement over the baseline, by metric key
    aggregates: dict[str, float] = {}
    document: str  # the comparison as JSON
    markdown: str
    plot: PlotData


def compared(result: Analysis) -> Compared:
    """compare's Analysis, read for the export: the episodes it used, and each difference's verdict on the p it read
    (adjusted over its family when it was)."""
    episodes = []
    for arm in result.arms:
        if arm.latest is None:
            continue
        arm_dir = Path(arm.latest.episode_dir).parent
        episodes += [
            ComparedEpisode(arm=arm.arm, episode_dir=str(arm_dir / episode_name(ref.episode))) for ref in arm.used
        ]
    lines = [
        VerdictLine(
            arm=difference.arm,
            metric=line.metric,
            estimate=line.estimate,
            p_value=line.p_adjusted if line.p_adjusted is not None else line.p,
            distinguishable=line.verdict == "distinguishable",
            text=line.text,
        )
        for difference in result.differences
        for line in difference.lines()
    ]
    aggregates: dict[str, float] = {}
    if result.across_tasks is not None:
        aggregates |= {metric_key("iqm", each.arm): each.iqm for each in result.across_tasks.arms}
        aggregates |= {
            metric_key("probability_of_improvement", each.arm): each.probability
            for each in result.across_tasks.improvement
        }
    return Compared(
        baseline=result.baseline,
        arms=result.arm_names(),
        verdict=result.verdict.text,
        comparable=result.verdict.comparable,
        trustworthy=result.verdict.trustworthy,
        differing=result.verdict.differing,
        untrusted=result.verdict.untrusted,
        lines=lines,
        flags=[f"{flag.kind}{f' ({flag.arm})' if flag.arm else ''}: {flag.message}" for flag in result.flags],
        statistics_method=result.statistics_method,
        episodes=episodes,
        aggregates=aggregates,
        document=result.model_dump_json(indent=2),
        markdown=to_markdown(result),
        plot=plot_data(result),
    )


# The mapping.


def metric_key(*parts: str) -> str:
    """A metric or param key every tracker takes: parts joined by "/", characters outside its alphabet as "_"."""
    return "/".join(_KEY_UNSAFE.sub("_", part) for part in parts)


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(each) for each in value)
    return str(value)


def episode_params(report: RunReport) -> dict[str, str]:
    """The keys the fingerprint covers, as the report shows them (secrets masked), env entries one by one."""
    covered = report.settings.redacted().fingerprinted()
    environment = covered.pop("env", {})
    params = {metric_key(key): _param_text(value) for key, value in covered.items()}
    params |= {metric_key(f"env.{name}"): _param_text(value) for name, value in sorted(environment.items())}
    return params


def _milliseconds(timestamp: str | None) -> int | None:
    return int(datetime.fromisoformat(timestamp).timestamp() * 1000) if timestamp else None


def episode_metrics(report: RunReport) -> list[TrackedMetric]:
    """Totals at the last step run; each milestone's step at that step; milestones reached as they landed."""
    end = report.steps_run or 0
    totals: dict[str, float | None] = {
        "score": report.score,
        "max_score": report.max_score,
        "sim_score": report.sim_score,
        "steps_run": report.steps_run,
        "wall_s": report.wall_s,
        "infrastructure_noops": sum(n for cause, n in report.infrastructure.items() if cause in INFRASTRUCTURE_CAUSES),
        "infrastructure_share": report.infrastructure_share,
    }
    totals |= {metric_key("task_score", task): scored.score for task, scored in (report.task_scores or {}).items()}
    totals |= {metric_key("infrastructure", cause): count for cause, count in report.infrastructure.items()}
    totals |= {metric_key("behaviour", cause): count for cause, count in report.behaviour.items()}
    metrics = [
        TrackedMetric(key=key, value=float(value), step=end) for key, value in totals.items() if value is not None
    ]
    landed = sorted((m.step, m.task, m.identity) for m in report.milestones if m.available and m.step is not None)
    metrics += [
        TrackedMetric(key=metric_key("milestone", task, identity), value=step, step=step)
        for step, task, identity in landed
    ]
    reached = [TrackedMetric(key="milestones_reached", value=0, step=0)]
    for count, (step, _, _) in enumerate(landed, start=1):
        if reached[-1].step == step:
            reached[-1] = TrackedMetric(key="milestones_reached", value=count, step=step)
        else:
            reached.append(TrackedMetric(key="milestones_reached", value=count, step=step))
    if reached[-1].step < end:
        reached.append(TrackedMetric(key="milestones_reached", value=len(landed), step=end))
    return metrics + reached


def episode_run_id(report: RunReport) -> str:
    return f"{report.arm}/{episode_name(report.episode)}@{report.started_at}"


def _bounded(lines: list[str]) -> str:
    return shown_text("\n".join(lines), MAX_TAG_CHARS, one_line=False)


def episode_plot(report: RunReport) -> PlotData:
    """This episode's milestones, drawn as `compare --plot` draws an arm of one episode: per milestone a step from 0 to
    1 where it was reached (censored at the steps run when not)."""
    panels = []
    for milestone in report.milestones:
        if not milestone.available:
            continue
        survival = kaplan_meier(episodes([milestone.step], [report.steps_run or 0]))
        curve = PlotCurve(arm=report.arm, n=1, median=survival.median, curve=survival.reaching())
        panels.append(MilestonePanel(task=milestone.task, identity=milestone.identity, curves=[curve]))
    label = report.simulator_label or label_of(report.settings.simulator)
    title = f"{report.arm} seed {report.settings.seed}, {episode_name(report.episode)}: {report.settings.task}\n{label}"
    arm = PlotArm(arm=report.arm, label=report.arm, replicates=1)
    return PlotData(title=title, arms=[arm], milestones=panels, not_plotted=[])


def episode_run(run_dir: RunDir, report: RunReport, parent_id: str) -> TrackedRun:
    tags = {
        "arm": report.arm,
        "episode": str(report.episode),
        "seed": str(report.settings.seed),
        "fingerprint": report.fingerprint,
        "simulator": report.simulator_label or label_of(report.settings.simulator),
        "status": report.status,
        "source": report.source,
        "mcu_arms_version": report.provenance.mcu_arms_version,
        "parent": parent_id,
    }
    if report.provenance.git_sha:
        tags["git_sha"] = report.provenance.git_sha
        tags["git_dirty"] = _param_text(bool(report.provenance.git_dirty))
    if report.notes:
        tags["notes"] = _bounded(report.notes)
    if report.alerts:
        tags["alerts"] = _bounded(report.alerts)
    artifacts = [TrackedArtifact(name="result.json", source=str(run_dir.report))]
    evaluation = run_dir.resolve(report.evaluation_file, "evaluation_file") if report.evaluation_file else None
    if evaluation is not None and evaluation.is_file():
        artifacts.append(TrackedArtifact(name="evaluation.json", source=str(evaluation)))
    artifacts.append(TrackedArtifact(name="milestones.png", plot=episode_plot(report)))
    run_id = episode_run_id(report)
    description = [*report.notes, *(f"ALERT: {alert}" for alert in report.alerts)]
    return TrackedRun(
        run_id=run_id,
        kind="episode",
        name=f"{report.arm} s{report.settings.seed} ({episode_name(report.episode)})",
        started_ms=_milliseconds(report.started_at),
        ended_ms=_milliseconds(report.finished_at),
        params=episode_params(report),
        metrics=episode_metrics(report),
        tags={RUN_ID_TAG: run_id, **{TAG_PREFIX + key: value for key, value in tags.items()}},
        description=_bounded(description),
        artifacts=artifacts,
    )


def comparison_run(comparison: Compared, experiment: str) -> TrackedRun:
    """The verdicts: tags to read, each difference's estimate and p-value as metrics, the comparison as files."""
    run_id = f"comparison:{experiment}"
    tags = {
        "verdict": comparison.verdict,
        "comparable": _param_text(comparison.comparable),
        "trustworthy": _param_text(comparison.trustworthy),
        "differing": ",".join(comparison.differing),
        "baseline": comparison.baseline,
        "arms": ",".join(comparison.arms),
        "statistics": comparison.statistics_method,
    }
    if comparison.untrusted:
        tags["untrusted"] = _bounded(comparison.untrusted)
    if comparison.lines:
        tags["differences"] = _bounded([line.text for line in comparison.lines])
    if comparison.flags:
        tags["flags"] = _bounded(comparison.flags)
    metrics = [
        TrackedMetric(key="comparable", value=float(comparison.comparable), step=0),
        TrackedMetric(key="trustworthy", value=float(comparison.trustworthy), step=0),
    ]
    metrics += [TrackedMetric(key=key, value=value, step=0) for key, value in comparison.aggregates.items()]
    for line in comparison.lines:
        if line.estimate is not None:
            key = metric_key("difference", line.arm, line.metric)
            metrics.append(TrackedMetric(key=key, value=line.estimate, step=0))
        if line.p_value is not None:
            metrics.append(TrackedMetric(key=metric_key("p_value", line.arm, line.metric), value=line.p_value, step=0))
    return TrackedRun(
        run_id=run_id,
        kind="comparison",
        name=f"comparison ({' vs '.join(comparison.arms)})",
        metrics=metrics,
        tags={RUN_ID_TAG: run_id, **{TAG_PREFIX + key: value for key, value in tags.items()}},
        description=_bounded([comparison.verdict, *(line.text for line in comparison.lines), *comparison.flags]),
        artifacts=[
            TrackedArtifact(name="comparison.json", text=comparison.document),
            TrackedArtifact(name="comparison.md", text=comparison.markdown),
            TrackedArtifact(name="milestones.png", plot=comparison.plot),
        ],
    )


def experiment_name(items: list[str], env: Environment, arms: list[str]) -> str:
    """The campaign's name when one campaign was compared, else the arms' names."""
    paths = [Path(item) if Path(item).is_absolute() else env.cwd / item for item in items]
    if len(paths) == 1 and is_campaign(paths[0]):
        return load_campaign(paths[0], env.arms_dir).name
    return " vs ".join(arms)


def tracking_export(comparison: Compared, experiment: str) -> TrackingExport:
    """Every finished episode the comparison stands on, and the comparison itself, as runs."""
    parent = comparison_run(comparison, experiment)
    episodes, excluded = [], []
    for each in comparison.episodes:
        run_dir = RunDir(Path(each.episode_dir))
        try:
            report = read_report(run_dir.report)
            if report.status == "finished":
                episodes.append(episode_run(run_dir, report, parent.run_id))
        except UserError as error:
            excluded.append(f"{run_dir.path}: unreadable, left out: {error.render()}")
    return TrackingExport(experiment=experiment, comparison=parent, episodes=episodes, excluded=excluded)


def materialise(artifact: TrackedArtifact, scratch: Path) -> Path:
    """The artifact as `scratch/<its name>`, the file a tracker takes: its source copied (never through a link),
    or its text written, or its plot drawn."""
    path = scratch / artifact.name
    path.parent.mkdir(parents=True, exist_ok=True)
    if artifact.source is not None:
        path.write_bytes(read_bounded(Path(artifact.source), MAX_EVALUATION_BYTES, artifact.name))
    elif artifact.text is not None:
        path.write_text(artifact.text, encoding="utf-8")
    elif artifact.plot is not None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        figure = build_figure(artifact.plot)
        FigureCanvasAgg(figure)
        figure.savefig(path, format="png", metadata={"Software": None})
    else:
        raise ValueError(f"artifact {artifact.name} has nothing to write")
    return path


def parse_destination(value: str) -> tuple[TrackerName, str | None]:
    """`--to mlflow[=TRACKING_URI]` or `--to wandb[=DIR]`."""
    name, _, where = value.partition("=")
    if name not in TRACKERS:
        raise UserError(
            f"'{name}' is not a tracker mcu-arms writes to",
            key="--to",
            allowed="mlflow, mlflow=TRACKING_URI, wandb, wandb=DIR, agentbeats=DIR",
        )
    if "=" in value and not where:
        destination = "TRACKING_URI" if name == "mlflow" else "DIR"
        raise UserError(
            f"'{value}' names no destination after '='",
            key="--to",
            allowed=f"{name} (its default) or {name}={destination}",
        )
    if importlib.util.find_spec(name) is None:
        raise missing_extra(name)
    return name, where or None


def missing_extra(tracker: TrackerName) -> UserError:
    return UserError(
        f"exporting to {tracker} needs the '{tracker}' extra, which is not installed",
        key="--to",
        allowed=f"pip install 'mcu-arms[{tracker}]'",
    )
