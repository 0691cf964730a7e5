"""Issue 46: statistics that hold at 3–12 seeds and say only what they show, each defect pinned by its reproduction
(the methods against scipy and lifelines: test_methods_reference.py; sizes and coverage: tests/bench/)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cli_support import invoke
from test_compare import compare, write_arm, write_run

from mcu_arms.contracts.run_report import Failure
from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.report.compare import to_csv
from mcu_arms.stats.comparison import adjust_family, compare_metric
from mcu_arms.stats.design import pairing
from mcu_arms.stats.paired import compare_paired
from mcu_arms.stats.power import seeds_needed_paired, seeds_to_resolve
from mcu_arms.view.pages import render_comparison

REPO = Path(__file__).resolve().parents[1]


def test_seeds_needed_is_never_the_n_that_did_not_resolve() -> None:
    """It named the n already run: a z-based figure ignores the exact test's discreteness."""
    differences = [5.0, -1.0, 4.0, 3.0, 6.0, 2.0]  # one seed the other way: p = 4/64, not resolved
    result = compare_paired("score", dict(enumerate(differences)), dict.fromkeys(range(6), 0.0), name_a="a", name_b="b")
    assert not result.distinguishable and result.seeds_needed is not None and result.seeds_needed >= 7
    assert seeds_needed_paired(differences, variants=2) >= result.seeds_needed  # a family needs at least as many


def test_a_zero_mean_with_a_wide_interval_is_not_resolved_not_no_difference() -> None:
    result = compare_paired(
        "score", dict(enumerate([33.0, -33.0, 33.0, -33.0])), dict.fromkeys(range(4), 0.0), name_a="a", name_b="b"
    )
    assert result.estimate == 0 and "not resolved" in result.text and "no difference" not in result.text


@pytest.mark.parametrize("variants", [1, 2, 4])
def test_the_templates_seeds_resolve_a_same_sign_difference_in_every_variant(variants: int) -> None:
    """The template's advice, per number of variants, is what the Holm family over the variants needs."""
    comment = (REPO / "templates" / "campaign.toml").read_text(encoding="utf-8")
    advised = {
        1: int(re.search(r"resolves at (\d+) seeds with 1 variant", comment).group(1)),  # type: ignore[union-attr]
        2: int(re.search(r"at (\d+) with 2 or 3 variants", comment).group(1)),  # type: ignore[union-attr]
        4: int(re.search(r"at (\d+) with 4 to 6 variants", comment).group(1)),  # type: ignore[union-attr]
    }[variants]
    assert advised == seeds_to_resolve(variants)
    design = pairing("embedded", None, range(advised), "embedded", None, range(advised))
    comparisons = [
        compare_metric(
            "score",
            {seed: 10.0 + seed + variant for seed in range(advised)},
            dict.fromkeys(range(advised), 0.0),
            design,
            name_a=f"variant_{variant}",
            name_b="baseline",
            variants=variants,
        )
        for variant in range(variants)
    ]
    _, adjusted = adjust_family(comparisons, family="the variants")
    assert all(comparison.distinguishable for comparison in adjusted)
    fewer = pairing("embedded", None, range(advised - 1), "embedded", None, range(advised - 1))
    short = [
        compare_metric(
            "score",
            {s: 10.0 + s for s in range(advised - 1)},
            dict.fromkeys(range(advised - 1), 0.0),
            fewer,
            name_a=f"v{v}",
            name_b="b",
        )
        for v in range(variants)
    ]
    assert not all(comparison.distinguishable for comparison in adjust_family(short, family="the variants")[1])


def _six_seeds(cwd: Path, name: str, scores: list[float], **changes) -> None:
    write_arm(cwd, name, **changes)
    for seed, score in enumerate(scores):
        write_run(cwd, name, seed + 1, seed=seed, score=score)


