"""The one analysis of a comparison, computed once: every view (the console table, `--json`, `--csv`, `--markdown`,
`--plot`, `--export`, `mcu_arms.results`, `view` and `report --html`) renders this object and computes nothing of
its own.

Per arm: the experiment used (one fingerprint) and why, the episodes used (the latest finished one per seed) and
those left out with the reason (interrupted, failed, unfinished, another experiment, superseded, another campaign);
per metric its per-episode values, n, mean and interval; per milestone k/n and its steps. Between each arm and the
baseline, every difference with its method, estimate, interval, p and verdict. Then the comparability and trust
verdicts. An arm's runs that are different experiments are never mixed, and never silently "whatever ran last":
when the experiment to use is not unique, `analyse` refuses and lists the candidates.

Light to import: pydantic and the arm/report models only.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcu_arms.arms.campaign import is_campaign, load_campaign
from mcu_arms.arms.plan import apply_overrides, resolve_settings
from mcu_arms.arms.spec import ARM_NAME_PATTERN, ArmSpec, load_arm
from mcu_arms.collector import without_cyclic_gc
from mcu_arms.contracts.annotations import matches_tags
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import RunReport
from mcu_arms.contracts.settings import (
    REPLICATE_AND_PLACEMENT_KEYS,
    Overrides,
    Settings,
    Thresholds,
    differing_keys,
    differing_settings,
    fingerprint,
    flat_settings,
    setting_follows,
)
from mcu_arms.contracts.simulators import label_of
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES, RunStatus
from mcu_arms.environment import Environment
from mcu_arms.layout import EPISODE_PATTERN, arm_runs
from mcu_arms.report.methods.comparison import MetricComparison, compare_metric
from mcu_arms.report.methods.design import Pairing, pairing
from mcu_arms.report.methods.multiplicity import HOLM_METHOD, holm
from mcu_arms.report.methods.paired import PairingEffect
from mcu_arms.report.methods.sequential import SequentialExperiment, sequential_experiment
from mcu_arms.report.methods.survival import (
    KM_METHOD,
    LOGRANK_METHOD,
    KaplanMeier,
    TimeToEvent,
    episodes,
    kaplan_meier,
    logrank,
)
from mcu_arms.report.methods.survival import ReachingCurve as ReachingCurve  # re-exported: views draw it
from mcu_arms.report.stats import (
    ALPHA,
    Interval,
    MilestoneStats,
    Summary,
    milestone_stats,
    summarise,
)
from mcu_arms.report.stats import METHOD as STATS_METHOD

ANALYSIS_SCHEMA_VERSION = 3  # 2 had a milestone's median step over the episodes that reached it; 1 was the
# comparison before experiments were explicit
# Where a setting only says where things run, or which replicate ran: shown with --all, never a difference.
NOISE_SETTINGS: frozenset[str] = REPLICATE_AND_PLACEMENT_KEYS
EXIT_COMPARABLE = 0
EXIT_NOT_COMPARABLE = 1  # also: an arm with no finished episode
EXIT_NOT_TRUSTWORTHY = 3  # also: an arm with no finished episode because of infrastructure trouble
MAX_COMBINATIONS = 4096  # experiments tried together when choosing one per arm; more is refused as ambiguous
FINGERPRINT_SHOWN = 12  # characters of a fingerprint shown where a prefix is enough

ArmStatus = Literal["finished", "failed", "interrupted", "queued", "started", "no run"]
CellState = Literal["reached", "not reached", "unavailable", "no run", "none finished", "not in run"]
ExclusionReason = Literal[
    "interrupted", "failed", "unfinished", "other experiment", "superseded", "other campaign", "other tags"
]
MetricName = Literal["score", "sim_score", "steps_run", "wall_s", "steps_per_minute", "noops", "infrastructure_noops"]
METRICS: tuple[MetricName, ...] = (
    "score",
    "sim_score",
    "steps_run",
    "wall_s",
    "steps_per_minute",
    "noops",
    "infrastructure_noops",
)
DifferenceVerdict = Literal["distinguishable", "not distinguishable", "no difference", "too few episodes", "no runs"]


UNREADABLE_RUN = "unreadable_run"  # the Flag kind of an episode whose files break a reading rule (contracts/reading.py)


class Flag(BaseModel):
    """Something that makes a number less trustworthy; shown loudly above the tables."""

    kind: str
    arm: str | None = None
    message: str


class EpisodeRef(BaseModel):
    episode: int
    seed: int
    status: RunStatus
    fingerprint: str
    started_at: str
    attempt: int = 1
    campaign: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)  # `run --tag`: why it was run
    note: str | None = None  # `run --note`


class ExcludedEpisode(EpisodeRef):
    """An episode of the arm that enters no statistic, plot or k/n, and why."""

    reason: ExclusionReason
    detail: str


class Experiment(BaseModel):
    """An arm's episodes that share one fingerprint: replicates of one experiment."""

    fingerprint: str
    episodes: list[int]
    finished: int  # seeds with a finished episode
    first_started: str
    last_started: str
    differs: list[str]  # settings in which it differs from what the arm file says today
    values: dict[str, Any] = Field(default_factory=dict)  # those settings: this experiment's value, the file's


class ExperimentChoice(BaseModel):
    fingerprint: str | None  # None: the arm has no finished episode
    why: str
    candidates: list[Experiment]  # every experiment of the arm, newest first


class EpisodeMilestones(BaseModel):
    """One replicate's milestones: the step each was reached at (None: not reached), for figures and exports."""

    episode: int
    seed: int
    steps_run: int | None
    score: float | None
    steps: dict[str, int | None]  # "task/identity" -> step


