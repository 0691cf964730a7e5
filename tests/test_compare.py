"""`mcu-arms compare`: verdicts and exit codes, each table, flags, JSON/CSV round trips, the plot, user errors.

Reports are made by hand with the RunReport model (the unit `run` writes), in a temporary project dir.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke, make_environment

from mcu_arms.arms.plan import resolve_settings
from mcu_arms.arms.spec import load_arm
from mcu_arms.contracts.agent_report import AgentSummary
from mcu_arms.contracts.run_report import Failure, MilestoneRecord, Provenance, RunReport
from mcu_arms.contracts.settings import fingerprint
from mcu_arms.layout import RunDir
from mcu_arms.report.analysis import Analysis, analyse
from mcu_arms.report.compare import cell_text

EMBEDDED_LABEL = "embedded (Crafter analogue of MCU)"
MILESTONES = ("collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "collect_diamond")

BASE_ARM = {
    "agent": "scripted",
    "task": "mine_diamond_from_scratch",
    "simulator": "embedded",
    "seed": 0,
    "steps": 400,
    "step_timeout": 30,
}


def write_arm(cwd: Path, name: str, **changes: Any) -> Path:
    fields = {**BASE_ARM, **changes}
    lines = [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    lines += ["", "[ports]", 'green = "auto"', 'purple = "auto"']
    path = cwd / "arms" / f"{name}.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_run(
    cwd: Path,
    name: str,
    episode: int = 1,
    *,
    steps: dict[str, int | None] | None = None,
    unavailable: tuple[str, ...] = (),
    status: str = "finished",
    settings_steps: int | None = None,
    seed: int | None = None,
    **fields: Any,
) -> RunReport:
    """A run report for arms/NAME.toml as `run` writes it, with milestone steps given by identity (`settings_steps`:
    as run with --steps N)."""
    spec = load_arm(cwd / "arms" / f"{name}.toml")
    if settings_steps is not None:
        spec = spec.model_copy(update={"steps": settings_steps})
    if seed is not None:
        spec = spec.model_copy(update={"seed": seed})
    settings, compaction = resolve_settings(spec, [])
    episode_dir = cwd / "output" / name / f"episode_{episode:03d}"
    episode_dir.mkdir(parents=True)
    steps = steps or {}
    milestones = [
        MilestoneRecord(
            task="mine_diamond_from_scratch",
            identity=identity,
            step=None if identity in unavailable else steps.get(identity),
            available=identity not in unavailable,
        )
        for identity in MILESTONES
    ]
    defaults: dict[str, Any] = {
        "score": float(sum(1 for s in steps.values() if s is not None)),
        "sim_score": float(sum(1 for s in steps.values() if s is not None)),
        "max_score": float(len(MILESTONES)),
        "steps_run": settings.steps,
        "wall_s": 120.0,
        "noops": {"timeout": 2, "bad_action": 1},
        "simulator_label": EMBEDDED_LABEL if settings.simulator == "embedded" else "MineStudio 1.1.6",
        "logs": {role: f"logs/{role}.log" for role in ("green", "purple", "client")},
    }
    report = RunReport(
        status=status,
        arm=name,
        episode=episode,
        source=str(cwd / "arms" / f"{name}.toml"),
        fingerprint=fingerprint(settings),
        settings=settings,
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
        started_at="2026-11-30T12:00:00+00:00",
        milestones=milestones,
        **{**defaults, **fields},
    )
    RunDir(episode_dir).write_report(report)
    return report


def compare(cwd: Path, *items: str, **options: Any) -> Analysis:
    env, _, _ = make_environment(cwd, {})
    return analyse(list(items), env, **options)


@pytest.fixture()
def pair(tmp_path: Path) -> Path:
    """scripted vs random: differ only in agent; scripted reaches the first three milestones earlier."""
    write_arm(tmp_path, "scripted_arm")
    write_arm(tmp_path, "random_arm", agent="random")
    write_run(tmp_path, "scripted_arm", steps={"collect_wood": 12, "place_table": 40, "make_wood_pickaxe": 90})
    write_run(
        tmp_path, "random_arm", steps={"collect_wood": 150, "place_table": None}, unavailable=("collect_diamond",)
    )
    return tmp_path


def _row(out: str, label: str) -> list[str]:
    """The cells of the console table row starting with `label`."""
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip().split("│")]
        if len(cells) > 2 and cells[1] == label:
            return cells[2:-1]
    raise AssertionError(f"no row {label!r} in:\n{out}")


def test_comparable_pair_verdict_settings_results_and_exit_code(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm")
    assert outcome.exit_code == 0, outcome.err
    assert "comparable: differs only in agent" in outcome.out
    assert "NOT comparable" not in outcome.out
    assert _row(outcome.out, "agent") == ["scripted", "random"]
    with pytest.raises(AssertionError, match="no row 'seed'"):
        _row(outcome.out, "seed")
    assert _row(outcome.out, "status") == ["finished", "finished"]
    assert _row(outcome.out, "score") == ["3", "1"]
    assert _row(outcome.out, "steps run") == ["400", "400"]
    assert _row(outcome.out, "steps/min") == ["200", "200"]
    assert _row(outcome.out, "noops by cause") == ["bad_action=1 timeout=2"] * 2
    with pytest.raises(AssertionError, match="no row 'compaction limit'"):
        _row(outcome.out, "compaction limit")  # codex's: neither agent has one


def test_milestone_matrix_steps_deltas_and_markers(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm")
    assert "milestones of mine_diamond_from_scratch: step reached (delta vs baseline)" in outcome.out
    assert _row(outcome.out, "collect_wood") == ["12", "150 (+138)"]
    assert _row(outcome.out, "place_table") == ["40", "—"]
    assert _row(outcome.out, "collect_diamond") == ["—", "n/a"]
    matrix = outcome.out.split("milestones of")[1].split("excluded episodes")[0]
    rows = [line.split("│")[1].strip() for line in matrix.splitlines() if line.startswith("│")]
    assert rows == list(MILESTONES), "rows keep task order"

    against_random = compare(pair, "scripted_arm", "random_arm", baseline="random_arm")
    wood = against_random.milestones[0]
    assert [cell.delta for cell in wood.cells] == [-138, 0]
    assert against_random.baseline == "random_arm"


def test_not_comparable_lists_every_difference_and_exits_1(tmp_path: Path) -> None:
    write_arm(tmp_path, "a")
    write_arm(tmp_path, "b", agent="random", step_timeout=60, seed=3)
    outcome = invoke(tmp_path, {}, "compare", "arms/a.toml", "arms/b.toml")
    assert outcome.exit_code == 1
    assert "NOT comparable: differs in agent, step_timeout" in outcome.out, "the seed is the replicate axis"
    assert _row(outcome.out, "status") == ["no run", "no run"]


def test_identical_settings_exit_0_once_both_ran(tmp_path: Path) -> None:
    write_arm(tmp_path, "a")
    write_arm(tmp_path, "b")
    never_ran = compare(tmp_path, "a", "b")
    assert never_ran.verdict.missing == ["a", "b"] and never_ran.exit_code == 1, "an arm that never ran is never 0"
    write_run(tmp_path, "a")
    write_run(tmp_path, "b")
    result = compare(tmp_path, "a", "b")
    assert result.verdict.identical and result.verdict.text == "identical settings"
    assert result.settings == []
    assert result.exit_code == 0
    assert invoke(tmp_path, {}, "compare", "a", "b").exit_code == 0


def test_all_shows_every_setting_but_verdict_ignores_noise(pair: Path) -> None:
    result = compare(pair, "scripted_arm", "random_arm", show_all=True)
    keys = [row.key for row in result.settings]
    assert {"agent", "seed", "steps", "cuda_device"} <= set(keys)
    assert [row.key for row in result.settings if row.differs] == ["agent"]
    assert next(row for row in result.settings if row.key == "cuda_device").ignored


def test_settings_come_from_the_report_in_force(tmp_path: Path) -> None:
    """A run made with --steps 40 compares as 40 steps even though the arm file says 400; the edit is flagged."""
    write_arm(tmp_path, "a", steps=40)
    write_arm(tmp_path, "b", agent="random")
    write_run(tmp_path, "a", overrides={})
    write_arm(tmp_path, "a")  # edited after the run
    result = compare(tmp_path, "a", "b")
    assert result.verdict.differing == ["agent", "steps"]
    assert result.arms[0].settings.steps == 40 and result.arms[0].settings_from == "report"
    assert result.arms[1].settings_from == "arm file"
    assert any(f.kind == "arm_file_changed" and f.arm == "a" for f in result.flags)
    assert any(f.kind == "no_run" and f.arm == "b" for f in result.flags)


def test_missing_purple_report_is_unknown_not_zero(tmp_path: Path) -> None:
    write_arm(tmp_path, "wm", agent="worldmodel", simulator="minestudio", session_turns=3, compact=True)
    write_arm(tmp_path, "wm_plain", agent="worldmodel", simulator="minestudio", session_turns=3)
    write_run(
        tmp_path,
        "wm",
        agent=AgentSummary(
            kind="worldmodel", report_file="worldmodel_report.json", failed_turns=4, compactions=2, overflow_resets=0
        ),
    )
    write_run(tmp_path, "wm_plain")
    outcome = invoke(tmp_path, {}, "compare", "wm", "wm_plain")
    assert outcome.exit_code == 0
    assert "comparable: differs only in compact\n" in outcome.out
    assert _row(outcome.out, "compact_limit (follows compact)") == ["206400", "516000"]
    assert _row(outcome.out, "failed turns") == ["4 (1.0% of steps)", "no purple report"]
    assert _row(outcome.out, "compactions") == ["2", "no purple report"]
    assert _row(outcome.out, "overflow resets") == ["0", "no purple report"]
    result = compare(tmp_path, "wm", "wm_plain")
    assert result.arms[1].latest.purple_report is False and result.arms[1].latest.failed_turns is None
    assert result.arms[0].compaction_limit == 206400


def test_a_default_compaction_limit_moves_with_the_context_window_as_one_change(tmp_path: Path) -> None:
    write_arm(tmp_path, "wide", agent="worldmodel", simulator="minestudio")
    write_arm(tmp_path, "narrow", agent="worldmodel", simulator="minestudio", context_window=128000)
    result = compare(tmp_path, "wide", "narrow")
    assert result.verdict.settings_text == "comparable: differs only in context_window"
    limit = next(row for row in result.settings if row.key == "compact_limit")
    assert limit.values == [516000, 256000] and limit.follows == "context_window"
    write_arm(
        tmp_path, "narrow", agent="worldmodel", simulator="minestudio", context_window=128000, compact_limit=600000
    )
    assert compare(tmp_path, "wide", "narrow").verdict.differing == ["compact_limit", "context_window"]


def test_rows_of_counters_no_compared_agent_reports_are_left_out(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm")
    for label in ("failed turns", "compactions", "overflow resets", "decisions", "compaction limit"):
        with pytest.raises(AssertionError, match="no row"):
            _row(outcome.out, label)
    assert "n/a" not in outcome.out.split("one episode per arm", 1)[1]
    assert "does not report it" not in outcome.out, "no legend without a cell that needs it"
    markdown = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--markdown").out
    assert "| failed turns |" not in markdown and "| compaction limit |" not in markdown


def test_compaction_limit_reported_by_the_purple_wins_and_is_flagged(tmp_path: Path) -> None:
    write_arm(tmp_path, "wm", agent="worldmodel", simulator="minestudio")
    write_run(
        tmp_path,
        "wm",
        agent=AgentSummary(
            kind="worldmodel", report_file="worldmodel_report.json", compaction_limit=1000, failed_turns=2
        ),
    )
    result = compare(tmp_path, "wm")
    assert result.arms[0].compaction_limit == 1000
    assert result.arms[0].latest.failed_turns == 2
    assert any(f.kind == "compaction_limit_mismatch" for f in result.flags)


def test_failed_arm_stays_with_logs_and_reason(pair: Path) -> None:
    write_run(
        pair,
        "random_arm",
        episode=2,
        status="failed",
        failure=Failure(process="purple", reason="purple exited with code 1 before its card was served"),
        steps_run=None,
        score=None,
    )
    latest_finished = compare(pair, "scripted_arm", "random_arm")
    assert [ref.episode for ref in latest_finished.arms[1].used] == [1]
    (left_out,) = latest_finished.arms[1].excluded
    assert (left_out.episode, left_out.reason) == (2, "failed") and "before its card" in left_out.detail

    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--run", "2")
    assert outcome.exit_code == 2
    assert "arm 'scripted_arm' has no run episode_002" in outcome.err and "allowed: 1" in outcome.err

    write_arm(pair, "broken")
    write_run(
        pair,
        "broken",
        status="failed",
        failure=Failure(process="green", reason="green port busy"),
        steps_run=None,
        noops={},
    )
    outcome = invoke(pair, {}, "compare", "scripted_arm", "broken")
    assert outcome.exit_code == 3, "no finished episode, for infrastructure reasons"
    assert _row(outcome.out, "status") == ["finished", "failed"]
    assert "NO RESULT for broken" in outcome.out
    assert "broken failed (green): green port busy" in outcome.out
    assert str(pair / "output/broken/episode_001/logs/purple.log") in outcome.out
    assert _row(outcome.out, "noops") == ["3", ""]


def test_arm_that_never_ran_or_is_still_running(pair: Path) -> None:
    write_arm(pair, "fresh", seed=5)
    write_arm(pair, "live")
    write_run(pair, "live", status="started", steps_run=None, score=None, wall_s=None, noops={})
    result = compare(pair, "scripted_arm", "fresh", "live")
    assert [arm.status for arm in result.arms] == ["finished", "no run", "started"]
    assert [cell_text(cell) for cell in result.milestones[0].cells] == ["12", "no run", "none finished"]
    assert {(f.kind, f.arm) for f in result.flags} >= {("no_run", "fresh"), ("no_finished_episode", "live")}
    assert result.arms[2].excluded[0].reason == "unfinished"
    assert result.verdict.differing == [], "seeds are replicates of one arm, not a difference"
    assert result.verdict.missing == ["fresh", "live"] and result.exit_code == 1

    from mcu_arms.report.plot import plot_data

    data = plot_data(result)
    assert [a.arm for a in data.arms] == ["scripted_arm"] and data.not_plotted == ["fresh", "live"]
    assert "no finished episode: fresh, live" in data.title


def test_different_simulators_and_fingerprints_are_flagged(tmp_path: Path) -> None:
    write_arm(tmp_path, "emb", agent="random")
    write_arm(tmp_path, "mc", agent="random", simulator="minestudio")
    write_run(tmp_path, "emb")
    write_run(tmp_path, "mc")
    write_arm(tmp_path, "emb", agent="random", steps=50)
    write_run(tmp_path, "emb", episode=2)
    result = compare(tmp_path, "emb", "mc")
    kinds = {flag.kind for flag in result.flags}
    assert "different_simulators" in kinds
    emb = result.arms[0]
    assert len(emb.experiment.candidates) == 2 and [ref.episode for ref in emb.used] == [2]
    assert [(each.episode, each.reason) for each in emb.excluded] == [(1, "other experiment")]
    assert result.verdict.differing == ["simulator", "steps", "reset_mode", "action_mode"]  # minestudio's only
    outcome = invoke(tmp_path, {}, "compare", "emb", "mc")
    assert "different_simulators" in outcome.out and "MineStudio 1.1.6" in outcome.out


def test_arm_without_arm_file_is_found_by_its_output_dir(pair: Path) -> None:
    (pair / "arms" / "random_arm.toml").unlink()
    result = compare(pair, "scripted_arm", "random_arm")
    assert result.arms[1].source is None and result.arms[1].status == "finished"
    assert compare(pair, "output/scripted_arm", "random_arm").arms[0].source is not None


def test_secret_env_values_never_shown_but_still_compared(tmp_path: Path) -> None:
    write_arm(tmp_path, "a")
    write_arm(tmp_path, "b")
    for name, secret in (("a", "sk-FIRST-7f3a"), ("b", "sk-SECOND-91c2")):
        path = tmp_path / "arms" / f"{name}.toml"
        path.write_text(path.read_text() + f'\n[env]\nOPENAI_API_KEY = "{secret}"\nMODE = "x"\n', encoding="utf-8")
    outcome = invoke(tmp_path, {}, "compare", "a", "b", "--json", "--all")
    assert "sk-FIRST" not in outcome.out and "sk-SECOND" not in outcome.out
    result = Analysis.model_validate_json(outcome.out)
    assert result.verdict.settings_text == "comparable: differs only in env.OPENAI_API_KEY"
    assert next(row for row in result.settings if row.key == "env.MODE").values == ["x", "x"]


def test_json_round_trips(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--json")
    assert outcome.exit_code == 0
    parsed = Analysis.model_validate_json(outcome.out)
    assert parsed == compare(pair, "scripted_arm", "random_arm")
    assert parsed.milestones[0].cells[1].delta == 138


def test_csv_is_tidy_numbers(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--csv")
    assert outcome.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(outcome.out)))
    assert list(rows[0]) == ["arm", "metric", "statistic", "value"]
    assert all(float(row["value"]) == float(row["value"]) for row in rows), "every value is a number"
    value = {(row["arm"], row["metric"], row["statistic"]): float(row["value"]) for row in rows}
    assert value[("scripted_arm", "score", "mean")] == 3 and value[("scripted_arm", "score", "n")] == 1
    assert value[("scripted_arm", "score", "episode:1")] == 3, "a one-episode value is labelled with its episode"
    result = compare(pair, "scripted_arm", "random_arm")
    for milestone in result.milestones:
        for arm, cell in zip(result.arm_names(), milestone.cells, strict=True):
            assert value.get((arm, f"milestone:{milestone.task}/{milestone.identity}", "delta")) == cell.delta
    assert value[("", "verdict", "comparable")] == 1 and value[("", "verdict", "exit_code")] == 0


def test_markdown_has_every_table(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--markdown")
    assert outcome.exit_code == 0
    assert outcome.out.startswith("**comparable: differs only in agent**")
    assert "|  | scripted_arm (baseline) | random_arm |" in outcome.out
    assert "| mine_diamond_from_scratch/collect_wood | 12 | 150 (+138) |" in outcome.out
    assert "## Settings" in outcome.out and "## Results" in outcome.out


@pytest.mark.slow
def test_plot_is_a_png_with_one_kaplan_meier_panel_per_milestone(pair: Path) -> None:
    from matplotlib import image

    from mcu_arms.report.plot import build_figure, plot_data

    result = compare(pair, "scripted_arm", "random_arm")
    data = plot_data(result)
    assert [a.arm for a in data.arms] == ["scripted_arm", "random_arm"]
    assert [a.label for a in data.arms] == ["scripted_arm (baseline)", "random_arm: agent=random"], (
        "labelled by what differs"
    )
    assert "mine_diamond_from_scratch" in data.title and EMBEDDED_LABEL in data.title
    wood = next(panel for panel in data.milestones if panel.identity == "collect_wood")
    scripted, random_ = wood.curves  # one episode each: a step from 0 to 1 where it was reached
    assert (scripted.curve.steps, scripted.curve.reached) == ([0, 12], [0, 1]) and scripted.median == 12
    assert (random_.curve.steps, random_.curve.reached) == ([0, 150], [0, 1])
    table = next(panel for panel in data.milestones if panel.identity == "place_table")
    assert table.curves[1].curve.reached == [0, 0] and table.curves[1].median is None, "not reached: censored"
    assert [panel.identity for panel in data.milestones] == ["collect_wood", "place_table", "make_wood_pickaxe"], (
        "a milestone no arm reached gets no panel"
    )
    assert [(column.arm, column.seeds, column.scores) for column in data.scores] == [
        ("scripted_arm", [0], [3.0]),
        ("random_arm", [0], [1.0]),
    ], "the score first: a point per seed"
    figure = build_figure(data)
    assert figure.axes[0].get_title().startswith("score: a point per seed")
    panel_axes = figure.axes[1 : len(data.milestones) + 1]
    assert [axes.get_title() for axes in panel_axes] == [panel.identity for panel in data.milestones]
    assert list(panel_axes[0].get_lines()[0].get_xdata()) == data.milestones[0].curves[0].curve.steps
    assert [t.get_text() for t in figure.legends[0].get_texts()] == [
        "scripted_arm (baseline) (n=1)",
        "random_arm: agent=random (n=1)",
    ]
    assert "median of" not in " ".join(t.get_text() for t in figure.texts + [figure._suptitle])

    target = pair / "plots" / "cmp.png"
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--plot", "plots/cmp.png", "--json")
    assert outcome.exit_code == 0
    Analysis.model_validate_json(outcome.out)  # the plot note stays off stdout
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = figure.get_size_inches() * figure.dpi
    assert image.imread(target).shape[:2] == (round(height), round(width))


def test_user_errors_name_what_is_allowed(pair: Path) -> None:
    unknown = invoke(pair, {}, "compare", "scripted_arm", "nope")
    assert unknown.exit_code == 2 and "'nope'" in unknown.err and "random_arm, scripted_arm" in unknown.err
    baseline = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--baseline", "other")
    assert baseline.exit_code == 2 and "--baseline" in baseline.err
    assert "allowed: scripted_arm, random_arm" in baseline.err
    formats = invoke(pair, {}, "compare", "scripted_arm", "--json", "--csv")
    assert formats.exit_code == 2 and "one output format" in formats.err
    nothing = invoke(pair, {}, "compare")
    assert nothing.exit_code == 2 and "allowed:" in nothing.err
    report = pair / "output" / "random_arm" / "episode_001" / "result.json"
    report.write_text("{not json", encoding="utf-8")
    corrupt = invoke(pair, {}, "compare", "scripted_arm", "random_arm")
    assert corrupt.exit_code == 2 and str(report) in corrupt.err and "Traceback" not in corrupt.err


@pytest.mark.slow
def test_light_import() -> None:
    import subprocess

    code = (
        "import sys, mcu_arms.cli.compare, mcu_arms.report.compare, mcu_arms.report.plot;"
        "print(sorted(m for m in ('a2a', 'numpy', 'crafter', 'openai', 'matplotlib') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


@pytest.mark.slow
def test_real_embedded_runs_scripted_ahead_of_random(tmp_path: Path) -> None:
    """Two short real arms (green, purple and client processes, A2A, Crafter) run by `mcu-arms run`, then compared."""
    import subprocess

    write_arm(tmp_path, "scripted_real", steps=200, save_frames=False)
    write_arm(tmp_path, "random_real", agent="random", steps=200, save_frames=False)
    ran = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "arms/scripted_real.toml", "arms/random_real.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]

    outcome = invoke(tmp_path, {}, "compare", "scripted_real", "random_real", "--json")
    assert outcome.exit_code == 0, outcome.err
    result = Analysis.model_validate_json(outcome.out)
    assert result.verdict.text == "comparable: differs only in agent"
    assert [arm.status for arm in result.arms] == ["finished", "finished"]
    assert all(
        arm.metrics["steps_run"].mean == 200 and "Crafter" in (arm.latest.simulator_label or "") for arm in result.arms
    )
    assert not [flag for flag in result.flags if flag.kind == "arm_file_changed"]
    first = result.milestones[0]
    scripted, random_ = first.cells
    assert scripted.state == "reached", f"scripted did not reach {first.identity}"
    assert random_.step is None or scripted.step < random_.step
    reached = [sum(row.cells[i].step is not None for row in result.milestones) for i in range(2)]
    assert reached[0] > reached[1]

    from mcu_arms.report.plot import build_figure, plot_data

    assert len(build_figure(plot_data(result)).axes[1].get_lines()) == 2, "both arms' curves of the first milestone"


def test_a_policy_model_with_its_endpoint_and_revision_is_one_change(tmp_path: Path) -> None:
    repository = Path(__file__).resolve().parents[1] / "arms"
    (tmp_path / "arms").mkdir()
    for name in ("planned_kev", "planned_chat"):
        (tmp_path / "arms" / f"{name}.toml").write_text((repository / f"{name}.toml").read_text())
    result = compare(tmp_path, "planned_kev", "planned_chat")
    assert result.verdict.settings_text == "comparable: differs only in policy_model"
    follows = {row.key: row.follows for row in result.settings}
    assert follows["policy_backend"] == follows["policy_base_url"] == follows["policy_revision"] == "policy_model"
    outcome = invoke(tmp_path, {}, "compare", "planned_kev", "planned_chat")
    assert "(follows" in outcome.out and "policy_model" in outcome.out
    from mcu_arms.contracts.settings import differing_settings

    assert differing_settings([arm.settings for arm in result.arms]) == ["policy_model"], "campaigns count it once too"


def test_planned_counters_are_shown_and_na_for_other_agents(tmp_path: Path) -> None:
    write_arm(tmp_path, "scripted_arm")
    write_run(tmp_path, "scripted_arm")
    summary = AgentSummary(
        kind="planned",
        report_file="planned_report.json",
        turns=12,
        failed_turns=1,
        failed_turns_by_reason={"policy_timeout": 1},
        decisions=30,
        invalid_outputs=4,
        invalid_outputs_by_kind={"invalid_plan": 1, "invalid_policy_output": 3},
        stale_replans=1,
        reflex_interrupts=2,
        median_planner_ms=812.5,
        median_decision_ms=42.25,
    )
    repository = Path(__file__).resolve().parents[1] / "arms"
    (tmp_path / "arms" / "planned_kev.toml").write_text((repository / "planned_kev.toml").read_text())
    write_run(tmp_path, "planned_kev", agent=summary)
    outcome = invoke(tmp_path, {}, "compare", "scripted_arm", "planned_kev")
    assert _row(outcome.out, "decisions") == ["·", "30"]
    assert _row(outcome.out, "failed turns")[0] == "·" and _row(outcome.out, "failed turns")[1].startswith("1 (")
    assert "policy_timeout=1" in _row(outcome.out, "failed turns")[1], "model failures by cause, by name"
    assert _row(outcome.out, "decision ms (median)") == ["·", "42.2"]
    assert _row(outcome.out, "invalid outputs") == ["·", "4 (invalid_plan=1 invalid_policy_output=3)"]
    assert "· this arm's agent does not report it" in outcome.out
    for label in ("compactions", "overflow resets", "compaction limit"):  # codex's own: neither agent has them
        with pytest.raises(AssertionError, match="no row"):
            _row(outcome.out, label)


def test_two_arms_whose_latest_runs_are_other_experiments_are_refused_naming_both(pair: Path) -> None:
    """Both arms also ran with --steps 40: each has two experiments that differ only in agent from the other arm's,
    so which to compare is not clear; compare refuses (exit 2), lists the candidates, and --experiment chooses."""
    write_run(pair, "scripted_arm", episode=2, steps={"collect_wood": 5}, overrides={"steps": 40}, settings_steps=40)
    write_run(pair, "random_arm", episode=2, steps={}, overrides={"steps": 40}, settings_steps=40)
    refused = invoke(pair, {}, "compare", "scripted_arm", "random_arm")
    assert refused.exit_code == 2, refused.out
    assert "more than one experiment of 'scripted_arm', 'random_arm'" in refused.err
    for arm in ("scripted_arm", "random_arm"):
        assert f"  {arm}: experiment " in refused.err
    assert "steps = 40 (arm file: 400)" in refused.err and "n = 1 finished; episodes 1" in refused.err
    assert "--experiment PREFIX" in refused.err and "--run N" in refused.err

    first = compare(pair, "scripted_arm", "random_arm", episode=1)
    assert [arm.settings.steps for arm in first.arms] == [400, 400] and first.exit_code == 0
    chosen = [
        arm.experiment.candidates[0].fingerprint for arm in compare(pair, "scripted_arm", "random_arm", episode=2).arms
    ]
    prefixes = [fp.split(":", 1)[1][:8] for fp in chosen]
    outcome = invoke(
        pair, {}, "compare", "scripted_arm", "random_arm", *(f"--experiment={p}" for p in prefixes), "--json"
    )
    assert outcome.exit_code == 0, outcome.err
    result = Analysis.model_validate_json(outcome.out)
    assert [arm.settings.steps for arm in result.arms] == [40, 40]
    assert all("chosen by --experiment" in arm.experiment.why for arm in result.arms)
    assert [(e.episode, e.reason) for e in result.arms[0].excluded] == [(1, "other experiment")]


def test_an_arm_with_one_matching_experiment_is_chosen_whatever_ran_last(pair: Path) -> None:
    """Only scripted_arm ran again with --steps 40: the 400-step runs are the pair that differs only in agent."""
    write_run(pair, "scripted_arm", episode=2, steps={"collect_wood": 5}, overrides={"steps": 40}, settings_steps=40)
    result = compare(pair, "scripted_arm", "random_arm")
    assert result.verdict.text == "comparable: differs only in agent" and result.exit_code == 0
    scripted = result.arms[0]
    assert [ref.episode for ref in scripted.used] == [1] and scripted.settings.steps == 400
    assert "differs from the other arms only in agent" in scripted.experiment.why
    assert [(e.episode, e.reason) for e in scripted.excluded] == [(2, "other experiment")]


# --- tags (`run --tag`) as a filter --------------------------------------------------------------------------------


@pytest.fixture()
def tagged(pair: Path) -> Path:
    """Beside the pair's untagged episode 1: an ablation episode 2 of both arms (scripted's with a note), and a smoke
    episode 3 of scripted_arm on another seed."""
    ablation = {"purpose": "ablation", "who": "ana"}
    write_run(pair, "scripted_arm", 2, steps={"collect_wood": 10}, tags=ablation, note="wood first")
    write_run(pair, "random_arm", 2, steps={"collect_wood": 99}, tags={"purpose": "ablation"})
    write_run(pair, "scripted_arm", 3, steps={"collect_wood": 11}, tags={"purpose": "smoke"}, seed=1)
    return pair


def test_compare_tag_keeps_episodes_with_every_tag_and_lists_the_others_with_theirs(tagged: Path) -> None:
    outcome = invoke(tagged, {}, "compare", "scripted_arm", "random_arm", "--tag", "purpose=ablation")
    assert outcome.exit_code == 0, outcome.out + outcome.err
    assert "only episodes run with tags purpose=ablation" in outcome.out
    assert "scripted_arm episode 2 (seed 0): purpose=ablation who=ana; wood first" in outcome.out
    assert "random_arm episode 2 (seed 0): purpose=ablation" in outcome.out
    assert "scripted_arm episode 1 (seed 0, finished): other tags: run without tags" in outcome.out
    assert "scripted_arm episode 3 (seed 1, finished): other tags: run with tags purpose=smoke" in outcome.out
    result = Analysis.model_validate_json(
        invoke(tagged, {}, "compare", "scripted_arm", "random_arm", "--tag", "purpose=ablation", "--json").out
    )
    assert result.tags == {"purpose": "ablation"}
    scripted = result.arm("scripted_arm")
    assert [(ref.episode, ref.tags, ref.note) for ref in scripted.used] == [
        (2, {"purpose": "ablation", "who": "ana"}, "wood first")
    ]
    assert {(e.episode, e.reason) for e in scripted.excluded} == {(1, "other tags"), (3, "other tags")}
    assert scripted.milestones["mine_diamond_from_scratch/collect_wood"].step == 10

    both = compare(tagged, "scripted_arm", "random_arm", tags={"purpose": "ablation", "who": "ana"})
    assert [ref.episode for ref in both.arm("scripted_arm").used] == [2], "every tag given must match"
    assert both.arm("random_arm").status == "no run" and both.exit_code == 1
    (flag,) = [f for f in both.flags if f.arm == "random_arm"]
    assert "with the tags asked for (2 with other tags)" in flag.message
    assert [e.detail for e in both.arm("random_arm").excluded] == [
        "run without tags",
        "run with tags purpose=ablation",
    ]


def test_without_tag_every_episode_counts_and_tags_and_notes_are_shown(tagged: Path) -> None:
    outcome = invoke(tagged, {}, "compare", "scripted_arm", "random_arm")
    assert "only episodes run with tags" not in outcome.out
    assert "tags and notes of the episodes used" in outcome.out
    assert "scripted_arm episode 3 (seed 1): purpose=smoke" in outcome.out
    markdown = invoke(tagged, {}, "compare", "scripted_arm", "random_arm", "--markdown").out
    assert "## Tags and notes of the episodes used" in markdown and "wood first" in markdown


def test_a_tag_without_a_value_is_a_one_line_user_error(pair: Path) -> None:
    outcome = invoke(pair, {}, "compare", "scripted_arm", "random_arm", "--tag", "purpose")
    assert outcome.exit_code == 2
    assert "'purpose' is not a tag" in outcome.err and "Traceback" not in outcome.err
    assert outcome.out == ""
