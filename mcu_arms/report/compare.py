"""Arms side by side: which settings differ, what each scored, and when each milestone landed.

The score counts milestones reached and is blind to how many steps each took, so the milestone matrix (step per
milestone per arm, with the delta against a baseline arm) is the comparison that matters. Everything that makes a
comparison untrustworthy (more than one setting differing, different simulators, runs of one arm with different
fingerprints, an arm file edited since its run, failed or missing runs) is flagged, never hidden.

Light to import: pydantic and the arm/report models only.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcu_arms.arms.campaign import is_campaign, load_campaign
from mcu_arms.arms.plan import apply_overrides, resolve_settings
from mcu_arms.arms.spec import ARM_NAME_PATTERN, ArmSpec, load_arm
from mcu_arms.contracts.catalog import CODEX_AGENTS, PLANNED_AGENTS
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import RunReport
from mcu_arms.contracts.settings import (
    REPLICATE_AND_PLACEMENT_KEYS,
    Overrides,
    Settings,
    Thresholds,
    differing_keys,
    fingerprint,
    flat_settings,
    setting_follows,
)
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES
from mcu_arms.environment import Environment
from mcu_arms.layout import EPISODE_PATTERN, arm_runs
from mcu_arms.report.stats import METHOD as STATS_METHOD
from mcu_arms.report.stats import Difference, MilestoneStats, Summary, compare_means, milestone_stats, summarise

COMPARISON_SCHEMA_VERSION = 1
# Where a setting only says where things run, or which replicate ran: shown with --all, never a difference.
NOISE_SETTINGS: frozenset[str] = REPLICATE_AND_PLACEMENT_KEYS
# Which agent kinds report each purple counter; for the others it is "n/a", so that a blank never reads as zero.
REPORTED_BY: dict[str, frozenset[str]] = {
    "failed_turns": CODEX_AGENTS | PLANNED_AGENTS,
    "compactions": CODEX_AGENTS,
    "overflow_resets": CODEX_AGENTS,
    **{key: PLANNED_AGENTS for key in (
        "decisions", "invalid_outputs", "stale_replans", "reflex_interrupts", "median_planner_ms", "median_decision_ms"
    )},
}  # fmt: skip
NOT_REACHED = "—"
UNAVAILABLE = "n/a"
NO_RUN = "no run"
EXIT_COMPARABLE = 0
EXIT_NOT_COMPARABLE = 1
EXIT_NOT_TRUSTWORTHY = 3

PURPLE_COUNTERS: set[str] = set(REPORTED_BY) | {"invalid_outputs_by_kind", "failed_turns_by_reason"}

ArmStatus = Literal["finished", "failed", "interrupted", "queued", "started", "no run"]
CellState = Literal["reached", "not reached", "unavailable", "no run", "not in run"]


class Flag(BaseModel):
    """Something that makes a number less trustworthy; printed loudly above the tables."""

    kind: str
    arm: str | None = None
    message: str


class ArmResult(BaseModel):
    """One arm's selected run (or its arm file alone, when it never ran)."""

    arm: str
    source: str | None  # the arm file, when there is one
    status: ArmStatus
    settings_from: Literal["report", "arm file"]
    settings: Settings
    episode: int | None = None
    episode_dir: str | None = None
    report_path: str | None = None
    fingerprint: str
    episodes: dict[int, str] = Field(default_factory=dict)  # every run of this arm: episode -> status
    simulator_label: str | None = None
    score: float | None = None
    sim_score: float | None = None
    max_score: float | None = None
    steps_run: int | None = None
    wall_s: float | None = None
    steps_per_minute: float | None = None
    noops: dict[str, int] = Field(default_factory=dict)
    noop_total: int | None = None
    dropped_keys: dict[str, int] = Field(default_factory=dict)
    sim_fallbacks: dict[str, int] = Field(default_factory=dict)
    purple_report: bool = False  # False: the counters below are unknown, not zero
    failed_turns: int | None = None
    failed_turns_by_reason: dict[str, int] = Field(default_factory=dict)  # the planned agent's: model failures by cause
    infrastructure: dict[str, int] = Field(default_factory=dict)  # noops and failures the agent could not help
    infrastructure_share: float | None = None  # of the steps run
    behaviour: dict[str, int] = Field(default_factory=dict)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    compactions: int | None = None
    overflow_resets: int | None = None
    decisions: int | None = None
    invalid_outputs: int | None = None
    invalid_outputs_by_kind: dict[str, int] = Field(default_factory=dict)
    stale_replans: int | None = None
    reflex_interrupts: int | None = None
    median_planner_ms: float | None = None
    median_decision_ms: float | None = None
    compaction_limit: int
    failure_reason: str | None = None
    failure_process: str | None = None
    replicates: Replicates | None = None  # None: the arm never ran
    logs: dict[str, str] = Field(default_factory=dict)
    alerts: list[str] = Field(default_factory=list)


