"""The one analysis of a comparison as data: what every view (the console table, `--json`, `--csv`, `--markdown`,
`--plot`, `--export`, `mcu_arms.results`, `view` and `report --html`) renders. Computed by report/analysis.py; the
experiments it is computed over are chosen by report/experiments.py. Light to import: pydantic and the models only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mcu_arms.contracts.settings import (
    REPLICATE_AND_PLACEMENT_KEYS,
    Settings,
    Thresholds,
)
from mcu_arms.contracts.states import RunStatus
from mcu_arms.stats.across_tasks import AcrossTasks
from mcu_arms.stats.basics import (
    MEAN_INTERVAL_METHOD,
    Interval,
    MilestoneStats,
    Summary,
)
from mcu_arms.stats.basics import METHOD as STATS_METHOD
from mcu_arms.stats.design import Pairing
from mcu_arms.stats.paired import T_INTERVAL_METHOD, PairingEffect
from mcu_arms.stats.power import POWER_METHOD
from mcu_arms.stats.sequential import (
    SequentialExperiment,
    SequentialTest,
)
from mcu_arms.stats.survival import (
    KM_METHOD,
    LOGRANK_METHOD,
    MEDIAN_METHOD,
    KaplanMeier,
    episodes,
    kaplan_meier,
)
from mcu_arms.stats.survival import ReachingCurve as ReachingCurve  # re-exported: views draw it

ANALYSIS_SCHEMA_VERSION = 5  # 4 had bootstrap intervals of means and unpaired differences, the sequential verdict
# on the score only and no across-tasks aggregates; 3 had log-rank p by chi-square, bootstrap paired intervals, no
# pairing exclusions nor sequential verdicts; 2 had a milestone's median step over the episodes that reached it; 1 was
# the comparison before experiments were explicit
# Where a setting only says where things run, or which replicate ran: shown with --all, never a difference.
NOISE_SETTINGS: frozenset[str] = REPLICATE_AND_PLACEMENT_KEYS
EXIT_COMPARABLE = 0
EXIT_NOT_COMPARABLE = 1  # also: an arm with no finished episode
EXIT_NOT_TRUSTWORTHY = 3  # also: an arm with no finished episode because of infrastructure trouble

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
DifferenceVerdict = Literal["distinguishable", "not resolved", "no difference", "too few episodes", "no runs"]


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
    look: int | None = None  # `run --until-resolved`: the look it ran in


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
    sim_score: float | None = None
    steps: dict[str, int | None]  # "task/identity" -> step

    @property
    def milestones_reached(self) -> int:
        return sum(step is not None for step in self.steps.values())


class EpisodeFacts(BaseModel):
    """What belongs to one episode (the latest used, else the latest run): counters by cause, the purple's own
    counters, logs. Never a statistic over replicates; every view labels it with its episode."""

    episode: int
    status: RunStatus
    episode_dir: str
    report_path: str
    simulator_label: str | None = None
    tool: str | None = None  # the mcu-arms that ran it: version, and from a checkout its commit (tool_of)
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
    differs_in: list[str] | None = None  # a campaign's variant: what it states it changes (the baseline: [])
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
    reach: list[str] | None = None  # steps to a milestone: "k/n" reached, the arm's and the baseline's
    identical: bool = False  # every paired difference is 0 (or, unpaired, every value the same; milestones: the
    # same step or end in every episode): the only case worded "no difference"
    excluded: str = ""  # paired: the seeds left out of the pairing and why ("" when none)
    sequential: SequentialTest | None = None  # the primary metric of episodes run with `--until-resolved`: the
    # group-sequential test the run stopped by; the verdict reads it, the fixed-n figures are secondary
    text: str


class ArmDifference(BaseModel):
    arm: str
    baseline: str
    pairing: Pairing  # the design the arm and the baseline allow, and why
    # The stopping rule's metric of episodes run with `--until-resolved --primary sim_score|milestones`, first; with
    # the score as primary (the default), the score line carries the sequential test and this is None.
    primary: DifferenceResult | None = None
    score: DifferenceResult
    milestone_steps: list[DifferenceResult]

    def lines(self) -> list[DifferenceResult]:
        return [*([self.primary] if self.primary else []), self.score, *self.milestone_steps]


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
        f"each arm's means: {MEAN_INTERVAL_METHOD}; scores: paired by seed over the seeds both arms completed where "
        f"the design allows ({T_INTERVAL_METHOD}, "
        f"exact sign-flip test; seeds needed: {POWER_METHOD}), else {STATS_METHOD}; milestones: {KM_METHOD}, "
        f"{MEDIAN_METHOD}, {LOGRANK_METHOD}; 'no difference' only when every paired difference is 0; episodes run "
        "with --until-resolved: the sequential test's verdict, on the metric the run stopped by"
    )
    family: str = "no test was made"  # which tests were adjusted together (Holm), in words
    # Arms compared on 2 tasks or more: rliable's aggregates over the (task × seed) normalised scores, or why they
    # are unavailable; None: fewer than 2 tasks, nothing to aggregate
    across_tasks: AcrossTasks | None = None
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
