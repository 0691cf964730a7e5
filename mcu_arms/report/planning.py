"""`mcu-arms plan CAMPAIGN --power`: before anything runs, how many paired seeds the campaign needs, from a pilot (an
earlier experiment's per-seed results: the paired score differences of the arms named, as `compare` pairs them) or
from a stated effect and spread; for the campaign's number of variants (Holm), by simulation of the rule `compare`
applies (stats/power.py); and for a campaign to be run `--until-resolved`, the power and seeds of that stopping rule
(stats/sequential.py)."""

from __future__ import annotations

from pathlib import Path

from mcu_arms.arms.campaign import is_campaign, load_campaign
from mcu_arms.contracts.errors import UserError
from mcu_arms.environment import Environment
from mcu_arms.report.differences import values_by_seed
from mcu_arms.stats.power import PowerPlan, Sampler, normal_sampler, pilot_sampler, plan_power
from mcu_arms.stats.sequential import DEFAULT_BATCH, DEFAULT_MAX_SEEDS, SequentialPower, sequential_power


class CampaignPower(PowerPlan):
    """The fixed-n plan, and with `--until-resolved` what the sequential run would do."""

    sequential: SequentialPower | None = None


def pilot_differences(items: list[str], env: Environment) -> tuple[list[float], str]:
    """The paired score differences (each arm − the first, over the seeds both completed) of an earlier experiment,
    and where they come from in words."""
    from mcu_arms.report.analysis import analyse

    result = analyse(items, env)
    differences: list[float] = []
    named = []
    for difference in result.differences:
        if difference.pairing.design != "paired":
            raise UserError(
                f"the pilot's {difference.arm} and {difference.baseline} are not paired: {difference.pairing.reason}",
                key="--pilot",
                allowed="arms run on the same seeds of a seeded world (embedded; MineStudio with a hard reset)",
            )
        mine = values_by_seed(result.arm(difference.arm), "score")
        theirs = values_by_seed(result.arm(difference.baseline), "score")
        differences += [mine[seed] - theirs[seed] for seed in difference.pairing.seeds]
        named.append(f"{difference.arm} − {difference.baseline} ({len(difference.pairing.seeds)} seeds)")
    if len(differences) < 2:
        raise UserError(
            "the pilot has fewer than 2 paired score differences", key="--pilot", allowed="arms that ran 2+ seeds"
        )
    return differences, f"pilot: {'; '.join(named)}"


def sequential_asked(
    *, power: bool, until_resolved: bool, max_seeds: int | None, batch: int | None
) -> tuple[int, int] | None:
    """`plan --power --until-resolved [--max-seeds N] [--batch K]`: the sequential run to simulate, (max seeds,
    batch), or None; a flag that means nothing without the others is a UserError naming it."""
    given = [name for name, value in (("--max-seeds", max_seeds), ("--batch", batch)) if value is not None]
    if given and not until_resolved:
        raise UserError(f"{given[0]} sets how --until-resolved runs", key=given[0], allowed="--until-resolved")
    if until_resolved and not power:
        raise UserError(
            "plan --until-resolved simulates a sequential run's power, which needs --power",
            key="--until-resolved",
            allowed="plan CAMPAIGN --power --until-resolved (--pilot ARM ... | --effect X --spread Y)",
        )
    if not until_resolved:
        return None
    return (max_seeds or DEFAULT_MAX_SEEDS, batch or DEFAULT_BATCH)


def power_plan(
    campaign_file: Path,
    env: Environment,
    *,
    pilot: list[str] | None = None,
    effect: float | None = None,
    spread: float | None = None,
    until_resolved: tuple[int, int] | None = None,
) -> CampaignPower:
    """The campaign's seeds and variants, and what its pilot or stated effect and spread need; `until_resolved`:
    (max seeds, batch) of a sequential run to simulate as well."""
    path = campaign_file if campaign_file.is_absolute() else env.cwd / campaign_file
    if not is_campaign(path):
        raise UserError(
            f"{campaign_file} is not a campaign file", key="--power", allowed="a campaign (campaigns/*.toml)"
        )
    campaign = load_campaign(path, env.arms_dir)
    if not campaign.seeds:
        raise UserError(
            "the campaign names no seeds to plan for", path=path, key="seeds", allowed="seeds = [0, 1, ...]"
        )
    if (pilot is None) == (effect is None or spread is None):
        raise UserError(
            "--power needs a pilot or a stated effect and spread, one of the two",
            key="--power",
            allowed="--pilot ARM (repeatable: an earlier experiment, as compare names it) or --effect X --spread Y",
        )
    variants = max(1, len(campaign.variants))
    sampler: Sampler
    if pilot is not None:
        differences, source = pilot_differences(pilot, env)
        plan = plan_power(seeds_planned=len(campaign.seeds), variants=variants, pilot=differences, source=source)
        sampler = pilot_sampler(differences)
    else:
        assert effect is not None and spread is not None
        if spread <= 0:
            raise UserError(f"--spread {spread} is not a standard deviation", key="--spread", allowed="a number > 0")
        plan = plan_power(
            seeds_planned=len(campaign.seeds),
            variants=variants,
            effect=effect,
            spread=spread,
            source=f"stated: effect {effect:g}, spread (sd of the per-seed differences) {spread:g}",
        )
        sampler = normal_sampler(effect, spread)
    sequential = None
    if until_resolved is not None:
        max_seeds, batch = until_resolved
        sequential = sequential_power(sampler, max_seeds=max_seeds, batch=batch, variants=variants)
    return CampaignPower(**plan.model_dump(), sequential=sequential)


def power_text(plan: CampaignPower) -> list[str]:
    """The plan in words, one line each."""
    needed = (
        f"{plan.seeds_needed} paired seeds for 80% power"
        if plan.seeds_needed is not None
        else "more than 64 paired seeds for 80% power"
    )
    smallest = (
        f"the smallest effect resolved with 80% power at {plan.seeds_planned} seeds: {plan.smallest_effect:.3g}"
        if plan.smallest_effect is not None
        else f"{plan.seeds_planned} seeds can resolve no effect with 80% power for {plan.variants} variant(s)"
    )
    lines = [
        f"power for {plan.variants} variant(s) against the baseline ({plan.source})",
        f"at the campaign's {plan.seeds_planned} seeds: power {plan.power_at_planned:.0%}; {needed}",
        smallest,
        f"method: {plan.method}",
    ]
    if plan.sequential is not None:
        run = plan.sequential
        stops = ", ".join(f"{share:.0%} at {seeds}" for seeds, share in run.stopped_at.items())
        lines += [
            f"run --until-resolved (looks at {', '.join(map(str, run.looks))} seeds of at most {run.max_seeds}): "
            f"power {run.power:.0%} per variant, {run.power_every_variant:.0%} for every variant; "
            f"{run.expected_seeds:.1f} seeds per arm on average (stops: {stops})",
            f"method: {run.method}",
        ]
    return lines