class SettingRow(BaseModel):
    key: str
    values: list[Any]  # one per arm, in arm order; secret env values as *** with a short hash
    differs: bool
    ignored: bool = False  # noise: never counted as a difference
    follows: str | None = None  # differs only because this other setting differs: not counted on its own

    def counted(self) -> bool:
        return self.differs and not self.ignored and self.follows is None


class MilestoneCell(BaseModel):
    state: CellState
    step: int | None = None  # with replicates: the median step of those that reached it
    delta: int | None = None  # step minus the baseline's step, when both reached it
    replicates: MilestoneStats | None = None  # k/n reached, median and IQR, when the arm ran several seeds

    def text(self) -> str:
        if self.replicates is not None and self.replicates.n > 1:
            return self.replicates.text()
        if self.state == "reached":
            return str(self.step)
        return {"not reached": NOT_REACHED, "unavailable": UNAVAILABLE, "no run": NO_RUN}.get(self.state, "")


class EpisodeMilestones(BaseModel):
    """One replicate's milestones: the step each was reached at (None: not reached), for figures and exports."""

    episode: int
    seed: int
    steps_run: int | None
    score: float | None
    steps: dict[str, int | None]  # "task/identity" -> step


class Replicates(BaseModel):
    """An arm's finished episodes of one experiment (its fingerprint), one per seed: what its numbers stand on."""

    n: int
    seeds: list[int]
    episodes: list[int]
    score: Summary
    milestones: dict[str, MilestoneStats]  # "task/identity" -> k/n, median step, IQR
    per_episode: list[EpisodeMilestones]


class ArmDifference(BaseModel):
    """One arm against the baseline: the score and each milestone's step, with intervals and the verdict at n."""

    arm: str
    baseline: str
    score: Difference
    milestone_steps: list[Difference]


class MilestoneRow(BaseModel):
    task: str
    identity: str
    cells: list[MilestoneCell]  # one per arm, in arm order


class Verdict(BaseModel):
    comparable: bool
    identical: bool
    differing: list[str]
    text: str
    trustworthy: bool = True  # False: an arm's numbers are dominated by infrastructure trouble
    untrusted: list[str] = Field(default_factory=list)  # why, per arm


class ComparisonResult(BaseModel):
    schema_version: int = COMPARISON_SCHEMA_VERSION
    baseline: str
    show_all: bool
    arms: list[ArmResult]
    settings: list[SettingRow]
    milestones: list[MilestoneRow]
    verdict: Verdict
    differences: list[ArmDifference] = Field(default_factory=list)
    statistics_method: str = STATS_METHOD
    flags: list[Flag] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if not self.verdict.trustworthy:
            return EXIT_NOT_TRUSTWORTHY
        return EXIT_COMPARABLE if self.verdict.comparable else EXIT_NOT_COMPARABLE

    def arm_names(self) -> list[str]:
        return [arm.arm for arm in self.arms]


class ArmTarget(BaseModel):
    """An arm named on the command line, resolved to its arm file (if any) and its output dir. An arm written inline
    in a campaign file carries its spec instead of a file of its own."""

    model_config = {"arbitrary_types_allowed": True}

    spec: ArmSpec | None = None
    name: str
    source: Path | None
    output_dir: Path


def _campaign_targets(path: Path, env: Environment) -> list[ArmTarget]:
    """A campaign's baseline, then its variants."""
    campaign = load_campaign(path, env.arms_dir)
    return [
        ArmTarget(
            name=arm.spec.name,
            source=arm.source if arm.source != path else None,
            spec=arm.spec if arm.source == path else None,
            output_dir=env.output_dir / arm.spec.name,
        )
        for arm in campaign.arms()
    ]


