"""One analysis behind every view: a fixture campaign rendered by each (text, JSON, CSV, markdown, the HTML pages in
a real headless Chromium, the export, `mcu_arms.results`), each output parsed back, every number and verdict checked
against the Analysis, and n, the excluded episodes and the chosen experiments shown everywhere.

The campaign (reports written with the RunReport model, as `run` writes them): scripted_arm and random_arm, seeds
0-3; random_arm seed 1 was interrupted and run again, scripted_arm seed 2 failed for infrastructure reasons and was
retried; scripted_arm also has an older experiment of the campaign (run with --steps 200), and random_arm one episode
run on its own, outside the campaign.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke, make_environment

from mcu_arms.arms.plan import resolve_settings
from mcu_arms.arms.spec import ArmSpec, load_arm
from mcu_arms.contracts.run_report import Failure, MilestoneRecord, Provenance, RunReport
from mcu_arms.contracts.settings import CampaignTag, fingerprint
from mcu_arms.layout import RunDir
from mcu_arms.report.analysis import Analysis, analyse, short
from mcu_arms.report.compare import summary_text

TASK = "mine_diamond_from_scratch"
MILESTONES = ("collect_wood", "place_table", "make_wood_pickaxe")
CAMPAIGN = """name = "agents"
seeds = [0, 1, 2, 3]

[baseline]
arm = "scripted_arm"

[[variants]]
name = "random_arm"
differs_in = ["agent"]
agent = "random"
"""
ARM = """agent = "scripted"
task = "mine_diamond_from_scratch"
simulator = "embedded"
seed = 0
steps = 400
step_timeout = 30