def test_two_variants_of_different_settings_are_each_comparable_and_exit_0(tmp_path: Path) -> None:
    """Was: "NOT comparable: differs in agent, step_timeout" and exit 1, for variants each changing one setting."""
    _six_seeds(tmp_path, "base", [1.0] * 6)
    _six_seeds(tmp_path, "other_agent", [0.0] * 6, agent="random")
    _six_seeds(tmp_path, "longer_timeout", [1.0] * 6, step_timeout=60)
    result = compare(tmp_path, "base", "other_agent", "longer_timeout")
    assert result.verdict.comparable and result.exit_code == 0
    assert result.verdict.text == "comparable: each variant differs from base only in what it tests"
    _six_seeds(tmp_path, "two_changes", [1.0] * 6, agent="random", steps=300)
    wrong = compare(tmp_path, "base", "other_agent", "two_changes")
    assert not wrong.verdict.comparable and "two_changes differs from base in" in wrong.verdict.text


def test_an_interrupted_seed_leaves_the_others_paired_and_is_named_in_every_view(tmp_path: Path) -> None:
    """Was: one interrupted seed made the whole comparison unpaired, and only --json said why."""
    _six_seeds(tmp_path, "base", [10.0, 12.0, 9.0, 11.0, 10.0, 13.0])
    write_arm(tmp_path, "variant", agent="random")
    for seed in range(6):
        interrupted = seed == 3
        write_run(
            tmp_path,
            "variant",
            seed + 1,
            seed=seed,
            score=float(seed),
            status="interrupted" if interrupted else "finished",
            failure=Failure(process="client", reason="stopped by Ctrl-C") if interrupted else None,
        )
    result = compare(tmp_path, "base", "variant")
    difference = result.differences[0]
    assert difference.pairing.design == "paired" and difference.pairing.seeds == [0, 1, 2, 4, 5]
    assert difference.score.design == "paired" and difference.score.n_a == 5
    seed = difference.pairing.excluded[0]
    assert (seed.seed, seed.arm, seed.cause) == (3, "variant", "interrupted") and "Ctrl-C" in seed.reason
    assert "excluded: seed 3 (variant: episode 4 interrupted: stopped by Ctrl-C)" in difference.score.text
    text = invoke(tmp_path, {}, "compare", "base", "variant").out
    assert "seed 3 (variant: episode 4 interrupted" in " ".join(text.split())
    rows = list(csv.reader(io.StringIO(to_csv(result))))
    assert ["variant", "pairing", "excluded_seed:3:variant:interrupted", "1.0"] in rows
    html = render_comparison(result, [], datetime(2026, 12, 6, tzinfo=UTC))
    assert "seed 3 (variant: episode 4 interrupted" in html
    assert result.model_validate_json(result.model_dump_json()).differences[0].pairing.excluded[0].seed == 3


def test_a_difference_in_reach_with_equal_medians_is_never_no_difference(tmp_path: Path) -> None:
    """Was: medians 10 and 10 with 8/8 against 4/8 reached, worded "no difference"."""
    write_arm(tmp_path, "base")
    write_arm(tmp_path, "variant", agent="random")
    for seed in range(8):
        write_run(tmp_path, "base", seed + 1, seed=seed, steps={"collect_wood": 10})
        write_run(tmp_path, "variant", seed + 1, seed=seed, steps={"collect_wood": 10 if seed % 2 else None})
    line = next(line for line in compare(tmp_path, "base", "variant").differences[0].milestone_steps)
    assert line.medians == [10, 10] and line.reach == ["4/8", "8/8"]
    assert line.verdict == "not resolved" and "(reached 4/8) vs 10 for base (reached 8/8)" in line.text
    assert line.design == "paired", "the same seeds on a seeded world: swaps within seeds"