def resolve_targets(items: list[str], env: Environment) -> list[ArmTarget]:
    """Each item is an arm file, a campaign file (its baseline, then its variants), an output/<arm>/ dir, or a name
    (arms/NAME.toml, else output/NAME/)."""
    if not items:
        raise UserError("name the arms to compare (arm files, names or output dirs)", allowed=_known_arms(env))
    targets: list[ArmTarget] = []
    for item in items:
        path = Path(item) if Path(item).is_absolute() else env.cwd / item
        for target in _campaign_targets(path, env) if is_campaign(path) else [_resolve_target(item, env)]:
            _add_target(targets, target)
    return targets


def _add_target(targets: list[ArmTarget], target: ArmTarget) -> None:
    """Add `target` unless it is already there; two different files naming one arm are an error."""
    same_name = next((t for t in targets if t.name == target.name), None)
    if same_name is None:
        targets.append(target)
    elif same_name.source and target.source and same_name.source.resolve() != target.source.resolve():
        raise UserError(
            f"{same_name.source} and {target.source} both name arm '{target.name}': they share "
            f"output/{target.name}/, so their runs cannot be told apart"
        )


def _resolve_target(item: str, env: Environment) -> ArmTarget:
    path = Path(item)
    candidate = path if path.is_absolute() else env.cwd / path
    if item.endswith(".toml") or candidate.is_file():
        spec = load_arm(candidate)
        return ArmTarget(name=spec.name, source=candidate, output_dir=env.output_dir / spec.name)
    if candidate.is_dir() and any(EPISODE_PATTERN.match(p.name) for p in candidate.iterdir()):
        source = env.arms_dir / f"{candidate.name}.toml"
        return ArmTarget(name=candidate.name, source=source if source.is_file() else None, output_dir=candidate)
    if re.fullmatch(ARM_NAME_PATTERN, item):
        source = env.arms_dir / f"{item}.toml"
        output = env.output_dir / item
        if source.is_file():
            return ArmTarget(name=load_arm(source).name, source=source, output_dir=output)
        if output.is_dir():
            return ArmTarget(name=item, source=None, output_dir=output)
    raise UserError(
        f"'{item}' is neither an arm file, nor an arm in {env.arms_dir}, nor a run in {env.output_dir}",
        allowed=_known_arms(env),
    )


def _known_arms(env: Environment) -> str:
    names = {p.stem for p in env.arms_dir.glob("*.toml")} if env.arms_dir.is_dir() else set()
    if env.output_dir.is_dir():
        names |= {p.name for p in env.output_dir.iterdir() if p.is_dir()}
    return ", ".join(sorted(names)) or "none in arms/ or output/"


def _readable_runs(name: str, output_dir: Path, episode: int | None, flags: list[Flag]) -> dict[int, tuple[Path, RunReport]]:
    """Every run of the arm that wrote a readable report, by episode number (plan-only dirs have none). An
    unreadable report is an error only when it is the run asked for (--run N) or the arm has no other; otherwise
    it is flagged and the others are compared."""
    runs: dict[int, tuple[Path, RunReport]] = {}
    unreadable: dict[int, str] = {}
    for run in arm_runs(output_dir):
        if run.report_error:
            unreadable[run.number] = run.report_error
        elif run.report is not None:
            runs[run.number] = (run.run_dir.report, run.report)
    runs = dict(sorted(runs.items()))
    if episode in unreadable or (unreadable and not runs):
        raise UserError(unreadable.get(episode) or next(iter(unreadable.values())))
    for number, error in unreadable.items():
        flags.append(Flag(kind="unreadable_run", arm=name, message=f"episode {number} skipped: {error}"))
    return runs


def _pick_run(
    name: str, runs: dict[int, tuple[Path, RunReport]], episode: int | None, flags: list[Flag]
) -> tuple[Path, RunReport] | None:
    """`--run N` when given; else the latest finished run, else the latest of any status."""
    if episode is not None:
        if episode not in runs:
            raise UserError(
                f"arm '{name}' has no run episode_{episode:03d}",
                key="--run",
                allowed=", ".join(str(n) for n in runs) or "none: this arm has not run",
            )
        return runs[episode]
    if not runs:
        return None
    finished = [n for n, (_, report) in runs.items() if report.status == "finished"]
    chosen = finished[-1] if finished else max(runs)
    later = [n for n in runs if n > chosen]
    if later:
        statuses = ", ".join(f"episode {n} {runs[n][1].status}" for n in later)
        flags.append(Flag(kind="later_runs", arm=name, message=f"showing finished episode {chosen}; later: {statuses}"))
    return runs[chosen]