class EpisodeFacts(BaseModel):
    """What belongs to one episode (the latest used, else the latest run): counters by cause, the purple's own
    counters, logs. Never a statistic over replicates; every view labels it with its episode."""

    episode: int
    status: RunStatus
    episode_dir: str
    report_path: str
    simulator_label: str | None = None
    noops: dict[str, int] = Field(default_factory=dict)
    dropped_keys: dict[str, int] = Field(default_factory=dict)
    sim_fallbacks: dict[str, int] = Field(default_factory=dict)
    infrastructure: dict[str, int] = Field(default_factory=dict)
    infrastructure_share: float | None = None  # of the steps run
    behaviour: dict[str, int] = Field(default_factory=dict)
    purple_report: bool = False  # False: the counters below are unknown, not zero
    failed_turns: int | None = None
    failed_turns_by_reason: dict[str, int] = Field(default_factory=dict)  # by cause (planned: policy_timeout=1)
    top_failure_reasons: dict[str, int] = Field(default_factory=dict)  # in the agent's own words
    compactions: int | None = None
    overflow_resets: int | None = None
    decisions: int | None = None
    invalid_outputs: int | None = None
    invalid_outputs_by_kind: dict[str, int] = Field(default_factory=dict)
    stale_replans: int | None = None
    reflex_interrupts: int | None = None
    median_planner_ms: float | None = None
    median_decision_ms: float | None = None
    steps_run: int | None = None
    failure_reason: str | None = None
    failure_process: str | None = None
    failure_kind: str | None = None
    logs: dict[str, str] = Field(default_factory=dict)
    alerts: list[str] = Field(default_factory=list)


PURPLE_COUNTERS: set[str] = {
    "failed_turns",
    "failed_turns_by_reason",
    "top_failure_reasons",
    "compactions",
    "overflow_resets",
    "decisions",
    "invalid_outputs",
    "invalid_outputs_by_kind",
    "stale_replans",
    "reflex_interrupts",
    "median_planner_ms",
    "median_decision_ms",
}


class ReachedCurve(BaseModel):
    """Milestones reached by each step, over the episodes used: the median with the interquartile range (the viewer's
    overview chart). Steps to one milestone are the arm's Kaplan–Meier curve (`ArmAnalysis.survival`)."""

    steps: list[int]  # 0, each step a milestone landed on in any episode, the last step run
    median: list[float]
    low: list[float]  # the 25th percentile
    high: list[float]  # the 75th percentile


class ArmAnalysis(BaseModel):
    """One arm: the experiment used, its episodes used and left out, and its statistics."""

    arm: str
    source: str | None  # the arm file, when there is one
    campaign: str | None = None  # compared as an arm of this campaign: its episodes only
    status: ArmStatus  # finished: at least one finished episode is used; else its latest run's status
    settings_from: Literal["report", "arm file"]
    settings: Settings
    fingerprint: str
    experiment: ExperimentChoice
    used: list[EpisodeRef] = Field(default_factory=list)
    excluded: list[ExcludedEpisode] = Field(default_factory=list)
    metrics: dict[str, Summary] = Field(default_factory=dict)  # MetricName -> over the episodes used
    max_score: float | None = None
    milestones: dict[str, MilestoneStats] = Field(default_factory=dict)  # "task/identity" -> k/n, steps
    # "task/identity" -> steps to it as time to an event, censored at the steps run (Kaplan–Meier)
    time_to_milestone: dict[str, KaplanMeier] = Field(default_factory=dict)
    sequential: SequentialExperiment | None = None  # its episodes were run with `run --until-resolved`
    per_episode: list[EpisodeMilestones] = Field(default_factory=list)
    curve: ReachedCurve | None = None  # None: no finished episode to draw
    infrastructure_share: float | None = None  # infrastructure noops over the steps run, all episodes used
    thresholds: Thresholds = Field(default_factory=Thresholds)
    compaction_limit: int
    latest: EpisodeFacts | None = None  # None: the arm never ran

    @property
    def n(self) -> int:
        return len(self.used)

    @property
    def seeds(self) -> list[int]:
        return [ref.seed for ref in self.used]

    def survival(self, key: str) -> KaplanMeier | None:
        """Steps to milestone `key` ("task/identity") as time to an event: the arm's Kaplan–Meier curve, also for a
        single episode (a step from 0 to 1 where it was reached, no band); None when unavailable or nothing ran."""
        if key in self.time_to_milestone:
            return self.time_to_milestone[key]
        stats = self.milestones.get(key)
        if stats is None or not stats.available or not self.per_episode:
            return None
        return kaplan_meier(
            episodes(
                [each.steps.get(key) for each in self.per_episode], [each.steps_run or 0 for each in self.per_episode]
            )
        )


class DifferenceResult(BaseModel):
    """arm − baseline for one metric: how it was tested, what came out, and the verdict in words."""

    metric: str
    arm: str
    baseline: str
    method: str
    design: Literal["unpaired", "paired"] = "unpaired"
    design_reason: str = "episodes of the two arms are treated as independent samples"
    n_a: int
    n_b: int
    estimate: float | None
    interval: Interval | None
    p: float | None  # raw
    p_adjusted: float | None = None  # over the family (`Analysis.family`); None when not adjusted
    verdict: DifferenceVerdict  # read on the adjusted p when there is one
    seeds_needed: int | None  # per arm (unpaired) or pairs (paired), to resolve a difference of this size
    pairing_effect: PairingEffect | None = None  # paired: what pairing by seed bought
    medians: list[float | None] | None = None  # steps to a milestone: the arm's and the baseline's Kaplan–Meier
    # medians (None: not reached); the estimate is their difference when both were reached
    text: str


class ArmDifference(BaseModel):
    arm: str
    baseline: str
    pairing: Pairing  # the design the arm and the baseline allow, and why
    score: DifferenceResult
    milestone_steps: list[DifferenceResult]

    def lines(self) -> list[DifferenceResult]:
        return [self.score, *self.milestone_steps]


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
    step: int | None = None  # one episode: its step; several: the Kaplan–Meier median (None: not reached)
    delta: int | None = None  # step minus the baseline's step, when both have one
    stats: MilestoneStats | None = None  # k/n reached and the steps, over the episodes used
    time_to_event: KaplanMeier | None = None  # several episodes: steps to it, censored at the steps run


class MilestoneRow(BaseModel):
    task: str
    identity: str
    cells: list[MilestoneCell]  # one per arm, in arm order


class Verdict(BaseModel):
    comparable: bool
    identical: bool
    differing: list[str]
    text: str  # the headline: settings, and before it what leaves the arms without a result or untrustworthy
    settings_text: str  # the settings alone: identical, comparable (one differs) or NOT comparable
    trustworthy: bool = True  # False: an arm's numbers are dominated by infrastructure trouble
    untrusted: list[str] = Field(default_factory=list)  # why, per arm
    missing: list[str] = Field(default_factory=list)  # arms with no finished episode to analyse