[ports]
green = "auto"
purple = "auto"
"""
# (arm, seed, status, milestone steps, steps override): in the order they ran
EPISODES: list[tuple[str, int, str, dict[str, int], int | None, bool]] = [
    ("scripted_arm", 0, "finished", {"collect_wood": 30, "place_table": 90}, 200, True),  # the older experiment
    ("scripted_arm", 1, "finished", {"collect_wood": 25}, 200, True),
    ("random_arm", 0, "finished", {"collect_wood": 150}, None, False),  # run on its own, not for the campaign
    ("scripted_arm", 0, "finished", {"collect_wood": 12, "place_table": 40, "make_wood_pickaxe": 90}, None, True),
    ("scripted_arm", 1, "finished", {"collect_wood": 14, "place_table": 52, "make_wood_pickaxe": 120}, None, True),
    ("scripted_arm", 2, "failed", {"collect_wood": 11}, None, True),
    ("scripted_arm", 2, "finished", {"collect_wood": 10, "place_table": 44, "make_wood_pickaxe": 100}, None, True),
    ("scripted_arm", 3, "finished", {"collect_wood": 16, "place_table": 61, "make_wood_pickaxe": 140}, None, True),
    ("random_arm", 0, "finished", {"collect_wood": 160}, None, True),
    ("random_arm", 1, "interrupted", {"collect_wood": 90, "place_table": 300}, None, True),
    ("random_arm", 1, "finished", {}, None, True),
    ("random_arm", 2, "finished", {"collect_wood": 210}, None, True),
    ("random_arm", 3, "finished", {"collect_wood": 120, "place_table": 380}, None, True),
]


def _write(
    project: Path,
    arm: str,
    episode: int,
    seed: int,
    status: str,
    steps: dict[str, int],
    override: int | None,
    campaign: bool,
) -> None:
    changes = {
        "name": arm,
        "seed": seed,
        **({"agent": "random"} if arm == "random_arm" else {}),
        **({"steps": override} if override else {}),
    }
    spec = ArmSpec.model_validate(
        {**load_arm(project / "arms" / "scripted_arm.toml").model_dump(exclude_unset=True), **changes}
    )
    settings, compaction = resolve_settings(spec, [])
    finished = status == "finished"
    reached = len(steps) if finished else None
    report = RunReport(
        status=status,
        arm=arm,
        episode=episode,
        source="campaigns/agents.toml",
        fingerprint=fingerprint(settings),
        settings=settings,
        overrides={"steps": override} if override else {},
        compaction_limit=compaction.limit,
        provenance=Provenance(
            mcu_arms_version="0.1.0",
            git_sha=None,
            git_dirty=None,
            python=sys.version.split()[0],
            packages={},
            host="test",
            platform="test",
        ),
        started_at=f"2026-11-{10 + episode:02d}T12:00:00+00:00",
        score=float(reached) if finished else None,
        sim_score=float(reached) if finished else None,
        max_score=5.0,
        steps_run=settings.steps if finished else 120,
        wall_s=100.0 + 10 * seed,
        noops={"timeout": seed},
        infrastructure={"timeout": seed},
        milestones=[MilestoneRecord(task=TASK, identity=m, step=steps.get(m)) for m in MILESTONES],
        failure=None
        if finished
        else Failure(
            process="green" if status == "failed" else None,
            kind="infrastructure" if status == "failed" else "stopped",
            reason="green exited with code -9" if status == "failed" else "interrupted by SIGINT",
        ),
        campaign=CampaignTag(name="agents", run=f"run-{episode}") if campaign else None,
    )
    run_dir = RunDir(project / "output" / arm / f"episode_{episode:03d}")
    run_dir.path.mkdir(parents=True)
    run_dir.write_report(report)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("agreement") / "project"
    (project / "arms").mkdir(parents=True)
    (project / "campaigns").mkdir()
    (project / "arms" / "scripted_arm.toml").write_text(ARM)
    (project / "campaigns" / "agents.toml").write_text(CAMPAIGN)
    numbers = {"scripted_arm": 0, "random_arm": 0}
    for arm, seed, status, steps, override, campaign in EPISODES:
        numbers[arm] += 1
        _write(project, arm, numbers[arm], seed, status, steps, override, campaign)
    return project


@pytest.fixture(scope="module")
def analysis(project: Path) -> Analysis:
    env, _, _ = make_environment(project, {})
    return analyse(["campaigns/agents.toml"], env)


def _close(shown: str, value: float | None, digits: int = 2) -> bool:
    return value is not None and abs(float(shown) - value) <= 0.5 * 10**-digits + 1e-9


def test_the_fixture_is_analysed_as_designed(analysis: Analysis) -> None:
    scripted, random_ = analysis.arms
    assert [ref.seed for ref in scripted.used] == [0, 1, 2, 3] and [ref.seed for ref in random_.used] == [0, 1, 2, 3]
    assert {(e.episode, e.reason) for e in scripted.excluded} == {
        (1, "other experiment"),
        (2, "other experiment"),
        (5, "failed"),
    }
    assert {(e.episode, e.reason) for e in random_.excluded} == {(1, "other campaign"), (3, "interrupted")}
    assert len(scripted.experiment.candidates) == 2 and scripted.experiment.candidates[1].differs == ["steps"]
    assert "differs from the other arms only in agent" in scripted.experiment.why
    assert random_.milestones[f"{TASK}/place_table"].text() == "1/4", "the interrupted episode's 300 is not in k/n"
    reaching = [p.step for p in random_.time_to_milestone[f"{TASK}/place_table"].points if p.reached]
    assert reaching == [380], "nor in its Kaplan–Meier curve"
    assert analysis.exit_code == 0 and analysis.verdict.text == "comparable: differs only in agent"
    assert analysis.arms[1].milestones[f"{TASK}/place_table"].reached == 1
    place_table = next(row for row in analysis.milestones if row.identity == "place_table")
    # Kaplan–Meier, censored; S = ½ from step 44 to the next reach at 52: R survival's midpoint (issue 46)
    assert [cell.time_to_event.median for cell in place_table.cells] == [48, None], "Kaplan–Meier, censored"
    score = analysis.differences[0].score
    assert score.design == "paired" and score.n_a == score.n_b == 4 and score.p == 2 / 16, "all four seeds worse"
    assert score.p_adjusted is None, "the only score test: alone in its family"
    steps = analysis.differences[0].milestone_steps
    assert all(line.p_adjusted >= line.p for line in steps) and "the 3 steps-to-milestone test(s)" in analysis.family
    assert score.verdict == "not resolved" and "about 6 paired seeds would resolve" in score.text


@pytest.mark.slow
def test_text_json_csv_and_markdown_agree(project: Path, analysis: Analysis) -> None:
    shown = invoke(project, {}, "compare", "campaigns/agents.toml", "--json")
    assert shown.exit_code == 0 and Analysis.model_validate_json(shown.out) == analysis, "--json is the object itself"

    text = invoke(project, {}, "compare", "campaigns/agents.toml").out
    markdown = invoke(project, {}, "compare", "campaigns/agents.toml", "--markdown").out
    for rendered in (text, markdown):
        assert analysis.verdict.text in rendered
        for difference in analysis.differences:
            for line in difference.lines():
                assert line.text in " ".join(rendered.split()), line.text
        for arm in analysis.arms:
            assert short(arm.experiment.fingerprint or "") in rendered
            assert f"n = {arm.n} (seeds {', '.join(map(str, arm.seeds))})" in rendered
            assert summary_text(arm.metrics["score"]) in rendered
            for each in arm.excluded:
                assert f"{arm.arm} episode {each.episode} (seed {each.seed}, {each.status}): {each.reason}" in rendered
    markdown_rows = {cells[0]: cells[1:] for cells in _markdown_rows(markdown)}
    assert markdown_rows["score"] == [summary_text(arm.metrics["score"]) for arm in analysis.arms]
    assert markdown_rows["excluded"] == [str(len(arm.excluded)) for arm in analysis.arms]

    table = list(csv.DictReader(io.StringIO(invoke(project, {}, "compare", "campaigns/agents.toml", "--csv").out)))
    _check_numbers(table, analysis)


def _markdown_rows(markdown: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        for line in markdown.splitlines()
        if line.startswith("| ")
    ]


def _check_numbers(rows: list[dict[str, str]], analysis: Analysis) -> None:
    """The tidy numbers (--csv, the export's numbers.csv) against the analysis, statistic by statistic."""
    value = {(row["arm"], row["metric"], row["statistic"]): float(row["value"]) for row in rows}
    for arm in analysis.arms:
        assert value[(arm.arm, "episodes", "used")] == arm.n
        for each in arm.excluded:
            assert value[(arm.arm, "episodes", f"excluded:{each.reason}:episode:{each.episode}")] == 1
        assert value[(arm.arm, f"experiment:{arm.experiment.fingerprint}", "n")] == arm.n
        for name, summary in arm.metrics.items():
            assert value[(arm.arm, name, "mean")] == summary.mean and value[(arm.arm, name, "n")] == summary.n
            if summary.ci is not None:
                assert (value[(arm.arm, name, "ci_low")], value[(arm.arm, name, "ci_high")]) == (
                    summary.ci.low,
                    summary.ci.high,
                )
            assert [value[(arm.arm, name, f"episode:{ref.episode}")] for ref in arm.used] == summary.values
    for difference in analysis.differences:
        for line in difference.lines():
            key = (line.arm, f"difference:{line.metric}")
            assert value.get((*key, "estimate")) == line.estimate and value.get((*key, "p")) == line.p
            assert value.get((*key, "p_adjusted")) == line.p_adjusted
            assert value[(*key, f"verdict:{line.verdict}")] == 1
            if line.interval is not None:
                assert (value[(*key, "ci_low")], value[(*key, "ci_high")]) == (line.interval.low, line.interval.high)
    assert value[("", "verdict", "exit_code")] == analysis.exit_code


def test_the_export_and_the_notebook_tables_agree(project: Path, analysis: Analysis) -> None:
    exported = invoke(project, {}, "compare", "campaigns/agents.toml", "--export", "export")
    assert exported.exit_code == 0, exported.err
    assert Analysis.model_validate_json((project / "export" / "analysis.json").read_text()) == analysis
    with (project / "export" / "numbers.csv").open() as handle:
        _check_numbers(list(csv.DictReader(handle)), analysis)
    with (project / "export" / "tidy.csv").open() as handle:
        tidy = list(csv.DictReader(handle))
    for arm in analysis.arms:
        scores = [float(row["value"]) for row in tidy if row["arm"] == arm.arm and row["metric"] == "score"]
        assert scores == arm.metrics["score"].values
        episodes = {int(row["episode"]) for row in tidy if row["arm"] == arm.arm}
        assert episodes == {ref.episode for ref in arm.used}, "no excluded episode in the export"

    from mcu_arms.report.plot import plot_data
    from mcu_arms.results import analysis as notebook_analysis
    from mcu_arms.results import numbers

    assert notebook_analysis(["campaigns/agents.toml"], project=project) == analysis
    frame = numbers(["campaigns/agents.toml"], project=project)
    _check_numbers([{key: str(value) for key, value in row.items()} for row in frame.to_dict("records")], analysis)
    plotted = plot_data(analysis)
    assert [arm.replicates for arm in plotted.arms] == [arm.n for arm in analysis.arms]


def test_the_plot_draws_the_analysis_kaplan_meier_curves_and_bands(analysis: Analysis) -> None:
    """`compare --plot`: per milestone, each arm's Kaplan–Meier curve of reaching it and its band in the line's
    colour, read back from the matplotlib figure — the very numbers of the Analysis, nothing recomputed."""
    from matplotlib.colors import to_rgba

    from mcu_arms.report.plot import build_figure, plot_data

    data = plot_data(analysis)
    figure = build_figure(data)
    keys = [f"{row.task}/{row.identity}" for row in analysis.milestones]
    assert [f"{panel.task}/{panel.identity}" for panel in data.milestones] == keys
    checked = 0
    for axes, panel in zip(figure.axes[1:], data.milestones, strict=False):  # the score's panel first, spares last
        lines, bands = axes.get_lines(), axes.collections
        assert len(lines) == len(panel.curves) == len(analysis.arms)
        for line, band, arm in zip(lines, bands, analysis.arms, strict=True):
            survival = arm.time_to_milestone[f"{panel.task}/{panel.identity}"]
            assert list(line.get_xdata()) == [0, *(point.step for point in survival.points)]
            assert list(line.get_ydata()) == pytest.approx([0, *(1 - p.not_reached for p in survival.points)])
            assert line.get_drawstyle() == "steps-post"
            edges = band.get_paths()[0].vertices[:, 1]
            assert min(edges) == pytest.approx(0) and max(edges) == pytest.approx(
                max(1 - p.band.low for p in survival.points)
            )
            assert to_rgba(band.get_facecolor()[0])[:3] == to_rgba(line.get_color())[:3], "band in the line's colour"
            checked += 1
    assert checked == len(keys) * len(analysis.arms)


@pytest.mark.slow
def test_the_html_pages_in_chromium_agree(project: Path, analysis: Analysis, tmp_path: Path) -> None:
    from browser import chromium_missing, start_browser

    if chromium_missing():
        pytest.skip(chromium_missing() or "")
    bundle = tmp_path / "bundle"
    written = invoke(project, {}, "report", "--html", str(bundle), "campaigns/agents.toml")
    assert written.exit_code == 0, written.err
    with start_browser(window=(1400, 1000)) as browser:
        browser.open((bundle / "index.html").as_uri(), timeout=120)  # plotly.js is parsed on a shared, loaded host
        browser.wait_for("window.VIEWER_READY === true", timeout=60)
        page: dict[str, Any] = browser.run_js("""(() => ({
            verdict: document.querySelector('#verdict strong').textContent,
            differences: [...document.querySelectorAll('#differences tr.difference')].map(r => ({
                arm: r.dataset.arm, metric: r.dataset.metric, n: r.querySelector('.n').textContent,
                estimate: r.querySelector('.estimate').textContent, interval: r.querySelector('.interval').textContent,
                p: r.querySelector('.p').textContent, verdict: r.querySelector('.verdict').textContent})),
            results: Object.fromEntries([...document.querySelectorAll('#results tr[data-row]')].map(
                r => [r.dataset.row, [...r.querySelectorAll('td')].map(td => td.textContent)])),
            excluded: [...document.querySelectorAll('#excluded li')].map(li => li.textContent),
            experiments: [...document.querySelectorAll('#arms td.experiment')].map(td => td.textContent),
            text: document.body.innerText,
            chart: MCU_COMPARISON.series.map(s => s.replicates),
            kmKey: document.getElementById('km-milestone').value,
            km: document.getElementById('km-chart').data.filter(t => t.name).map(t => ({name: t.name, x: t.x, y: t.y})),
            colours: document.getElementById('milestone-chart').data.map(t => [t.line.color, t.fillcolor || null]),
        }))()""")
        assert browser.external_requests() == [] and browser.errors() == []
    assert page["verdict"] == analysis.verdict.text
    assert "one episode per arm (n = 1)" not in page["text"]
    lines = [line for difference in analysis.differences for line in difference.lines()]
    assert len(page["differences"]) == len(lines)
    for row, line in zip(page["differences"], lines, strict=True):
        assert (row["arm"], row["metric"], row["verdict"]) == (line.arm, line.metric, line.verdict)
        assert row["n"] == f"{line.n_a} + {line.n_b}"
        assert row["estimate"] == "" if line.estimate is None else _close(row["estimate"], line.estimate)
        assert row["p"] == ("" if line.p is None else f"{line.p:.3f}")
        if line.interval is not None:
            low, high = re.findall(r"-?\d+\.\d+", row["interval"])
            assert _close(low, line.interval.low) and _close(high, line.interval.high)
    assert page["results"]["score"] == [summary_text(arm.metrics["score"]) for arm in analysis.arms]
    assert page["results"]["replicates"] == [
        f"n = {arm.n} (seeds {', '.join(map(str, arm.seeds))})" for arm in analysis.arms
    ]
    assert len(page["excluded"]) == sum(len(arm.excluded) for arm in analysis.arms)
    assert all(
        short(arm.experiment.fingerprint or "") in shown
        for arm, shown in zip(analysis.arms, page["experiments"], strict=True)
    )
    assert page["chart"] == [arm.n for arm in analysis.arms]
    bands = [fill for _, fill in page["colours"] if fill]  # each arm's band in its own line's colour, translucent
    lines_drawn = [colour for colour, fill in page["colours"] if fill is None][1::2]  # upper edge, median: the median
    assert len(bands) == len(lines_drawn) == 2 and len(set(lines_drawn)) == 2
    for band, line in zip(bands, lines_drawn, strict=True):
        assert band.startswith("rgba(") and band.split("(")[1].split(",")[:3] == [
            str(int(line[i : i + 2], 16)) if i == 1 else f" {int(line[i : i + 2], 16)}" for i in (1, 3, 5)
        ], (band, line)
    row = next(row for row in analysis.milestones if f"{row.task}/{row.identity}" == page["kmKey"])
    curves = [
        (arm, cell.time_to_event) for arm, cell in zip(analysis.arms, row.cells, strict=True) if cell.time_to_event
    ]
    assert [trace["name"].split(" ")[0] for trace in page["km"]] == [arm.arm for arm, _ in curves]
    for trace, (_, survival) in zip(page["km"], curves, strict=True):
        assert trace["x"] == [0, *(point.step for point in survival.points)]
        assert trace["y"] == pytest.approx([0, *(1 - point.not_reached for point in survival.points)])