def _settings_from_file(target: ArmTarget, overrides: dict[str, Any]) -> tuple[Settings, int]:
    """The settings the arm resolves to today (its file, or its campaign's inline keys), with the run's overrides."""
    spec: ArmSpec = target.spec or load_arm(target.source)
    source = target.source or target.output_dir
    if overrides:
        spec = apply_overrides(spec, Overrides.model_validate(overrides), source)
    settings, compaction = resolve_settings(spec, [])
    return settings, compaction.limit


def _replicates(
    runs: dict[int, tuple[Path, RunReport]], chosen: RunReport, episode: int | None
) -> tuple[Replicates, list[RunReport]]:
    """The finished episodes of the chosen run's experiment, the latest per seed (only the chosen one with --run)."""
    if episode is not None or chosen.status != "finished":
        reports = [chosen]
    else:
        latest: dict[int, RunReport] = {}
        for number in sorted(runs):
            report = runs[number][1]
            if report.status == "finished" and report.fingerprint == chosen.fingerprint:
                latest[report.settings.seed] = report
        reports = [latest[seed] for seed in sorted(latest)]
    keys = list(dict.fromkeys(f"{m.task}/{m.identity}" for report in reports for m in report.milestones))
    available = {f"{m.task}/{m.identity}": m.available for report in reports for m in report.milestones}
    per_episode = [
        EpisodeMilestones(
            episode=report.episode, seed=report.settings.seed, steps_run=report.steps_run, score=report.score,
            steps={f"{m.task}/{m.identity}": m.step for m in report.milestones},
        )
        for report in reports
    ]  # fmt: skip
    milestones = {
        key: milestone_stats(*key.split("/", 1), [each.steps.get(key) for each in per_episode], available=available[key])
        for key in keys
    }
    replicates = Replicates(
        n=len(reports),
        seeds=[report.settings.seed for report in reports],
        episodes=[report.episode for report in reports],
        score=summarise([report.score for report in reports if report.score is not None]),
        milestones=milestones,
        per_episode=per_episode,
    )
    return replicates, reports


def _arm_result(target: ArmTarget, episode: int | None, flags: list[Flag]) -> tuple[ArmResult, RunReport | None]:
    """The arm's row and the report it came from (None when the arm never ran)."""
    runs = _readable_runs(target.name, target.output_dir, episode, flags)
    picked = _pick_run(target.name, runs, episode, flags)
    source = str(target.source) if target.source else None
    episodes = {n: report.status for n, (_, report) in runs.items()}
    if picked is None:
        if target.source is None and target.spec is None:
            raise UserError(f"arm '{target.name}' has neither an arm file nor a run", path=target.output_dir)
        settings, limit = _settings_from_file(target, {})
        flags.append(Flag(kind="no_run", arm=target.name, message=f"no run in {target.output_dir}"))
        never_ran = ArmResult(
            arm=target.name,
            source=source,
            status="no run",
            settings_from="arm file",
            settings=settings.redacted(),
            fingerprint=fingerprint(settings),
            compaction_limit=limit,
        )
        return never_ran, None
    path, report = picked
    replicates, _ = _replicates(runs, report, episode)
    _flag_fingerprints(target, runs, report, flags)
    if target.source is not None or target.spec is not None:
        current, _ = _settings_from_file(target, report.overrides)
        if fingerprint(current) != report.fingerprint:
            changed = current.redacted().fingerprinted() != report.settings.redacted().fingerprinted()
            what = "has changed since" if changed else "resolves the same, but the fingerprint scheme changed since"
            flags.append(
                Flag(
                    kind="arm_file_changed" if changed else "fingerprint_version",
                    arm=target.name,
                    message=f"{target.source} {what} episode {report.episode} ran; the settings shown are the "
                    "ones in force for that run",
                )
            )
    agent = report.agent
    purple_limit = agent.compaction_limit if agent is not None else None
    limit = report.compaction_limit
    if purple_limit is not None and purple_limit != limit:
        flags.append(
            Flag(
                kind="compaction_limit_mismatch",
                arm=target.name,
                message=f"the purple reports compaction limit {purple_limit} in force, the plan set {limit}",
            )
        )
        limit = purple_limit
    if report.status != "finished":
        reason = report.failure.reason if report.failure else "no failure recorded"
        if report.status == "queued":
            reason = "queued as a Slurm job, not started yet"
        elif report.status == "started":
            reason = "still running, or its supervisor died before finalising the report"
        flags.append(Flag(kind=report.status, arm=target.name, message=f"episode {report.episode}: {reason}"))
    for alert in report.alerts:
        flags.append(Flag(kind="alert", arm=target.name, message=alert))
    per_minute = None
    if report.steps_run is not None and report.wall_s:
        per_minute = round(report.steps_run / report.wall_s * 60, 2)
    ran = ArmResult(
        arm=target.name,
        source=source,
        status=report.status,
        settings_from="report",
        settings=report.settings.redacted(),
        episode=report.episode,
        episode_dir=str(path.parent),
        report_path=str(path),
        fingerprint=report.fingerprint,
        episodes=episodes,
        simulator_label=report.simulator_label,
        score=report.score,
        sim_score=report.sim_score,
        max_score=report.max_score,
        steps_run=report.steps_run,
        wall_s=report.wall_s,
        steps_per_minute=per_minute,
        noops=dict(report.noops),
        noop_total=sum(report.noops.values()) if report.steps_run is not None else None,
        dropped_keys=dict(report.dropped_keys),
        sim_fallbacks=dict(report.sim_fallbacks),
        purple_report=agent is not None,
        infrastructure=dict(report.infrastructure),
        infrastructure_share=report.infrastructure_share,
        behaviour=dict(report.behaviour),
        thresholds=report.thresholds,
        replicates=replicates,
        **(agent.model_dump(include=PURPLE_COUNTERS) if agent is not None else {}),
        compaction_limit=limit,
        failure_reason=report.failure.reason if report.failure else None,
        failure_process=report.failure.process if report.failure else None,
        logs={role: str(path.parent / log) for role, log in report.logs.items()},
        alerts=list(report.alerts),
    )
    return ran, report


