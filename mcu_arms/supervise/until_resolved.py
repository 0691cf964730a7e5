"""`mcu-arms run CAMPAIGN --until-resolved`: run the campaign's seeds in batches (looks) and stop when every variant's
difference from the baseline on the primary metric is resolved, or at the planned maximum of seeds.

Each look plans the next batch of seeds for every arm (each episode records its look: contracts/sequential.py), runs
it, reads the primary metric of each finished episode, and tests each variant against the baseline with the
group-sequential exact sign-flip test (stats/sequential.py), which stays valid however many looks are
taken. It needs a paired design (the same seeds on a simulator whose world is the seed). A sequential experiment is
a new experiment: every episode is run fresh (earlier finished ones are not reused), so each records its look.

Seeds: the campaign's, in order, then consecutive integers above its largest, up to --max-seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from mcu_arms.arms.campaign import Campaign, Selection
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import RunReport, read_report
from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.stats.basics import ALPHA
from mcu_arms.stats.design import pairing
from mcu_arms.stats.sequential import (
    DEFAULT_BATCH,
    DEFAULT_MAX_SEEDS,
    DEFAULT_PRIMARY,
    PRIMARY_METRICS,
    SEQUENTIAL_METHOD,
    PrimaryMetric,
    SequentialTest,
    primary_value,
    resolved,
    sequential_compare,
)
from mcu_arms.supervise.outcomes import RunOutcome

StopReason = Literal["resolved", "max_seeds", "interrupted", "no_pairs"]


class SequentialAsk(BaseModel):
    """How --until-resolved runs: the most seeds per arm, the seeds per look, the metric the stopping rule reads."""

    max_seeds: int = DEFAULT_MAX_SEEDS
    batch: int = DEFAULT_BATCH
    primary: PrimaryMetric = DEFAULT_PRIMARY


def checked_modes(
    *,
    on_slurm: bool,
    detach: bool,
    dry_run: bool,
    until_resolved: bool,
    seeds_given: bool,
    max_seeds: int | None,
    batch: int | None,
    primary: str | None,
) -> SequentialAsk | None:
    """The modes `run` was asked for, checked together: --until-resolved's settings, or None for a plain run. A
    combination that means nothing is a UserError naming its flag."""
    if detach and not on_slurm:
        raise UserError(
            "--detach leaves Slurm jobs running; a local run stops with this command",
            key="--detach",
            allowed="--executor slurm --detach",
        )
    sequential = {"--max-seeds": max_seeds, "--batch": batch, "--primary": primary}
    given = [name for name, value in sequential.items() if value is not None]
    if given and not until_resolved:
        raise UserError(f"{given[0]} sets how --until-resolved runs", key=given[0], allowed="--until-resolved")
    if primary is not None and primary not in PRIMARY_METRICS:
        raise UserError(
            f"{primary!r} is not a metric the stopping rule can read",
            key="--primary",
            allowed=", ".join(PRIMARY_METRICS),
        )
    if not until_resolved:
        return None
    if detach or dry_run:
        raise UserError(
            "--until-resolved decides each batch from the last one's results",
            key="--until-resolved",
            allowed="without --detach and --dry-run",
        )
    if seeds_given:
        raise UserError(
            "--until-resolved chooses the seeds: the campaign's, then the integers after them, a batch at a time",
            key="--seeds",
            allowed="--max-seeds N and --batch K",
        )
    asked = {"max_seeds": max_seeds, "batch": batch, "primary": primary}
    return SequentialAsk.model_validate({name: value for name, value in asked.items() if value is not None})


def the_campaign(selection: Selection) -> Campaign:
    """The one campaign --until-resolved runs (a baseline and its variants, nothing else)."""
    if len(selection.campaigns) != 1 or len(selection.specs) != len(selection.campaigns[0].arms()):
        raise UserError(
            "--until-resolved runs one campaign (a baseline and its variants), nothing else",
            key="--until-resolved",
            allowed="mcu-arms run campaigns/NAME.toml --until-resolved",
        )
    return selection.campaigns[0]


def _primary_of(report: RunReport, primary: PrimaryMetric) -> float | None:
    return primary_value(
        primary, score=report.score, sim_score=report.sim_score, milestones_reached=report.milestone_counts()[0]
    )


def sequential_seeds(campaign_seeds: list[int] | None, max_seeds: int) -> list[int]:
    seeds = list(campaign_seeds or [])[:max_seeds]
    following = max(seeds, default=-1) + 1
    while len(seeds) < max_seeds:
        seeds.append(following)
        following += 1
    return seeds


class LookResult(BaseModel):
    look: int
    seeds: list[int]
    outcome: RunOutcome
    tests: dict[str, SequentialTest]  # variant -> its test over the looks so far


class SequentialRun(BaseModel):
    campaign: str
    baseline: str
    primary: PrimaryMetric
    max_seeds: int
    batch: int
    alpha: float
    method: str = SEQUENTIAL_METHOD
    looks: list[LookResult]
    stopped: StopReason

    @property
    def exit_code(self) -> int:
        """The worst of the looks' exit codes (130 when one was interrupted, 1 when an arm failed)."""
        codes = [look.outcome.exit_code for look in self.looks]
        return 130 if 130 in codes else max(codes, default=0)


