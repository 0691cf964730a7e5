"""Issue 46, across tasks: rliable's aggregates (IQM, probability of improvement, performance profiles) over (task ×
seed) normalised scores, pinned against scipy and hand counts; and through `compare` on run reports in every view."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke
from scipy.stats import trim_mean
from test_compare import compare, write_arm, write_run

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.evaluation import CategoryResult, EvaluationResult, SimulatorInfo, TaskMetrics, VideoResult
from mcu_arms.contracts.run_report import TaskScore, read_report, summarise_evaluation
from mcu_arms.report.plot import plot_data, save_plot
from mcu_arms.stats.across_tasks import (
    PROFILE_THRESHOLDS,
    across_tasks,
    interquartile_mean,
    mann_whitney_share,
    performance_profile,
    probability_of_improvement,
    stratified_resample,
)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 12, 13, 40])
def test_the_interquartile_mean_is_scipys_trim_mean_at_a_quarter(n: int) -> None:
    rng = random.Random(n)
    values = [rng.choice([0.0, 0.0, 0.25, 0.5, 1.0, rng.random()]) for _ in range(n)]
    assert interquartile_mean(values) == pytest.approx(trim_mean(values, 0.25))


def test_probability_of_improvement_is_the_hand_count_with_ties_as_half() -> None:
    # task a: arm (1, 0.5) vs baseline (0.5, 0): pairs 1>0.5, 1>0, 0.5=0.5 (½), 0.5>0 -> 3.5 / 4
    # task b: arm (0, 0) vs baseline (0, 1): 0=0 (½) twice, 0<1 twice -> 1 / 4
    arm = {"a": [1.0, 0.5], "b": [0.0, 0.0]}
    baseline = {"a": [0.5, 0.0], "b": [0.0, 1.0]}
    assert mann_whitney_share(arm["a"], baseline["a"]) == 3.5 / 4
    assert mann_whitney_share(arm["b"], baseline["b"]) == 1 / 4
    assert probability_of_improvement(arm, baseline) == (3.5 / 4 + 1 / 4) / 2
    assert probability_of_improvement(baseline, baseline) == 0.5  # an arm against itself: every pair a tie or a swap


def test_a_stratified_resample_never_moves_a_score_to_another_task() -> None:
    tasks = [[0.0, 0.1, 0.2], [10.0, 11.0], [100.0, 101.0, 102.0, 103.0]]
    samples = stratified_resample(tasks, resamples=500)
    assert samples.shape == (500, 9)
    blocks = [samples[:, 0:3], samples[:, 3:5], samples[:, 5:9]]
    for block, scores in zip(blocks, tasks, strict=True):
        assert set(block.ravel().tolist()) == set(scores)  # each task's seeds drawn, and only those
    # resampled with replacement: some row repeats a seed within a task
    assert any(len(set(row)) < len(row) for row in samples[:, 5:9].tolist())


def test_the_performance_profile_is_the_share_strictly_above_each_threshold() -> None:
    values = [0.0, 0.0, 0.5, 1.0]
    shares = dict(zip(PROFILE_THRESHOLDS, performance_profile(values), strict=True))
    assert shares[0.0] == 0.5  # the zeros are not above 0
    assert shares[0.45] == 0.5
    assert shares[0.5] == 0.25  # 0.5 is not above 0.5
    assert shares[1.0] == 0.0
    assert PROFILE_THRESHOLDS[0] == 0.0 and PROFILE_THRESHOLDS[-1] == 1.0


def test_across_tasks_labels_n_and_its_method_and_bands_hold_the_estimate() -> None:
    scripted = {"a": {0: 1.0, 1: 0.5, 2: 1.0}, "b": {0: 0.5, 1: 0.5, 2: 0.0}, "c": {0: 1.0, 1: 1.0, 2: 0.5}}
    random_arm = {"a": {0: 0.0, 1: 0.5, 2: 0.0}, "b": {0: 0.0, 1: 0.0, 2: 0.0}, "c": {0: 0.5, 1: 0.0, 2: 0.0}}
    result = across_tasks({"random": random_arm, "scripted": scripted}, "random")
    assert result.tasks == ["a", "b", "c"] and result.unavailable is None
    best = next(arm for arm in result.arms if arm.arm == "scripted")
    pooled = [value for task in scripted.values() for value in task.values()]
    assert best.iqm == pytest.approx(trim_mean(pooled, 0.25))
    assert best.iqm_interval is not None and best.iqm_interval.low <= best.iqm <= best.iqm_interval.high
    assert "3 tasks × 3 seeds" in best.text and "3 seeds per task" in best.text
    assert best.profile.low is not None and best.profile.high is not None
    assert all(lo <= s <= hi for lo, s, hi in zip(best.profile.low, best.profile.share, best.profile.high, strict=True))
    [improvement] = result.improvement
    assert improvement.arm == "scripted" and improvement.baseline == "random"
    assert improvement.probability > 0.5 and improvement.interval is not None
    assert "3 + 3 seeds per task" in improvement.text
    assert "stratified bootstrap" in result.method and "trim_mean 0.25" in result.method
    again = across_tasks({"random": random_arm, "scripted": scripted}, "random")
    assert again == result  # seeded: the same scores give the same intervals


def test_a_task_an_arm_lacks_is_left_out_and_one_common_task_is_unavailable() -> None:
    result = across_tasks({"x": {"a": {0: 1.0}, "b": {0: 0.5}}, "y": {"a": {0: 0.0}}}, "x")
    assert result.unavailable is not None and "1 task scored in every arm" in result.unavailable
    assert result.arms == [] and any("task b: not scored in y" in line for line in result.excluded)
    one_seed = across_tasks({"x": {"a": {0: 1.0}, "b": {0: 0.5}}}, "x")
    assert one_seed.arms[0].iqm_interval is None and "no interval" in one_seed.arms[0].text


def test_a_run_report_keeps_each_scored_task_and_names_the_unscored(tmp_path: Path) -> None:
    write_arm(tmp_path, "arm", tasks=list(TASKS))
    report = write_run(tmp_path, "arm", 1)

    def metrics(score: float | None, max_score: float) -> TaskMetrics:
        source = "sim" if score is not None else "unscored"
        return TaskMetrics(
            max_score=max_score,
            score=score,
            category="mining_and_collecting",
            scoring_kind="reward",
            scored=score is not None,
            score_source=source,
            video=VideoResult(status="disabled"),
        )

    tasks = {"collect_wood": metrics(4.0, 10.0), "craft_table": metrics(None, 10.0), "mine_stone": metrics(1.5, 3.0)}
    evaluation = EvaluationResult.model_construct(
        results=[CategoryResult.of("mining_and_collecting", tasks, [])],
        simulator=SimulatorInfo(name="embedded", version="test", label="embedded"),
    )
    summarise_evaluation(report, evaluation, "green/evaluation.json")
    assert report.task_scores == {
        "collect_wood": TaskScore(score=4.0, max_score=10.0),
        "mine_stone": TaskScore(score=1.5, max_score=3.0),
    }
    assert report.unscored_tasks == ["craft_table"]
    assert (report.score, report.max_score) == (5.5, 13.0)  # the totals are the scored tasks' sums, as before


# --- through `compare`, on run reports ---------------------------------------------------------------------------

TASKS = ("collect_wood", "craft_table", "mine_stone")


def _write_multi(cwd: Path, name: str, episode: int, seed: int, scores: dict[str, float], **fields: Any) -> None:
    write_run(
        cwd,
        name,
        episode,
        seed=seed,
        task_scores={task: TaskScore(score=score, max_score=10.0) for task, score in scores.items()},
        score=sum(scores.values()),
        max_score=10.0 * len(scores),
        **fields,
    )


@pytest.fixture
def multi(tmp_path: Path) -> Path:
    """random and scripted on 3 tasks × 3 seeds (scripted ahead on every task)."""
    write_arm(tmp_path, "random", agent="random", tasks=list(TASKS))
    write_arm(tmp_path, "scripted", tasks=list(TASKS))
    for seed in range(3):
        _write_multi(
            tmp_path, "random", seed + 1, seed, {"collect_wood": 2.0 + seed, "craft_table": 0.0, "mine_stone": 1.0}
        )
        _write_multi(
            tmp_path, "scripted", seed + 1, seed, {"collect_wood": 9.0, "craft_table": 5.0 + seed, "mine_stone": 4.0}
        )
    return tmp_path


def test_compare_shows_the_aggregates_in_text_json_csv_markdown_and_html(multi: Path) -> None:
    text = invoke(multi, {}, "compare", "random", "scripted")
    assert "across 3 tasks" in text.out
    assert "IQM" in text.out and "3 tasks × 3 seeds" in text.out
    assert "P(scripted > random) = 1.00" in text.out

    data = json.loads(invoke(multi, {}, "compare", "random", "scripted", "--json").out)
    section = data["across_tasks"]
    assert section["tasks"] == sorted(TASKS) or set(section["tasks"]) == set(TASKS)
    iqm = {arm["arm"]: arm["iqm"] for arm in section["arms"]}
    assert iqm["scripted"] == pytest.approx(trim_mean([0.9] * 3 + [0.5, 0.6, 0.7] + [0.4] * 3, 0.25))
    assert section["improvement"][0]["probability"] == 1.0
    assert "stratified bootstrap" in section["method"]

    rows = list(csv.reader(io.StringIO(invoke(multi, {}, "compare", "random", "scripted", "--csv").out)))
    found = {(row[0], row[1], row[2]): float(row[3]) for row in rows[1:]}
    assert found[("scripted", "across_tasks", "iqm")] == pytest.approx(iqm["scripted"])
    assert ("scripted", "across_tasks", "iqm_ci_low") in found
    assert found[("scripted", "across_tasks", "probability_of_improvement")] == 1.0
    assert ("scripted", "across_tasks", "profile:0.5") in found
    assert found[("scripted", "across_tasks:craft_table", "seed:2")] == pytest.approx(0.7)

    exported = multi / "export"
    assert invoke(multi, {}, "compare", "random", "scripted", "--export", str(exported)).exit_code == 0
    tidy = list(csv.DictReader((exported / "tidy.csv").open(encoding="utf-8")))
    [row] = [r for r in tidy if (r["arm"], r["seed"], r["metric"]) == ("scripted", "2", "normalised:craft_table")]
    assert float(row["value"]) == pytest.approx(0.7)

    markdown = invoke(multi, {}, "compare", "random", "scripted", "--markdown").out
    assert "## Across 3 tasks" in markdown and "P(scripted > random)" in markdown

    bundle = multi / "site"
    invoke(multi, {}, "report", "random", "scripted", "--html", str(bundle))
    page = (bundle / "index.html").read_text(encoding="utf-8")
    assert 'id="across-tasks"' in page and "P(scripted &gt; random)" in page and 'id="profile-chart"' in page
    data_js = (bundle / "comparison-data.js").read_text(encoding="utf-8")
    assert '"profiles"' in data_js


def test_the_plot_draws_the_performance_profile_with_its_bands(multi: Path) -> None:
    result = compare(multi, "random", "scripted")
    data = plot_data(result)
    assert [profile.arm for profile in data.profiles] == ["random", "scripted"]
    assert data.profiles[1].low is not None
    target = multi / "figure.png"
    save_plot(result, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_task_shows_nothing_new_and_old_reports_say_why(tmp_path: Path) -> None:
    write_arm(tmp_path, "random", agent="random", tasks=["collect_wood"])
    write_arm(tmp_path, "scripted", tasks=["collect_wood"])
    for seed in range(2):
        _write_multi(tmp_path, "random", seed + 1, seed, {"collect_wood": 1.0})
        _write_multi(tmp_path, "scripted", seed + 1, seed, {"collect_wood": 5.0})
    assert compare(tmp_path, "random", "scripted").across_tasks is None
    text = invoke(tmp_path, {}, "compare", "random", "scripted").out
    assert "across" not in text.lower() and "IQM" not in text
    assert "across_tasks" not in invoke(tmp_path, {}, "compare", "random", "scripted", "--csv").out

    write_arm(tmp_path, "old", tasks=list(TASKS))  # reports written before per-task scores were recorded
    write_run(tmp_path, "old", 1, seed=0)
    write_run(tmp_path, "old", 2, seed=1)
    section = compare(tmp_path, "old").across_tasks
    assert section is not None and section.unavailable is not None
    assert "old episode 1" in section.unavailable and "rerun" in section.unavailable
    assert "not available" in invoke(tmp_path, {}, "compare", "old").out


def test_the_html_page_draws_each_arms_profile_with_its_band_in_chromium(multi: Path) -> None:
    from browser import chromium_missing, start_browser

    if chromium_missing():
        pytest.skip(chromium_missing() or "")
    bundle = multi / "site"
    assert invoke(multi, {}, "report", "random", "scripted", "--html", str(bundle)).exit_code == 0
    with start_browser(window=(1200, 900)) as browser:
        browser.open((bundle / "index.html").as_uri(), timeout=120)
        browser.wait_for("window.VIEWER_READY === true", timeout=60)
        traces = browser.run_js(
            "document.getElementById('profile-chart').data.map(t => ({name: t.name || null, y: t.y, fill: t.fill}))"
        )
        assert browser.errors() == [] and browser.external_requests() == []
    result = compare(multi, "random", "scripted")
    assert result.across_tasks is not None
    named = [trace for trace in traces if trace["name"]]
    assert [trace["name"] for trace in named] == ["random", "scripted"]
    assert [trace["y"] for trace in named] == [arm.profile.share for arm in result.across_tasks.arms]
    assert sum(trace.get("fill") == "tonexty" for trace in traces) == 2  # a band under each


def test_a_negative_task_score_read_from_disk_is_a_one_line_error_naming_its_key(tmp_path: Path) -> None:
    write_arm(tmp_path, "arm", tasks=list(TASKS))
    write_run(tmp_path, "arm", 1, task_scores={"collect_wood": TaskScore(score=-1.0, max_score=10.0)})
    path = tmp_path / "output" / "arm" / "episode_001" / "result.json"
    with pytest.raises(UserError) as caught:
        read_report(path)
    assert caught.value.key == "task_scores.collect_wood.score" and "negative" in caught.value.message


def test_a_tracker_export_carries_each_task_score_and_the_aggregates(multi: Path) -> None:
    from mcu_arms.report.tracking import compared, comparison_run, episode_metrics

    result = compare(multi, "random", "scripted")
    assert result.across_tasks is not None
    parent = {point.key: point.value for point in comparison_run(compared(result), "test").metrics}
    assert parent["iqm/scripted"] == result.across_tasks.arms[1].iqm
    assert parent["probability_of_improvement/scripted"] == 1.0 and "probability_of_improvement/random" not in parent
    report = read_report(multi / "output" / "scripted" / "episode_003" / "result.json")
    episode = {point.key: point.value for point in episode_metrics(report)}
    assert episode["task_score/craft_table"] == 7.0 and episode["task_score/collect_wood"] == 9.0