class Analysis(BaseModel):
    schema_version: int = ANALYSIS_SCHEMA_VERSION
    baseline: str
    campaign: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)  # `--tag`: only episodes run with every one of these
    show_all: bool
    arms: list[ArmAnalysis]
    settings: list[SettingRow]
    milestones: list[MilestoneRow]
    verdict: Verdict
    differences: list[ArmDifference] = Field(default_factory=list)
    statistics_method: str = (
        f"scores: paired by seed where the design allows (paired bootstrap interval, exact sign-flip test), else "
        f"{STATS_METHOD}; milestones: {KM_METHOD}, {LOGRANK_METHOD}"
    )
    family: str = "no test was made"  # which tests were adjusted together (Holm), in words
    flags: list[Flag] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.verdict.missing:
            infrastructure = any(
                arm.latest is not None and arm.latest.failure_kind == "infrastructure"
                for arm in self.arms
                if arm.arm in self.verdict.missing
            )
            return EXIT_NOT_TRUSTWORTHY if infrastructure else EXIT_NOT_COMPARABLE
        if not self.verdict.trustworthy:
            return EXIT_NOT_TRUSTWORTHY
        return EXIT_COMPARABLE if self.verdict.comparable else EXIT_NOT_COMPARABLE

    def arm_names(self) -> list[str]:
        return [arm.arm for arm in self.arms]

    def arm(self, name: str) -> ArmAnalysis:
        return next(arm for arm in self.arms if arm.arm == name)


# --- which arms ------------------------------------------------------------------------------------------------


class ArmTarget(BaseModel):
    """An arm named on the command line, resolved to its arm file (if any) and its output dir, with its spec as read
    once (an arm written inline in a campaign file has no file of its own); a campaign's arms carry its name."""

    model_config = {"arbitrary_types_allowed": True}

    spec: ArmSpec | None = None
    name: str
    source: Path | None
    output_dir: Path
    campaign: str | None = None