def _flag_fingerprints(
    target: ArmTarget, runs: dict[int, tuple[Path, RunReport]], chosen: RunReport, flags: list[Flag]
) -> None:
    by_fingerprint: dict[str, list[int]] = {}
    for number, (_, report) in runs.items():
        by_fingerprint.setdefault(report.fingerprint, []).append(number)
    if len(by_fingerprint) > 1:
        groups = "; ".join(f"{fp}: episodes {', '.join(map(str, eps))}" for fp, eps in by_fingerprint.items())
        flags.append(
            Flag(
                kind="fingerprints_differ",
                arm=target.name,
                message=f"runs of this arm are different experiments ({groups}); showing episode {chosen.episode}",
            )
        )


def _setting_rows(arms: list[ArmResult], show_all: bool) -> list[SettingRow]:
    flats = [flat_settings(arm.settings) for arm in arms]
    keys: list[str] = []
    for flat in flats:
        keys += [key for key in flat if key not in keys]
    settings = [arm.settings for arm in arms]
    differing = differing_keys(settings)
    rows = []
    for key in keys:
        ignored = key in NOISE_SETTINGS
        if key in differing and not ignored or show_all:
            rows.append(
                SettingRow(
                    key=key,
                    values=[flat.get(key) for flat in flats],
                    differs=key in differing,
                    ignored=ignored,
                    follows=setting_follows(key, settings, differing),
                )
            )
    return rows


def _settings_verdict(arms: list[ArmResult]) -> Verdict:
    differing = [row.key for row in _setting_rows(arms, show_all=False) if row.counted()]
    if not differing:
        return Verdict(comparable=True, identical=True, differing=[], text="identical settings")
    if len(differing) == 1:
        text = f"comparable: differs only in {differing[0]}"
        return Verdict(comparable=True, identical=False, differing=differing, text=text)
    text = f"NOT comparable: differs in {', '.join(differing)}"
    return Verdict(comparable=False, identical=False, differing=differing, text=text)


def _untrusted(arm: ArmResult) -> str | None:
    """Why an arm's numbers say more about the infrastructure than about the agent, or None."""
    if arm.status == "no run":
        return None
    if arm.failure_reason and arm.failure_reason.startswith("infrastructure:"):
        return f"{arm.arm} failed for infrastructure reasons ({arm.failure_reason.removeprefix('infrastructure: ')})"
    share = arm.infrastructure_share
    if share is not None and share > arm.thresholds.infrastructure_share:
        return (
            f"{arm.arm}: {share:.0%} of its steps were infrastructure noops "
            f"(threshold {arm.thresholds.infrastructure_share:.0%})"
        )
    return None