def _sequential_pair(cwd: Path, looks: list[int]) -> None:
    """Seeds in looks of the given sizes (cumulative), max 12; the variant better on every seed."""
    write_arm(cwd, "base")
    write_arm(cwd, "variant", agent="random")
    for seed in range(looks[-1]):
        look = next(index + 1 for index, size in enumerate(looks) if seed < size)
        record = SequentialLook(look=look, primary="score", max_seeds=12, batch=4, alpha=0.05, comparisons=1)
        write_run(cwd, "base", seed + 1, seed=seed, score=float(seed % 3), sequential=record)
        write_run(cwd, "variant", seed + 1, seed=seed, score=float(seed % 3) + 1 + seed, sequential=record)


def test_an_until_resolved_experiment_reads_the_sequential_verdict_not_the_fixed_n_one(tmp_path: Path) -> None:
    """Was: "distinguishable" from the fixed-n test at 6 seeds of a sequential run its own test never resolved."""
    _sequential_pair(tmp_path, [4, 6])
    score = compare(tmp_path, "base", "variant").differences[0].score
    assert score.p == pytest.approx(2 / 64), "the fixed-n test alone would call it distinguishable"
    assert score.sequential is not None and not score.sequential.rejected and score.verdict == "not resolved"
    assert score.text.startswith("score: variant − base: not resolved by the sequential test")
    assert "fixed-n figures, secondary" in score.text
    assert f"alpha spent {score.sequential.alpha_spent:.4f}" in score.text


def test_a_resolved_until_resolved_experiment_says_so_with_the_alpha_its_looks_spent(tmp_path: Path) -> None:
    _sequential_pair(tmp_path, [4, 8])
    score = compare(tmp_path, "base", "variant").differences[0].score
    assert score.sequential is not None and score.sequential.rejected and score.verdict == "distinguishable"
    assert "by the sequential test (run --until-resolved) at look 2, 8 paired seeds" in score.text
    assert 0 < score.sequential.alpha_spent <= score.sequential.looks[-1].alpha_allowed


def test_an_until_resolved_experiment_on_sim_score_reads_its_verdict_on_that_metric(tmp_path: Path) -> None:
    """Was: the sequential verdict only for `--primary score`; a run stopped by its sim score got the fixed-n one."""
    write_arm(tmp_path, "base")
    write_arm(tmp_path, "variant", agent="random")
    for seed in range(8):
        record = SequentialLook(
            look=1 if seed < 4 else 2, primary="sim_score", max_seeds=12, batch=4, alpha=0.05, comparisons=1
        )
        write_run(tmp_path, "base", seed + 1, seed=seed, score=1.0, sim_score=float(seed % 3), sequential=record)
        write_run(
            tmp_path, "variant", seed + 1, seed=seed, score=1.0, sim_score=float(seed % 3) + 1 + seed, sequential=record
        )
    difference = compare(tmp_path, "base", "variant").differences[0]
    primary = difference.primary
    assert primary is not None and difference.lines()[0] is primary, "the stopping rule's metric comes first"
    assert primary.metric == "sim_score" and primary.estimate == pytest.approx(4.5)
    assert primary.sequential is not None and primary.sequential.rejected and primary.verdict == "distinguishable"
    assert "by the sequential test (run --until-resolved) at look 2, 8 paired seeds" in primary.text
    assert difference.score.sequential is None and difference.score.verdict == "no difference"