def _campaign_targets(path: Path, env: Environment) -> list[ArmTarget]:
    """A campaign's baseline, then its variants."""
    campaign = load_campaign(path, env.arms_dir)
    return [
        ArmTarget(
            name=arm.spec.name,
            source=arm.source if arm.source != path else None,
            spec=arm.spec if arm.source == path else None,
            output_dir=env.output_dir / arm.spec.name,
            campaign=campaign.name,
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
        return ArmTarget(name=spec.name, spec=spec, source=candidate, output_dir=env.output_dir / spec.name)
    if candidate.is_dir() and any(EPISODE_PATTERN.match(p.name) for p in candidate.iterdir()):
        source = env.arms_dir / f"{candidate.name}.toml"
        return ArmTarget(name=candidate.name, source=source if source.is_file() else None, output_dir=candidate)
    if re.fullmatch(ARM_NAME_PATTERN, item):
        source = env.arms_dir / f"{item}.toml"
        output = env.output_dir / item
        if source.is_file():
            spec = load_arm(source)  # kept: the settings it resolves to are compared with each run's
            return ArmTarget(name=spec.name, spec=spec, source=source, output_dir=output)
        if output.is_dir():
            return ArmTarget(name=item, source=None, output_dir=output)
    raise UserError(
        f"'{item}' is neither an arm file, nor an arm in {env.arms_dir}, nor a run in {env.output_dir}",
        allowed=_known_arms(env),
    )


def _known_arms(env: Environment) -> str:
    names = {p.stem for p in env.arms_dir.glob("*.toml")} if env.arms_dir.is_dir() else set()
    if env.output_dir.is_dir():
        names |= {p.name for p in env.output_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return ", ".join(sorted(names)) or "none in arms/ or output/"


def _readable_runs(target: ArmTarget, episode: int | None, flags: list[Flag]) -> dict[int, tuple[Path, RunReport]]:
    """Every run of the arm that wrote a readable report, by episode number (plan-only dirs have none). An
    unreadable report is an error only when it is the run asked for (--run N) or the arm has no other; otherwise
    it is flagged and the others are compared."""
    runs: dict[int, tuple[Path, RunReport]] = {}
    unreadable: dict[int, str] = {}
    for run in arm_runs(target.output_dir):
        if run.report_error:
            unreadable[run.number] = run.report_error
        elif run.report is not None:
            runs[run.number] = (run.run_dir.report, run.report)
    runs = dict(sorted(runs.items()))
    if episode in unreadable or (unreadable and not runs):
        raise UserError((unreadable.get(episode) if episode is not None else None) or next(iter(unreadable.values())))
    for number, error in unreadable.items():
        message = f"episode {number} skipped, unreadable: {error}"
        flags.append(Flag(kind=UNREADABLE_RUN, arm=target.name, message=message))
    return runs


def _settings_from_file(target: ArmTarget, overrides: dict[str, Any]) -> tuple[Settings, int]:
    """The settings the arm resolves to today (its file, or its campaign's inline keys), with the run's overrides."""
    # a target without a spec of its own has an arm file (only an arm written inline in a campaign has none)
    spec: ArmSpec = target.spec or load_arm(target.source)  # type: ignore[arg-type]
    source = target.source or target.output_dir
    if overrides:
        spec = apply_overrides(spec, Overrides.model_validate(overrides), source)
    settings, compaction = resolve_settings(spec, [])
    return settings, compaction.limit


# --- experiments -----------------------------------------------------------------------------------------------


def _ref(report: RunReport) -> dict[str, Any]:
    return {
        "episode": report.episode,
        "seed": report.settings.seed,
        "status": report.status,
        "fingerprint": report.fingerprint,
        "started_at": report.started_at,
        "attempt": report.attempt,
        "campaign": report.campaign.name if report.campaign else None,
        "tags": dict(report.tags),
        "note": report.note,
    }


def short(fingerprint_text: str) -> str:
    """A fingerprint as shown where a prefix is enough: its hash part."""
    return fingerprint_text.split(":", 1)[-1][:FINGERPRINT_SHOWN]


class _ArmRuns(BaseModel):
    """One arm's readable runs split by experiment (what the choice is made over)."""

    model_config = {"arbitrary_types_allowed": True}

    target: ArmTarget
    runs: dict[int, tuple[Path, RunReport]]  # of its campaign only, when compared as a campaign's arm
    other_campaign: list[RunReport]
    other_tags: list[RunReport]  # of its campaign, but without every tag asked for (`--tag`)
    file_settings: Settings | None  # what the arm file says today (None: no arm file)
    experiments: dict[str, list[RunReport]]  # fingerprint -> its runs, oldest first; newest experiment first

    def candidates(self) -> list[str]:
        """Experiments with at least one finished episode, newest first."""
        return [fp for fp, reports in self.experiments.items() if any(r.status == "finished" for r in reports)]

    def describe(self, fp: str) -> Experiment:
        reports = self.experiments[fp]
        settings = reports[-1].settings
        differs = differing_settings([self.file_settings, settings]) if self.file_settings is not None else []
        ours, theirs = flat_settings(settings), flat_settings(self.file_settings) if self.file_settings else {}
        return Experiment(
            fingerprint=fp,
            episodes=[r.episode for r in reports],
            finished=len({r.settings.seed for r in reports if r.status == "finished"}),
            first_started=min(r.started_at for r in reports),
            last_started=max(r.started_at for r in reports),
            differs=differs,
            values={key: [ours.get(key), theirs.get(key)] for key in differs},
        )


def _arm_runs(target: ArmTarget, episode: int | None, flags: list[Flag], tags: dict[str, str]) -> _ArmRuns:
    every = _readable_runs(target, episode, flags)
    ours = {n: pair for n, pair in every.items() if target.campaign is None or _of_campaign(pair[1], target.campaign)}
    other = [report for n, (_, report) in every.items() if n not in ours]
    runs = {n: pair for n, pair in ours.items() if matches_tags(pair[1].tags, tags)}
    other_tags = [report for n, (_, report) in ours.items() if n not in runs]
    experiments: dict[str, list[RunReport]] = {}
    for number in sorted(runs, reverse=True):
        experiments.setdefault(runs[number][1].fingerprint, []).insert(0, runs[number][1])
    # as reports keep them: secrets masked (a masked report value never 'differs' from the file's, nor shows it)
    from_file = _settings_from_file(target, {})[0] if target.source is not None or target.spec is not None else None
    file_settings = from_file.redacted() if from_file is not None else None
    return _ArmRuns(
        target=target,
        runs=runs,
        other_campaign=other,
        other_tags=other_tags,
        file_settings=file_settings,
        experiments=experiments,
    )


def _of_campaign(report: RunReport, campaign: str) -> bool:
    return report.campaign is not None and report.campaign.name == campaign


def _counted_differences(settings: list[Settings]) -> list[str]:
    rows = _setting_rows_of(settings, show_all=False)
    return [row.key for row in rows if row.counted()]


def _matches_prefix(fp: str, prefix: str) -> bool:
    return fp.startswith(prefix) or fp.split(":", 1)[-1].startswith(prefix)


def _candidates_text(arms: list[_ArmRuns]) -> str:
    lines = []
    for each in arms:
        for fp in each.experiments:
            described = each.describe(fp)
            differs = ", ".join(
                f"{key} = {ours} (arm file: {theirs})" for key, (ours, theirs) in described.values.items()
            )
            lines.append(
                f"  {each.target.name}: experiment {short(fp)}: {differs or 'as its arm file says today'}; "
                f"n = {described.finished} finished; episodes {', '.join(map(str, described.episodes))}; "
                f"{described.first_started[:16]} – {described.last_started[:16]}"
            )
    return "\n".join(lines)


def choose_experiments(arms: list[_ArmRuns], prefixes: list[str]) -> dict[str, tuple[str | None, str]]:
    """Per arm, (fingerprint, why): the experiment that matches the other arms except in what is under test. When that
    is not unique, a UserError lists the candidates and how to choose (--experiment PREFIX, --run N)."""
    how = "choose with --experiment PREFIX (repeatable, one per arm) or --run N"
    chosen: dict[str, tuple[str | None, str]] = {}
    open_arms: list[_ArmRuns] = []
    for each in arms:
        candidates = each.candidates()
        if prefixes:
            picked = [fp for fp in candidates if any(_matches_prefix(fp, p) for p in prefixes)]
            if len(picked) > 1 or (not picked and candidates):
                what = "matches more than one" if picked else "matches none"
                raise UserError(
                    f"--experiment {' '.join(prefixes)} {what} of arm '{each.target.name}''s experiments:\n"
                    f"{_candidates_text([each])}",
                    key="--experiment",
                    allowed="a fingerprint prefix of one of them",
                )
            chosen[each.target.name] = (
                (picked[0], f"chosen by --experiment {short(picked[0])}") if picked else (None, "no finished episode")
            )
        elif not candidates:
            never = "no episode with the tags asked for" if each.other_tags else "never ran"
            chosen[each.target.name] = (None, "no finished episode" if each.runs else never)
        elif len(candidates) == 1:
            reason = (
                "its only experiment" if len(each.experiments) == 1 else "its only experiment with a finished episode"
            )
            chosen[each.target.name] = (candidates[0], reason)
        else:
            open_arms.append(each)
    if not open_arms:
        return chosen
    under_test = _under_test(arms)
    fixed = [each.experiments[fp][-1].settings for each in arms if (fp := chosen.get(each.target.name, (None, ""))[0])]
    combinations = list(
        itertools.islice(itertools.product(*(each.candidates() for each in open_arms)), MAX_COMBINATIONS + 1)
    )
    matches = []
    for combination in combinations[:MAX_COMBINATIONS]:
        settings = fixed + [each.experiments[fp][-1].settings for each, fp in zip(open_arms, combination, strict=True)]
        differing = _counted_differences(settings)
        if (sorted(differing) == sorted(under_test)) if under_test is not None else len(differing) <= 1:
            matches.append(combination)
    if len(matches) != 1 or len(combinations) > MAX_COMBINATIONS:
        what = "more than one experiment of" if len(matches) > 1 else "no experiment of"
        names = ", ".join(f"'{each.target.name}'" for each in open_arms)
        tested = f"in {', '.join(under_test) or 'nothing'}" if under_test is not None else "in at most one setting"
        raise UserError(
            f"{what} {names} matches the other arms except {tested}: which to compare is not clear.\n"
            f"{_candidates_text(arms)}",
            key="--experiment",
            allowed=how,
        )
    tested = ", ".join(under_test) if under_test else "what is under test"
    for each, fp in zip(open_arms, matches[0], strict=True):
        chosen[each.target.name] = (
            fp,
            f"the one of its {len(each.candidates())} experiments that differs from the other arms only in {tested}",
        )
    return chosen


def _under_test(arms: list[_ArmRuns]) -> list[str] | None:
    """What the arms differ in as their files say today (a campaign's variants: what they state); None when an arm
    has no file to say it."""
    if any(each.file_settings is None for each in arms):
        return None
    return _counted_differences([each.file_settings for each in arms if each.file_settings is not None])


# --- one arm ---------------------------------------------------------------------------------------------------


def _exclusion(report: RunReport) -> tuple[ExclusionReason, str] | None:
    if report.status == "interrupted":
        return "interrupted", report.failure.reason if report.failure else "no reason recorded"
    if report.status == "failed":
        return "failed", report.failure.reason if report.failure else "no failure recorded"
    if report.status == "queued":
        return "unfinished", "queued as a Slurm job, not started yet"
    if report.status == "started":
        return "unfinished", "still running, or its supervisor died before finalising the report"
    return None


def _used_and_excluded(
    each: _ArmRuns, chosen: str | None, episode: int | None
) -> tuple[list[RunReport], list[ExcludedEpisode]]:
    """The latest finished episode per seed of the chosen experiment (only episode N with --run N); every other
    episode of the arm with its reason."""
    used: dict[int, RunReport] = {}
    for number in sorted(each.runs):
        report = each.runs[number][1]
        if report.status == "finished" and report.fingerprint == chosen and episode in (None, number):
            used[report.settings.seed] = report
    kept = {report.episode for report in used.values()}
    excluded = []
    for number in sorted(each.runs):
        report = each.runs[number][1]
        if number in kept:
            continue
        why = _exclusion(report)
        if why is None and report.fingerprint != chosen:
            why = ("other experiment", f"experiment {short(report.fingerprint)}, not the one compared")
        elif why is None and episode is not None:
            why = ("superseded", f"--run {episode} compares episode {episode} only")
        elif why is None:
            later = used[report.settings.seed].episode
            why = ("superseded", f"seed {report.settings.seed} finished again in episode {later}")
        assert why is not None  # each branch above gives a reason
        excluded.append(ExcludedEpisode(**_ref(report), reason=why[0], detail=why[1]))
    for report in each.other_campaign:
        where = f"campaign {report.campaign.name}" if report.campaign else "no campaign"
        excluded.append(
            ExcludedEpisode(
                **_ref(report), reason="other campaign", detail=f"ran for {where}, not {each.target.campaign}"
            )
        )
    for report in each.other_tags:
        excluded.append(ExcludedEpisode(**_ref(report), reason="other tags", detail=_tags_detail(report.tags)))
    return [used[seed] for seed in sorted(used)], sorted(excluded, key=lambda e: e.episode)


def tags_text(tags: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(tags.items()))


def _tags_detail(tags: dict[str, str]) -> str:
    return f"run with tags {tags_text(tags)}" if tags else "run without tags"


def _metric_values(report: RunReport) -> dict[str, float | None]:
    per_minute = report.steps_run / report.wall_s * 60 if report.steps_run is not None and report.wall_s else None
    return {
        "score": report.score,
        "sim_score": report.sim_score,
        "steps_run": report.steps_run,
        "wall_s": report.wall_s,
        "steps_per_minute": per_minute,
        "noops": sum(report.noops.values()) if report.steps_run is not None else None,
        "infrastructure_noops": sum(report.infrastructure.values()) if report.steps_run is not None else None,
    }


def _facts(path: Path, report: RunReport) -> EpisodeFacts:
    agent = report.agent
    return EpisodeFacts(
        episode=report.episode,
        status=report.status,
        episode_dir=str(path.parent),
        report_path=str(path),
        simulator_label=report.simulator_label,
        noops=dict(report.noops),
        dropped_keys=dict(report.dropped_keys),
        sim_fallbacks=dict(report.sim_fallbacks),
        infrastructure=dict(report.infrastructure),
        infrastructure_share=report.infrastructure_share,
        behaviour=dict(report.behaviour),
        purple_report=agent is not None,
        steps_run=report.steps_run,
        **(agent.model_dump(include=PURPLE_COUNTERS) if agent is not None else {}),
        failure_reason=report.failure.reason if report.failure else None,
        failure_process=report.failure.process if report.failure else None,
        failure_kind=report.failure.kind if report.failure else None,
        logs={role: str(path.parent / log) for role, log in report.logs.items()},
        alerts=list(report.alerts),
    )


def _task_and_identity(key: str) -> tuple[str, str]:
    """A milestone's key, `task/identity`, split in two."""
    task, identity = key.split("/", 1)
    return task, identity


def _milestones(reports: list[RunReport]) -> tuple[dict[str, MilestoneStats], list[EpisodeMilestones]]:
    keys = list(dict.fromkeys(f"{m.task}/{m.identity}" for report in reports for m in report.milestones))
    available = {f"{m.task}/{m.identity}": m.available for report in reports for m in report.milestones}
    per_episode = [
        EpisodeMilestones(
            episode=report.episode,
            seed=report.settings.seed,
            steps_run=report.steps_run,
            score=report.score,
            steps={f"{m.task}/{m.identity}": m.step for m in report.milestones},
        )
        for report in reports
    ]
    stats = {
        key: milestone_stats(
            *_task_and_identity(key), [each.steps.get(key) for each in per_episode], available=available[key]
        )
        for key in keys
    }
    return stats, per_episode


def reached_curve(per_episode: list[EpisodeMilestones]) -> ReachedCurve:
    """Per step where any episode reached a milestone: how many each episode had reached by then, summarised by the
    median and quartiles (numpy's linear interpolation, as report/stats.py's quantile)."""
    import numpy as np

    reached = [np.sort([step for step in each.steps.values() if step is not None]) for each in per_episode]
    landed_steps = np.unique(np.concatenate([*reached, np.zeros(0)])).astype(int).tolist()
    last = max([each.steps_run or 0 for each in per_episode] + landed_steps + [0])
    grid = [0, *landed_steps] + ([last] if last > (landed_steps[-1] if landed_steps else 0) else [])
    points = np.asarray(grid, dtype=float)
    counts = np.array([np.searchsorted(steps, points, side="right") for steps in reached], dtype=float)
    low, median, high = np.quantile(counts, [0.25, 0.5, 0.75], axis=0).tolist()
    return ReachedCurve(steps=grid, median=median, low=low, high=high)


def _infrastructure_share(reports: list[RunReport]) -> float | None:
    steps = sum(report.steps_run or 0 for report in reports)
    noops = sum(report.infrastructure.get(cause, 0) for report in reports for cause in INFRASTRUCTURE_CAUSES)
    return noops / steps if steps else None


def _arm_analysis(
    each: _ArmRuns, choice: tuple[str | None, str], episode: int | None, flags: list[Flag]
) -> tuple[ArmAnalysis, RunReport | None]:
    """The arm's analysis and the report its settings come from (None when the arm never ran)."""
    target = each.target
    chosen, why = choice
    source = str(target.source) if target.source else None
    experiment = ExperimentChoice(
        fingerprint=chosen, why=why, candidates=[each.describe(fp) for fp in each.experiments]
    )
    used, excluded = _used_and_excluded(each, chosen, episode)
    if episode is not None and episode not in each.runs:
        raise UserError(
            f"arm '{target.name}' has no run episode_{episode:03d}",
            key="--run",
            allowed=", ".join(str(n) for n in each.runs) or "none: this arm has not run",
        )
    if not each.runs:
        has_file = target.source is not None or target.spec is not None
        tagged = None if has_file or not each.other_tags else each.other_tags[-1]  # its settings stand in for a file
        if not has_file and tagged is None:
            raise UserError(f"arm '{target.name}' has neither an arm file nor a run", path=target.output_dir)
        settings, limit = (tagged.settings, tagged.compaction_limit) if tagged else _settings_from_file(target, {})
        flags.append(Flag(kind="no_run", arm=target.name, message=_no_run_text(target, each.other_tags)))
        never_ran = ArmAnalysis(
            arm=target.name,
            source=source,
            campaign=target.campaign,
            status="no run",
            settings_from="report" if tagged else "arm file",
            settings=settings.redacted(),
            fingerprint=fingerprint(settings),
            experiment=experiment,
            excluded=excluded,
            compaction_limit=limit,
        )
        return never_ran, None
    # The settings shown: the chosen experiment's; with none finished, the latest run's (what was attempted).
    path, report = (
        next((each.runs[r.episode] for r in reversed(used)), None)
        or each.runs[episode if episode is not None else max(each.runs)]
    )
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
    limit = report.compaction_limit
    purple_limit = report.agent.compaction_limit if report.agent is not None else None
    if purple_limit is not None and purple_limit != limit:
        flags.append(
            Flag(
                kind="compaction_limit_mismatch",
                arm=target.name,
                message=f"the purple reports compaction limit {purple_limit} in force, the plan set {limit}",
            )
        )
        limit = purple_limit
    if not used:
        reason = next((e.detail for e in reversed(excluded) if e.episode == report.episode), "no finished episode")
        flags.append(
            Flag(
                kind="no_finished_episode",
                arm=target.name,
                message=f"no finished episode to analyse; latest, episode {report.episode}: {reason}",
            )
        )
    for alert in dict.fromkeys(alert for r in used for alert in r.alerts):
        flags.append(Flag(kind="alert", arm=target.name, message=alert))
    values = [_metric_values(r) for r in used]
    metrics: dict[str, Summary] = {
        name: summarise([value for v in values if (value := v[name]) is not None]) for name in METRICS
    }
    milestones, per_episode = _milestones(used)
    curve = reached_curve(per_episode) if used else None
    time_to_milestone = {
        key: kaplan_meier(
            episodes([each.steps.get(key) for each in per_episode], [each.steps_run or 0 for each in per_episode])
        )
        for key, stats in milestones.items()
        if stats.available and len(per_episode) > 1
    }
    try:
        sequential = sequential_experiment([report.sequential for report in used])
    except ValueError as error:
        sequential = None
        message = f"its sequential experiment is unreadable, no boundary or alpha is computed: {error}"
        flags.append(Flag(kind="unreadable_experiment", arm=target.name, message=message))
    if sequential is not None:
        flags.append(Flag(kind="sequential", arm=target.name, message=sequential.text))
    return ArmAnalysis(
        arm=target.name,
        source=source,
        campaign=target.campaign,
        status="finished" if used else report.status,
        settings_from="report",
        settings=report.settings.redacted(),
        fingerprint=report.fingerprint,
        experiment=experiment,
        used=[EpisodeRef(**_ref(r)) for r in used],
        excluded=excluded,
        metrics=metrics,
        max_score=report.max_score,
        milestones=milestones,
        time_to_milestone=time_to_milestone,
        sequential=sequential,
        per_episode=per_episode,
        curve=curve,
        infrastructure_share=_infrastructure_share(used),
        thresholds=report.thresholds,
        compaction_limit=limit,
        latest=_facts(path, report),
    ), report


def _no_run_text(target: ArmTarget, other_tags: list[RunReport]) -> str:
    if other_tags:
        return f"no run in {target.output_dir} with the tags asked for ({len(other_tags)} with other tags)"
    return f"no run in {target.output_dir}"


# --- across arms -----------------------------------------------------------------------------------------------


def _setting_rows_of(settings: list[Settings], show_all: bool) -> list[SettingRow]:
    flats = [flat_settings(each) for each in settings]
    keys: list[str] = []
    for flat in flats:
        keys += [key for key in flat if key not in keys]
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


def _untrusted(arm: ArmAnalysis) -> str | None:
    """Why an arm's numbers say more about the infrastructure than about the agent, or None."""
    facts = arm.latest
    if facts is None:
        return None
    if arm.status != "finished" and facts.failure_kind == "infrastructure" and facts.failure_reason:
        return f"{arm.arm} failed for infrastructure reasons ({facts.failure_reason.removeprefix('infrastructure: ')})"
    share = arm.infrastructure_share
    if arm.status == "finished" and share is not None and share > arm.thresholds.infrastructure_share:
        return (
            f"{arm.arm}: {share:.0%} of the steps of its episodes used were infrastructure noops "
            f"(threshold {arm.thresholds.infrastructure_share:.0%})"
        )
    return None


def _verdict(arms: list[ArmAnalysis]) -> Verdict:
    """Do the arms differ in one setting only, has each a finished episode, and can their numbers be trusted?"""
    differing = [row.key for row in _setting_rows_of([arm.settings for arm in arms], False) if row.counted()]
    if not differing:
        text, comparable = "identical settings", True
    elif len(differing) == 1:
        text, comparable = f"comparable: differs only in {differing[0]}", True
    else:
        text, comparable = f"NOT comparable: differs in {', '.join(differing)}", False
    verdict = Verdict(
        comparable=comparable, identical=not differing, differing=differing, text=text, settings_text=text
    )
    missing = [arm.arm for arm in arms if arm.n == 0]
    if missing:
        verdict = verdict.model_copy(
            update={
                "missing": missing,
                "text": f"NO RESULT for {', '.join(missing)}: no finished episode ({verdict.text})",
            }
        )
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


def _milestone_rows(arms: list[ArmAnalysis], reports: list[RunReport | None], baseline: int) -> list[MilestoneRow]:
    order: list[tuple[str, str]] = []
    for report in [reports[baseline], *reports]:
        for record in report.milestones if report else []:
            if (record.task, record.identity) not in order:
                order.append((record.task, record.identity))
    rows = []
    for task, identity in order:
        key = f"{task}/{identity}"
        cells = []
        for arm in arms:
            stats = arm.milestones.get(key)
            if arm.latest is None:
                cells.append(MilestoneCell(state="no run"))
            elif arm.n == 0:
                cells.append(MilestoneCell(state="none finished"))
            elif stats is None:
                cells.append(MilestoneCell(state="not in run"))
            elif not stats.available:
                cells.append(MilestoneCell(state="unavailable", stats=stats))
            else:
                cells.append(_milestone_cell(stats, arm.time_to_milestone.get(key)))
        base_step = cells[baseline].step
        for cell in cells:
            if cell.step is not None and base_step is not None:
                cell.delta = cell.step - base_step
        rows.append(MilestoneRow(task=task, identity=identity, cells=cells))
    return rows


def _milestone_cell(stats: MilestoneStats, survival: KaplanMeier | None) -> MilestoneCell:
    """One episode: the step it landed on; several: the Kaplan–Meier median, censored at the steps run."""
    if survival is not None:
        step = round(survival.median) if survival.median is not None else None
        state: CellState = "reached" if stats.reached else "not reached"
        return MilestoneCell(state=state, step=step, stats=stats, time_to_event=survival)
    if stats.step is None:
        return MilestoneCell(state="not reached", stats=stats)
    return MilestoneCell(state="reached", step=round(stats.step), stats=stats)


def _design_text(line: DifferenceResult) -> str:
    return (
        f"{line.design}, n = {line.n_a}" if line.design == "paired" else f"{line.design}, n = {line.n_a} + {line.n_b}"
    )


def _verdict_of(line: DifferenceResult) -> DifferenceVerdict:
    """Read on the adjusted p (raw when the test is alone); an interval, where there is one, must exclude 0."""
    p = line.p_adjusted if line.p_adjusted is not None else line.p
    if line.n_a == 0 or line.n_b == 0:
        return "no runs"
    if p is None:
        return "too few episodes"
    excludes_zero = line.interval is None or line.interval.low > 0 or line.interval.high < 0
    if p < ALPHA and excludes_zero:
        return "distinguishable"
    if line.estimate == 0 and (line.interval is None or line.interval.low == line.interval.high == 0 or p >= 1):
        return "no difference"
    return "not distinguishable"


def _worded(line: DifferenceResult) -> str:
    """The one sentence every view shows for a difference: estimate, interval, test, p (adjusted), verdict."""
    if line.medians is not None:
        shown = ["not reached" if median is None else f"{median:g}" for median in line.medians]
        head = f"{line.metric} (Kaplan–Meier median): {shown[0]} for {line.arm} vs {shown[1]} for {line.baseline}"
    elif line.estimate is None:
        head = f"{line.metric}: {line.arm} − {line.baseline}: no estimate"
    else:
        head = f"{line.metric}: {line.arm} − {line.baseline} = {line.estimate:+.2f}"
    if line.interval is not None:
        head += f" {line.interval.text()}"
    design = _design_text(line)
    if line.p is None:
        return f"{head}; {design}: no interval or test can be given (run more seeds: `--seeds 0-5`)"
    adjusted = f", Holm-adjusted p = {line.p_adjusted:.3g}" if line.p_adjusted is not None else ""
    test = "log-rank" if line.medians is not None else line.design
    head += f" ({test}: p = {line.p:.3g}{adjusted})"
    effect = f"; {line.pairing_effect.text()}" if line.pairing_effect is not None else ""
    if line.verdict == "distinguishable":
        return f"{head}; distinguishable from seed noise ({design}){effect}"
    if line.verdict == "no difference":
        return f"{head}; no difference ({design}){effect}"
    tail = ""
    if line.seeds_needed is not None:
        unit = "paired seeds" if line.design == "paired" else "seeds per arm"
        tail = f"; about {line.seeds_needed} {unit} would resolve a difference of this size"
    return f"{head}; not distinguishable from seed noise ({design}){tail}{effect}"


def _score_difference(arm: ArmAnalysis, base: ArmAnalysis, design: Pairing) -> DifferenceResult:
    """The score, paired by seed when the design allows (else two independent samples, saying why)."""
    mine = {ref.seed: value for ref, value in zip(arm.used, arm.metrics["score"].values, strict=True)}
    theirs = {ref.seed: value for ref, value in zip(base.used, base.metrics["score"].values, strict=True)}
    found: MetricComparison = compare_metric("score", mine, theirs, design, name_a=arm.arm, name_b=base.arm)
    return DifferenceResult(
        metric="score",
        arm=arm.arm,
        baseline=base.arm,
        method=found.method,
        design=found.design,
        design_reason=found.design_reason,
        n_a=found.n_a,
        n_b=found.n_b,
        estimate=found.estimate,
        interval=found.ci,
        p=found.p_value,
        verdict="too few episodes",
        seeds_needed=found.seeds_needed,
        pairing_effect=found.paired.effect if found.paired else None,
        text="",
    )


def _milestone_difference(key: str, arm: ArmAnalysis, base: ArmAnalysis) -> DifferenceResult | None:
    """Steps to a milestone as time to an event (censored at the steps run): the arms' Kaplan–Meier medians and the
    log-rank test. None when neither arm reached it."""

    def times(of: ArmAnalysis) -> list[TimeToEvent]:
        return episodes(
            [each.steps.get(key) for each in of.per_episode], [each.steps_run or 0 for each in of.per_episode]
        )

    mine, theirs = times(arm), times(base)
    test = logrank(mine, theirs)
    if test.p_value is None:
        return None
    medians = [
        (of.time_to_milestone.get(key) or kaplan_meier(data)).median for of, data in ((arm, mine), (base, theirs))
    ]
    first, second = medians
    estimate = first - second if first is not None and second is not None else None
    return DifferenceResult(
        metric=f"{key.split('/', 1)[1]} steps",
        arm=arm.arm,
        baseline=base.arm,
        method=f"{KM_METHOD}; {LOGRANK_METHOD}",
        design="unpaired",
        design_reason="the log-rank test compares the arms' time-to-milestone curves",
        n_a=len(mine),
        n_b=len(theirs),
        estimate=estimate,
        interval=None,
        p=test.p_value,
        verdict="too few episodes",
        seeds_needed=None,
        medians=medians,
        text="",
    )


def _differences(arms: list[ArmAnalysis], baseline: int) -> tuple[list[ArmDifference], str]:
    """Each arm with finished episodes against the baseline: the score (paired when the design allows) and the steps
    to every milestone either reached (time to event); then Holm over all of them. Returns the family in words."""
    base = arms[baseline]
    if base.n == 0:
        return [], "no test was made"
    differences = []
    for arm in arms:
        if arm is base or arm.n == 0:
            continue
        design = pairing(
            arm.settings.simulator,
            arm.settings.reset_mode,
            arm.seeds,
            base.settings.simulator,
            base.settings.reset_mode,
            base.seeds,
        )
        keys = [
            key
            for key, stats in base.milestones.items()
            if stats.available and key in arm.milestones and (stats.reached or arm.milestones[key].reached)
        ]
        milestone_steps = [line for key in keys if (line := _milestone_difference(key, arm, base)) is not None]
        differences.append(
            ArmDifference(
                arm=arm.arm,
                baseline=base.arm,
                pairing=design,
                score=_score_difference(arm, base, design),
                milestone_steps=milestone_steps,
            )
        )
    families = {
        f"the {{count}} score test(s) (the primary metric, one per arm against {base.arm})": [
            difference.score for difference in differences
        ],
        "the {count} steps-to-milestone test(s)": [
            line for difference in differences for line in difference.milestone_steps
        ],
    }
    stated = []
    for name, members in families.items():
        tested = [(str(index), line.p) for index, line in enumerate(members)]
        count = sum(p is not None for _, p in tested)
        if count == 0:
            continue
        stated.append(name.format(count=count))
        adjusted = holm(tested, family=stated[-1])
        for index, line in enumerate(members):
            test = adjusted.adjusted(str(index))
            line.p_adjusted = test.adjusted_p if test is not None and count > 1 else None
    family = (
        f"{HOLM_METHOD} within each family: {'; '.join(stated)}; verdicts read the adjusted p (a test alone "
        "in its family is not adjusted)"
        if stated
        else "no test was made"
    )
    lines = [line for difference in differences for line in difference.lines()]
    for line in lines:
        line.verdict = _verdict_of(line)
        line.text = _worded(line)
    return differences, family


def _cross_arm_flags(arms: list[ArmAnalysis], flags: list[Flag]) -> None:
    if len({arm.settings.simulator for arm in arms}) > 1:
        shown = ", ".join(f"{arm.arm}: {simulator_label(arm)}" for arm in arms)
        flags.append(
            Flag(
                kind="different_simulators",
                message=f"arms ran on different simulators ({shown}): scores "
                "and milestone steps are not on the same scale",
            )
        )


def simulator_label(arm: ArmAnalysis) -> str:
    return (arm.latest.simulator_label if arm.latest else None) or label_of(arm.settings.simulator)


def analyse(
    items: list[str],
    env: Environment,
    *,
    baseline: str | None = None,
    episode: int | None = None,
    experiments: list[str] | None = None,
    show_all: bool = False,
    tags: dict[str, str] | None = None,
) -> Analysis:
    """Analyse arms (files, names, output dirs, or a campaign file: its episodes only). The baseline defaults to the
    first arm; `episode` (--run N) and `experiments` (--experiment PREFIX) choose what the automatic choice cannot;
    `tags` (--tag KEY=VALUE) keeps the episodes run with every one of them, the others excluded as "other tags"."""
    with without_cyclic_gc():  # its objects hold no cycles: a tenth of its time was the collector's passes
        return _analyse(items, env, baseline, episode, experiments, show_all, tags)


def _analyse(
    items: list[str],
    env: Environment,
    baseline: str | None,
    episode: int | None,
    experiments: list[str] | None,
    show_all: bool,
    tags: dict[str, str] | None,
) -> Analysis:
    if episode is not None and episode < 1:
        raise UserError(f"{episode} is not an episode number", key="--run", allowed="an integer >= 1")
    if episode is not None and experiments:
        raise UserError("choose by --run or by --experiment, not both", key="--experiment")
    targets = resolve_targets(items, env)
    names = [t.name for t in targets]
    baseline_name = baseline if baseline is not None else names[0]
    if baseline_name not in names:
        raise UserError(
            f"'{baseline_name}' is not one of the arms compared", key="--baseline", allowed=", ".join(names)
        )
    flags: list[Flag] = []
    wanted = dict(tags or {})
    runs = [_arm_runs(target, episode, flags, wanted) for target in targets]
    if episode is not None:
        choices: dict[str, tuple[str | None, str]] = {
            each.target.name: (each.runs[episode][1].fingerprint, f"--run {episode}")
            if episode in each.runs
            else (None, f"no episode {episode}")
            for each in runs
        }
    else:
        choices = choose_experiments(runs, experiments or [])
    analysed = [_arm_analysis(each, choices[each.target.name], episode, flags) for each in runs]
    arms = [arm for arm, _ in analysed]
    reports = [report for _, report in analysed]
    _cross_arm_flags(arms, flags)
    base_index = names.index(baseline_name)
    campaigns = {target.campaign for target in targets}
    differences, family = _differences(arms, base_index)
    return Analysis(
        baseline=baseline_name,
        campaign=campaigns.pop() if len(campaigns) == 1 else None,
        tags=wanted,
        show_all=show_all,
        arms=arms,
        settings=_setting_rows_of([arm.settings for arm in arms], show_all),
        milestones=_milestone_rows(arms, reports, base_index),
        verdict=_verdict(arms),
        differences=differences,
        family=family,
        flags=flags,
    )