def _verdict(arms: list[ArmResult]) -> Verdict:
    """Do the arms differ in one setting only, and can their numbers be trusted at all?"""
    verdict = _settings_verdict(arms)
    untrusted = [reason for arm in arms if (reason := _untrusted(arm)) is not None]
    if untrusted:
        verdict = verdict.model_copy(
            update={
                "trustworthy": False,
                "untrusted": untrusted,
                "text": f"NOT trustworthy: {'; '.join(untrusted)} ({verdict.text})",
            }
        )
    return verdict


def _milestone_rows(arms: list[ArmResult], reports: list[RunReport | None], baseline: int) -> list[MilestoneRow]:
    order: list[tuple[str, str]] = []
    for report in [reports[baseline], *reports]:
        for record in report.milestones if report else []:
            if (record.task, record.identity) not in order:
                order.append((record.task, record.identity))
    lookup = [
        {(m.task, m.identity): m for m in report.milestones} if report else None for report in reports
    ]
    rows = []
    for task, identity in order:
        cells = []
        for index in range(len(arms)):
            records = lookup[index]
            record = records.get((task, identity)) if records is not None else None
            if records is None:
                cells.append(MilestoneCell(state="no run"))
            elif record is None:
                cells.append(MilestoneCell(state="not in run"))
            elif not record.available:
                cells.append(MilestoneCell(state="unavailable"))
            elif record.step is None:
                cells.append(MilestoneCell(state="not reached"))
            else:
                cells.append(MilestoneCell(state="reached", step=record.step))
        for index, cell in enumerate(cells):
            stats = arms[index].replicates.milestones.get(f"{task}/{identity}") if arms[index].replicates else None
            if stats is not None and stats.n > 1:
                cell.replicates = stats
                cell.step = round(stats.median_step) if stats.median_step is not None else None
        base_step = cells[baseline].step
        for cell in cells:
            if cell.step is not None and base_step is not None:
                cell.delta = cell.step - base_step
        rows.append(MilestoneRow(task=task, identity=identity, cells=cells))
    return rows


def _differences(arms: list[ArmResult], baseline: int) -> list[ArmDifference]:
    """Each arm that ran against the baseline: score, and the step of every milestone both reached."""
    base = arms[baseline]
    if base.replicates is None:
        return []
    differences = []
    for arm in arms:
        if arm is base or arm.replicates is None:
            continue
        milestone_steps = []
        for key, stats in base.replicates.milestones.items():
            other = arm.replicates.milestones.get(key)
            if other is None or not stats.reached or not other.reached:
                continue
            mine = [each.steps[key] for each in arm.replicates.per_episode if each.steps.get(key) is not None]
            theirs = [each.steps[key] for each in base.replicates.per_episode if each.steps.get(key) is not None]
            milestone_steps.append(
                compare_means(f"{key.split('/', 1)[1]} step", mine, theirs, name_a=arm.arm, name_b=base.arm)
            )
        score = compare_means(
            "score", arm.replicates.score.values, base.replicates.score.values, name_a=arm.arm, name_b=base.arm
        )
        differences.append(ArmDifference(arm=arm.arm, baseline=base.arm, score=score, milestone_steps=milestone_steps))
    return differences


def _cross_arm_flags(arms: list[ArmResult], flags: list[Flag]) -> None:
    simulators = {arm.settings.simulator for arm in arms}
    if len(simulators) > 1:
        shown = ", ".join(f"{arm.arm}: {arm.simulator_label or arm.settings.simulator}" for arm in arms)
        flags.append(
            Flag(
                kind="different_simulators",
                message=f"arms ran on different simulators ({shown}): scores and milestone steps are not on the "
                "same scale",
            )
        )


def compare_arms(
    items: list[str],
    env: Environment,
    *,
    baseline: str | None = None,
    episode: int | None = None,
    show_all: bool = False,
) -> ComparisonResult:
    """Compare arms (files, names or output dirs). The baseline defaults to the first arm."""
    if episode is not None and episode < 1:
        raise UserError(f"{episode} is not an episode number", key="--run", allowed="an integer >= 1")
    targets = resolve_targets(items, env)
    names = [t.name for t in targets]
    baseline_name = baseline if baseline is not None else names[0]
    if baseline_name not in names:
        raise UserError(
            f"'{baseline_name}' is not one of the arms compared", key="--baseline", allowed=", ".join(names)
        )
    flags: list[Flag] = []
    picked = [_arm_result(target, episode, flags) for target in targets]
    arms = [arm for arm, _ in picked]
    reports = [report for _, report in picked]
    _cross_arm_flags(arms, flags)
    base_index = names.index(baseline_name)
    return ComparisonResult(
        baseline=baseline_name,
        show_all=show_all,
        arms=arms,
        settings=_setting_rows(arms, show_all),
        milestones=_milestone_rows(arms, reports, base_index),
        verdict=_verdict(arms),
        differences=_differences(arms, base_index),
        flags=flags,
    )