def _campaign(cwd: Path, variants: int, seeds: int) -> Path:
    write_arm(cwd, "base")
    lines = ['name = "planned"', f"seeds = {list(range(seeds))}", "", "[baseline]", 'arm = "base"']
    for index in range(variants):
        lines += ["", "[[variants]]", f'name = "variant_{index}"', 'differs_in = ["step_timeout"]']
        lines.append(f"step_timeout = {31 + index}")
    path = cwd / "campaigns" / "planned.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_plan_power_from_a_stated_effect_and_from_a_named_pilot(tmp_path: Path) -> None:
    _campaign(tmp_path, variants=2, seeds=6)
    stated = invoke(tmp_path, {}, "plan", "campaigns/planned.toml", "--power", "--effect", "1", "--spread", "1")
    assert stated.exit_code == 0, stated.out + stated.err
    said = " ".join(stated.out.split())
    # two variants: 6 seeds resolve nothing (2 x 2/64 > 0.05), so no effect is resolvable at the campaign's seeds
    assert "power for 2 variant(s)" in said and "at the campaign's 6 seeds: power 0%" in said
    assert "6 seeds can resolve no effect with 80% power for 2 variant(s)" in said
    _six_seeds(tmp_path, "pilot_base", [10.0, 12.0, 9.0, 11.0, 10.0, 13.0])
    _six_seeds(tmp_path, "pilot_variant", [14.0, 13.0, 12.0, 16.0, 11.0, 15.0], agent="random")
    piloted = invoke(
        tmp_path,
        {},
        "plan",
        "campaigns/planned.toml",
        "--power",
        "--pilot",
        "pilot_base",
        "--pilot",
        "pilot_variant",
        "--json",
    )
    assert piloted.exit_code == 0, piloted.out + piloted.err
    plan = json.loads(piloted.out)
    assert plan["source"] == "pilot: pilot_variant − pilot_base (6 seeds)" and plan["variants"] == 2
    assert plan["seeds_needed"] >= seeds_to_resolve(2) and plan["power_at_planned"] == 0.0
    neither = invoke(tmp_path, {}, "plan", "campaigns/planned.toml", "--power")
    assert neither.exit_code != 0 and "--power needs a pilot or a stated effect and spread" in neither.out + neither.err


def test_plan_power_simulates_the_sequential_stopping_rule_when_asked(tmp_path: Path) -> None:
    """Was: power for fixed-n only; a campaign run `--until-resolved` has boundaries a fixed-n figure ignores."""
    _campaign(tmp_path, variants=2, seeds=6)
    args = ["plan", "campaigns/planned.toml", "--power", "--effect", "1", "--spread", "1", "--until-resolved"]
    done = invoke(tmp_path, {}, *args, "--json")
    assert done.exit_code == 0, done.out + done.err
    run = json.loads(done.out)["sequential"]
    assert run["looks"] == [4, 8, 12] and run["variants"] == 2
    # two variants at alpha 0.025 each: look 8 allows 0.006 of it, below the exact minimum 2/256: nothing stops there
    assert run["stopped_at"] == {"4": 0.0, "8": 0.0, "12": 1.0} and run["expected_seeds"] == 12.0
    assert 0.6 < run["power"] < 0.95 and run["power_every_variant"] <= run["power"]
    shorter = invoke(tmp_path, {}, *args, "--max-seeds", "6", "--batch", "3")
    assert shorter.exit_code == 0, shorter.out + shorter.err
    assert "run --until-resolved (looks at 3, 6 seeds of at most 6)" in " ".join(shorter.out.split())
    alone = invoke(tmp_path, {}, "plan", "campaigns/planned.toml", "--until-resolved")
    assert alone.exit_code == 2 and "needs --power" in " ".join((alone.out + alone.err).split())
    batch = invoke(
        tmp_path, {}, "plan", "campaigns/planned.toml", "--power", "--effect", "1", "--spread", "1", "--batch", "3"
    )
    assert batch.exit_code == 2 and "--batch sets how --until-resolved runs" in " ".join(
        (batch.out + batch.err).split()
    )


def test_an_unpaired_comparison_says_why_in_its_own_words(tmp_path: Path) -> None:
    """Was: only --json said why a comparison was unpaired."""
    write_arm(tmp_path, "base")
    write_arm(tmp_path, "variant", agent="random")
    for index in range(3):
        write_run(tmp_path, "base", index + 1, seed=index, score=1.0, steps={"collect_wood": 10})
        write_run(tmp_path, "variant", index + 1, seed=index + 5, score=0.0, steps={"collect_wood": 20})
    for line in compare(tmp_path, "base", "variant").differences[0].lines():
        assert line.design == "unpaired" and "unpaired: the arms completed different seeds" in line.text, line.text