def refuse_unpaired(plans: list[ArmPlan], baseline: str, variants: list[str]) -> None:
    """A sequential run tests paired differences: every variant must share the baseline's seeded world."""
    by_arm = {plan.arm: plan.settings for plan in plans}
    base = by_arm[baseline]
    for variant in variants:
        other = by_arm[variant]
        design = pairing(other.simulator, other.reset_mode, [0], base.simulator, base.reset_mode, [0])
        if design.design != "paired":
            raise UserError(
                f"--until-resolved needs a paired design, and '{variant}' vs '{baseline}' is not: {design.reason}",
                key="--until-resolved",
                allowed='arms on the embedded simulator, or MineStudio with reset_mode = "hard"',
            )


def _values(outcome: RunOutcome, primary: PrimaryMetric) -> dict[str, dict[int, float]]:
    """arm -> seed -> the primary metric, over the look's finished episodes."""
    values: dict[str, dict[int, float]] = {}
    for arm in outcome.arms:
        if arm.status != "finished" or arm.report_path is None or arm.seed is None:
            continue
        value = _primary_of(read_report(Path(arm.report_path)), primary)
        if value is not None:
            values.setdefault(arm.arm, {})[arm.seed] = value
    return values


def run_until_resolved(
    campaign: Campaign,
    plan_look: Callable[[list[int], SequentialLook], list[ArmPlan]],
    run_look: Callable[[list[ArmPlan]], RunOutcome],
    out: Console,
    *,
    max_seeds: int,
    batch: int,
    primary: PrimaryMetric,
    alpha: float = ALPHA,
) -> SequentialRun:
    """Look after look: plan and run the next batch of seeds, test every variant, stop when all are resolved."""
    baseline = campaign.baseline.spec.name
    variants = [arm.spec.name for arm in campaign.variants]
    if not variants:
        raise UserError(
            "--until-resolved compares variants with the baseline, and this campaign has none",
            path=campaign.path,
            key="variants",
        )
    seeds = sequential_seeds(campaign.seeds, max_seeds)
    values: dict[str, dict[int, float]] = {}
    look_of_seed: dict[int, int] = {}
    looks: list[LookResult] = []
    stopped: StopReason = "max_seeds"
    for look, start in enumerate(range(0, len(seeds), batch), start=1):
        batch_seeds = seeds[start : start + batch]
        design = SequentialLook(
            look=look, primary=primary, max_seeds=max_seeds, batch=batch, alpha=alpha, comparisons=len(variants)
        )
        plans = plan_look(batch_seeds, design)
        if look == 1:
            refuse_unpaired(plans, baseline, variants)
        outcome = run_look(plans)
        for arm, by_seed in _values(outcome, primary).items():
            values.setdefault(arm, {}).update(by_seed)
        look_of_seed.update({seed: look for seed in batch_seeds})
        tests = {
            variant: sequential_compare(values.get(variant, {}), values.get(baseline, {}), look_of_seed, design)
            for variant in variants
        }
        looks.append(LookResult(look=look, seeds=batch_seeds, outcome=outcome, tests=tests))
        _say(out, look, len(look_of_seed), tests)
        if outcome.interrupted_by:
            stopped = "interrupted"
            break
        if resolved(list(tests.values())):
            stopped = "resolved"
            break
        if not any(test.looks for test in tests.values()):
            stopped = "no_pairs"
            break
    return SequentialRun(
        campaign=campaign.name,
        baseline=baseline,
        primary=primary,
        max_seeds=max_seeds,
        batch=batch,
        alpha=alpha,
        looks=looks,
        stopped=stopped,
    )


def _say(out: Console, look: int, seeds: int, tests: dict[str, SequentialTest]) -> None:
    for variant, test in tests.items():
        if not test.looks:
            out.print(f"look {look} ({seeds} seeds): {escape(variant)}: no paired seed finished yet", highlight=False)
            continue
        last = test.looks[-1]
        boundary = "none reachable yet" if last.boundary is None else f"±{last.boundary:.3g}"
        verdict = f"resolved at look {last.look}" if test.rejected else "not resolved"
        out.print(
            f"look {look} ({seeds} seeds): {escape(variant)} − baseline = {last.mean_difference:+.3g} (n = {last.n}); "
            f"boundary {boundary}; alpha spent {last.alpha_spent:.4f} of {last.alpha_allowed:.4f} allowed "
            f"(of {test.alpha:g}): {verdict}",
            highlight=False,
        )