def _number(value: float | None, digits: int = 2) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(counts.items()))


def _purple_counter(arm: ArmResult, key: str) -> str:
    """A purple's own counter; "n/a" for agents of a kind that never reports it, so a blank never reads as zero."""
    if arm.status == "no run":
        return ""
    if arm.settings.agent not in REPORTED_BY[key]:
        return UNAVAILABLE
    if not arm.purple_report:
        return "no purple report"
    value = getattr(arm, key)
    if value is None:
        return "not reported"
    if key == "invalid_outputs" and arm.invalid_outputs_by_kind:
        return f"{value} ({_counts(arm.invalid_outputs_by_kind)})"
    if key == "failed_turns" and arm.failed_turns_by_reason:
        return f"{value} ({_counts(arm.failed_turns_by_reason)})"
    return _number(value, 1) if isinstance(value, float) else str(value)


def _replicates_text(arm: ArmResult) -> str:
    if arm.replicates is None:
        return ""
    seeds = ", ".join(str(seed) for seed in arm.replicates.seeds)
    return f"n = {arm.replicates.n} (seed{'s' if arm.replicates.n > 1 else ''} {seeds})"


def _score_text(arm: ArmResult) -> str:
    """The score: a mean with its 95 % interval over replicates, else the one run's."""
    if arm.replicates is not None and arm.replicates.n > 1:
        return arm.replicates.score.text()
    return _number(arm.score)


def _share(arm: ArmResult) -> str:
    """Infrastructure noops with their share of the steps run."""
    if arm.infrastructure_share is None:
        return ""
    noops = sum(count for cause, count in arm.infrastructure.items() if cause in INFRASTRUCTURE_CAUSES)
    return f"{noops} ({arm.infrastructure_share:.1%})"


def _failed_turns(arm: ArmResult) -> str:
    """A codex agent's failed turns, with their share of the steps when any failed."""
    shown = _purple_counter(arm, "failed_turns")
    if arm.failed_turns and arm.steps_run:
        shown += f" ({arm.failed_turns / arm.steps_run:.1%} of steps)"
    return shown


def result_rows(result: ComparisonResult) -> list[tuple[str, list[str]]]:
    """The results table as text cells, one row per metric, one cell per arm (shared by the console, CSV, markdown)."""
    arms = result.arms
    return [
        ("status", [arm.status for arm in arms]),
        ("episode", [str(arm.episode) if arm.episode is not None else "" for arm in arms]),
        ("simulator", [arm.simulator_label or arm.settings.simulator for arm in arms]),
        ("replicates", [_replicates_text(arm) for arm in arms]),
        ("score", [_score_text(arm) for arm in arms]),
        ("sim score", [_number(arm.sim_score) for arm in arms]),
        ("max score", [_number(arm.max_score) for arm in arms]),
        ("steps run", [_number(arm.steps_run) for arm in arms]),
        ("wall s", [_number(arm.wall_s, 1) for arm in arms]),
        ("steps/min", [_number(arm.steps_per_minute, 1) for arm in arms]),
        ("noops", [_number(arm.noop_total) for arm in arms]),
        ("noops by cause", [_counts(arm.noops) for arm in arms]),
        ("infrastructure", [_share(arm) for arm in arms]),
        ("infrastructure by cause", [_counts(arm.infrastructure) for arm in arms]),
        ("dropped keys", [_counts(arm.dropped_keys) for arm in arms]),
        ("sim fallbacks", [_counts(arm.sim_fallbacks) for arm in arms]),
        ("failed turns", [_failed_turns(arm) for arm in arms]),
        ("compactions", [_purple_counter(arm, "compactions") for arm in arms]),
        ("overflow resets", [_purple_counter(arm, "overflow_resets") for arm in arms]),
        ("decisions", [_purple_counter(arm, "decisions") for arm in arms]),
        ("invalid outputs", [_purple_counter(arm, "invalid_outputs") for arm in arms]),
        ("stale re-plans", [_purple_counter(arm, "stale_replans") for arm in arms]),
        ("reflex interrupts", [_purple_counter(arm, "reflex_interrupts") for arm in arms]),
        ("planner ms (median)", [_purple_counter(arm, "median_planner_ms") for arm in arms]),
        ("decision ms (median)", [_purple_counter(arm, "median_decision_ms") for arm in arms]),
        ("compaction limit", [str(arm.compaction_limit) for arm in arms]),
    ]


def milestone_text(cell: MilestoneCell, is_baseline: bool) -> str:
    text = cell.text()
    if cell.delta is not None and not is_baseline:
        text += f" ({cell.delta:+d})"
    return text


def setting_text(value: Any) -> str:
    """A setting as the tables, CSV and markdown show it: TOML-style booleans, lists joined, None blank."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _setting_label(row: SettingRow) -> str:
    if row.ignored:
        return f"{row.key} (ignored)"
    return f"{row.key} (follows {row.follows})" if row.follows else row.key


def to_csv(result: ComparisonResult) -> str:
    """One table with a `kind` column: setting, result, milestone (step or —/n/a), milestone_delta, verdict, flag.

    Columns: kind, key, then one per arm. Milestone keys are "task/identity"; a verdict row has the verdict text
    under the baseline arm; flag rows carry the message under their arm (or the baseline for cross-arm flags).
    """
    names = result.arm_names()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["kind", "key", *names])
    for row in result.settings:
        writer.writerow(["setting", row.key, *(setting_text(v) for v in row.values)])
    for key, cells in result_rows(result):
        writer.writerow(["result", key, *cells])
    for milestone in result.milestones:
        key = f"{milestone.task}/{milestone.identity}"
        writer.writerow(["milestone", key, *(cell.text() for cell in milestone.cells)])
        writer.writerow(
            ["milestone_delta", key, *("" if cell.delta is None else str(cell.delta) for cell in milestone.cells)]
        )
    base = names.index(result.baseline)
    writer.writerow(["verdict", "verdict", *(result.verdict.text if i == base else "" for i in range(len(names)))])
    for difference in result.differences:
        column = names.index(difference.arm)
        for line in [difference.score, *difference.milestone_steps]:
            writer.writerow(["difference", line.metric, *(line.text if i == column else "" for i in range(len(names)))])
    for flag in result.flags:
        column = names.index(flag.arm) if flag.arm in names else base
        writer.writerow(["flag", flag.kind, *(flag.message if i == column else "" for i in range(len(names)))])
    return buffer.getvalue()


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def to_markdown(result: ComparisonResult) -> str:
    names = result.arm_names()
    header = ["", *(f"{name} (baseline)" if name == result.baseline else name for name in names)]
    lines = [f"**{result.verdict.text}**", ""]
    for flag in result.flags:
        lines.append(f"- **{flag.kind}**{f' ({flag.arm})' if flag.arm else ''}: {flag.message}")
    if result.flags:
        lines.append("")
    for difference in result.differences:
        lines += [f"- {line.text}" for line in [difference.score, *difference.milestone_steps]]
    if result.differences:
        lines += ["", f"_Statistics: {result.statistics_method}._", ""]
    if result.settings:
        lines += ["## Settings", ""]
        rows = [[_setting_label(row), *(setting_text(v) for v in row.values)] for row in result.settings]
        lines += _md_table(header, rows)
        lines.append("")
    lines += ["## Results", ""]
    lines += _md_table(header, [[key, *cells] for key, cells in result_rows(result)])
    lines.append("")
    if result.milestones:
        lines += ["## Milestones (step reached; delta vs baseline)", ""]
        rows = [
            [f"{m.task}/{m.identity}", *(milestone_text(c, n == result.baseline) for c, n in zip(m.cells, names))]
            for m in result.milestones
        ]
        lines += _md_table(header, rows)
        lines.append("")
    for arm in result.arms:
        if arm.status in ("failed", "interrupted", "queued", "started"):
            lines.append(f"- {arm.arm} {arm.status}: {arm.failure_reason or 'no failure recorded'}")
            lines += [f"  - {role}: `{path}`" for role, path in arm.logs.items()]
    return "\n".join(lines).rstrip() + "\n"
