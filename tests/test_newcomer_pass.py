"""The newcomer's third pass (issue 47), each point through the real CLI: `plan` and `run` say what the arms differ
in before any compute is spent; an episode is skipped when any finished run has its fingerprint and seed; a folder of
arm files with a bad one still shows the rest; save_frames is out of the fingerprint."""

from __future__ import annotations

from pathlib import Path

from cli_support import invoke
from test_compare import write_arm, write_run


def test_plan_says_what_two_arms_differ_in_and_warns_when_a_pair_is_not_comparable(tmp_path: Path) -> None:
    write_arm(tmp_path, "x_base")
    write_arm(tmp_path, "x_agent", agent="random")
    write_arm(tmp_path, "x_two", agent="random", step_timeout=5)

    one = invoke(tmp_path, {}, "plan", "--dry-run", "--arm", "x_base", "--arm", "x_agent")
    assert one.exit_code == 0, one.out + one.err
    assert "x_base vs x_agent: agent" in one.out
    assert "warning: x_base and x_agent" not in one.out

    two = invoke(tmp_path, {}, "plan", "--dry-run", "--arm", "x_base", "--arm", "x_two")
    assert two.exit_code == 0, two.out + two.err
    assert "x_base vs x_two: agent, step_timeout" in two.out
    assert two.out.index("└") < two.out.index("the arms differ in"), "the one-line-per-arm summary still comes first"
    assert "warning: x_base and x_two differ in 2 settings (agent, step_timeout)" in " ".join(two.out.split())

    everything = invoke(tmp_path, {}, "run", "--dry-run", "--arm", "x_*")  # a glob names all three
    assert everything.exit_code == 0, everything.out + everything.err
    assert "x_agent vs x_two: step_timeout" in everything.out and "x_base vs x_two" in everything.out

    strict = invoke(tmp_path, {}, "run", "--dry-run", "--strict", "--arm", "x_base", "--arm", "x_two")
    assert strict.exit_code == 2
    assert "differ in more than one setting" in strict.err and "x_base vs x_two: agent, step_timeout" in strict.err
    assert invoke(tmp_path, {}, "plan", "--dry-run", "--strict", "x_base.toml").exit_code != 0  # no such file
    assert invoke(tmp_path, {}, "plan", "--dry-run", "--strict", "--arm", "x_base", "--arm", "x_agent").exit_code == 0


def test_an_episode_is_skipped_when_any_finished_run_has_its_fingerprint_and_seed(tmp_path: Path) -> None:
    """A later run with other settings (here --steps 20) does not hide the earlier one that matches."""
    write_arm(tmp_path, "solo")
    write_run(tmp_path, "solo", 1)
    write_run(tmp_path, "solo", 2, settings_steps=20)

    again = invoke(tmp_path, {}, "run", "--dry-run", "--arm", "solo")
    assert again.exit_code == 0, again.out + again.err
    said = " ".join(again.out.split())
    assert "skip" in said and "episode_001 already finished with fingerprint" in said and "seed 0" in said
    rerun = invoke(tmp_path, {}, "run", "--dry-run", "--rerun", "--arm", "solo")
    assert "episode_001 already finished with this fingerprint; --rerun runs it again" in " ".join(rerun.out.split())
    other_seed = invoke(tmp_path, {}, "run", "--dry-run", "--arm", "solo", "--seeds", "3")
    assert "already finished" not in other_seed.out


def test_a_bad_arm_file_in_the_folder_is_reported_and_the_others_are_still_shown(tmp_path: Path) -> None:
    write_arm(tmp_path, "good_one")
    write_arm(tmp_path, "good_two", agent="random")
    (tmp_path / "arms" / "broken.toml").write_text('agent = "random"\nstepz = 10\n', encoding="utf-8")

    planned = invoke(tmp_path, {}, "plan", "--dry-run")
    assert planned.exit_code == 2, "non-zero at the end"
    assert "good_one" in planned.out and "good_two" in planned.out, "the other arms are still planned"
    assert "broken.toml" in planned.err and "stepz" in planned.err and "1 arm file(s) could not be read" in planned.err

    checked = invoke(tmp_path, {}, "doctor")
    assert checked.exit_code == 2 and "broken.toml" in checked.err and "stepz" in checked.err
    assert "2 arm(s)" in checked.out, "doctor checked the two readable arms"
    named = invoke(tmp_path, {}, "plan", "--dry-run", "arms/broken.toml", "arms/good_one.toml")
    assert named.exit_code == 2 and "good_one" not in named.out, "a file named on its own is still refused outright"


def test_save_frames_is_out_of_the_fingerprint_and_recorded_in_the_report(tmp_path: Path) -> None:
    """Watching a run is no new experiment: an arm saving frames keeps the fingerprint of the same arm saving none,
    `compare` finds no difference, and each report still says whether frames were kept."""
    import json

    write_arm(tmp_path, "watched", save_frames=True)
    write_arm(tmp_path, "unwatched", save_frames=False)
    planned = invoke(tmp_path, {}, "plan", "--dry-run", "--json", "--arm", "watched", "--arm", "unwatched")
    assert planned.exit_code == 0, planned.err
    plans = {plan["arm"]: plan for plan in json.loads(planned.out)["plans"]}
    assert plans["watched"]["fingerprint"] == plans["unwatched"]["fingerprint"]
    assert "watched vs unwatched: nothing" in planned.err

    write_run(tmp_path, "watched")
    write_run(tmp_path, "unwatched")
    compared = invoke(tmp_path, {}, "compare", "watched", "unwatched", "--json")
    assert json.loads(compared.out)["verdict"]["identical"] is True
    for arm, saved in (("watched", True), ("unwatched", False)):
        written = json.loads((tmp_path / "output" / arm / "episode_001" / "result.json").read_text())
        assert written["settings"]["save_frames"] is saved, "recorded in the report"

    from mcu_arms.arms.spec import load_arm

    for name in ("demo", "demo_random"):  # the demo arms keep their frames, for the episode page's player
        assert load_arm(Path(__file__).resolve().parents[1] / "arms" / f"{name}.toml").save_frames


def test_doctor_and_plan_group_arms_by_what_they_need_and_exit_0_when_what_was_asked_about_can_run(
    tmp_path: Path,
) -> None:
    """A host without MineStudio still runs the embedded arms: doctor says so per group and exits 0 for the folder,
    1 for the MineStudio arm named; a planned arm whose model endpoints are closed is never called ready."""
    from server_procs import free_port

    write_arm(tmp_path, "emb")
    write_arm(tmp_path, "ms", simulator="minestudio", agent="noop")
    closed = free_port()
    for name in ("pl", "pl2"):  # two planned arms sharing their endpoints
        (tmp_path / "arms" / f"{name}.toml").write_text(
            'agent = "planned"\ntask = "mine_diamond_from_scratch"\nsimulator = "embedded"\nobserve = "state"\n'
            f'[planner]\nbase_url = "http://127.0.0.1:{closed}/v1"\nmodel = "m"\n'
            f'[policy]\nbackend = "chat"\nbase_url = "http://127.0.0.1:{closed}/v1"\nmodel = "m"\n',
            encoding="utf-8",
        )
    host = {"PATH": "/nonexistent", "MINESTUDIO_DIR": str(tmp_path / "ms_dir")}
    folder = invoke(tmp_path, host, "doctor")
    assert folder.exit_code == 0, folder.out + folder.err
    said = " ".join(folder.out.split())
    assert "embedded arms (emb): ready" in said
    assert "minestudio arms (ms): cannot run here" in said and "java" in said
    assert "planned arms on embedded (pl, pl2): endpoints down (planner endpoint, policy endpoint)" in said
    assert invoke(tmp_path, host, "doctor", "arms/ms.toml").exit_code == 1, "the arm asked about cannot run"
    assert invoke(tmp_path, host, "doctor", "arms/emb.toml").exit_code == 0

    planned = invoke(tmp_path, host, "plan", "--dry-run")
    rows = {row[0]: row[7] for row in (line.split("│")[1:-1] for line in planned.out.splitlines()) if len(row) > 8}
    rows = {key.strip(): value.strip() for key, value in rows.items()}
    assert rows == {"emb": "ready", "ms": "cannot run here", "pl": "endpoints down", "pl2": "endpoints down"}
    warned = [line for line in planned.out.splitlines() if f"127.0.0.1:{closed}/v1/models does not answer" in line]
    assert len(warned) == 2 and all(line.startswith("warning: pl, pl2: ") for line in warned), "each once, not per arm"


def _at_80_columns(cwd: Path, env: dict[str, str], *args: str) -> str:
    """What a terminal 80 columns wide shows of a command."""
    import io

    from rich.console import Console
    from typer.testing import CliRunner

    from mcu_arms.cli import app
    from mcu_arms.environment import Environment

    out = io.StringIO()
    environment = Environment(
        console=Console(file=out, width=80, color_system=None),
        err_console=Console(file=io.StringIO(), width=80, color_system=None),
        variables=env,
        cwd=cwd,
    )
    CliRunner().invoke(app, list(args), obj=environment, catch_exceptions=False)
    shown = out.getvalue()
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    assert "…" not in shown, "nothing cut"
    return shown


def _words(shown: str) -> set[str]:
    return {word.strip("(),;'`") for line in shown.splitlines() for word in line.split()}


def test_tasks_and_doctor_fit_80_columns_without_splitting_a_word(tmp_path: Path) -> None:
    from mcu_arms.contracts.tasks import all_tasks, tasks_root

    shown = _at_80_columns(tmp_path, {}, "tasks")
    names = {task.name for group in all_tasks(tasks_root(env={})).values() for task in group}
    assert names <= _words(shown), f"split or cut: {sorted(names - _words(shown))[:5]}"

    write_arm(tmp_path, "ms", simulator="minestudio", agent="noop")
    checked = _at_80_columns(tmp_path, {"PATH": "/nonexistent", "MINESTUDIO_DIR": str(tmp_path / "m")}, "doctor")
    assert "pip install 'mcu-arms[minestudio]'" in " ".join(checked.split()), "the install command whole"
    assert {"xvfb-run", "mcprec-6.13.jar"} <= {word.rsplit("/", 1)[-1] for word in _words(checked)}


def test_compare_opens_with_the_verdict_and_scores_and_prints_no_test_that_means_nothing(tmp_path: Path) -> None:
    import re

    write_arm(tmp_path, "base")
    write_arm(tmp_path, "other", agent="random")
    write_arm(tmp_path, "two", agent="random", step_timeout=5)
    for arm in ("base", "other", "two"):
        write_run(tmp_path, arm, 1, steps={"collect_wood": 12})

    one_seed = invoke(tmp_path, {}, "compare", "base", "other")
    lines = one_seed.out.splitlines()
    assert lines[0] == "comparable: differs only in agent" and lines[1] == "results over the episodes used"
    assert "not distinguishable" not in one_seed.out and "log-rank" not in one_seed.out
    assert "statistics:" not in one_seed.out, "method prose only with --verbose"
    suggested = re.search(r"`mcu-arms (run [^`]+)`", " ".join(one_seed.out.split()))
    assert suggested is not None and "--seeds 0-4" in suggested.group(1)
    tried = invoke(tmp_path, {}, *suggested.group(1).split(), "--dry-run")
    assert tried.exit_code == 0, "the command it suggests exists, flags and all: " + tried.err

    apart = invoke(tmp_path, {}, "compare", "base", "two")
    assert apart.out.startswith("NOT comparable: differs in agent, step_timeout")
    assert "no test: the arms differ in agent, step_timeout" in " ".join(apart.out.split())
    assert "distinguishable" not in apart.out and "score: two" not in apart.out

    for arm in ("base", "other"):
        write_run(tmp_path, arm, 2, seed=1, steps={"collect_wood": 20})
    two_seeds = invoke(tmp_path, {}, "compare", "base", "other")
    assert "score: other − base" in two_seeds.out and "statistics:" not in two_seeds.out
    assert "--verbose" in two_seeds.out
    assert "statistics:" in invoke(tmp_path, {}, "compare", "base", "other", "--verbose").out


def test_the_score_is_drawn_first_a_point_per_seed_paired_seeds_joined_with_the_interval(tmp_path: Path) -> None:
    from test_compare import compare

    from mcu_arms.report.plot import build_figure, plot_data

    write_arm(tmp_path, "base")
    write_arm(tmp_path, "other", agent="random")
    for seed in (0, 1, 2):
        write_run(tmp_path, "base", seed + 1, seed=seed, steps={"collect_wood": 12, "place_table": 30 + seed})
        write_run(tmp_path, "other", seed + 1, seed=seed, steps={"collect_wood": 40} if seed else {})
    drawn = invoke(tmp_path, {}, "compare", "base", "other", "--plot", "cmp.svg")
    assert drawn.exit_code == 0 and (tmp_path / "cmp.svg").read_text().lstrip().startswith("<?xml")

    data = plot_data(compare(tmp_path, "base", "other"))
    base, other = data.scores
    assert (base.seeds, base.scores) == ([0, 1, 2], [2.0, 2.0, 2.0]) and other.scores == [0.0, 1.0, 1.0]
    assert other.low is not None and other.high is not None and other.low <= other.mean <= other.high
    assert [panel.identity for panel in data.milestones] == ["collect_wood", "place_table"], "only those reached"
    score_axes = build_figure(data).axes[0]
    joins = [line for line in score_axes.get_lines() if line.get_color() == "0.75"]
    assert sorted(list(line.get_ydata()) for line in joins) == [[2.0, 0.0], [2.0, 1.0], [2.0, 1.0]], "seed by seed"
    assert len(score_axes.containers) == 2, "each arm's mean with its interval"


def test_a_campaign_on_a_terminal_is_an_arm_by_seed_grid_with_a_line_per_arm_and_short_local_times() -> None:
    """Twelve episodes: a row per arm and a line per arm, not a block of lines per episode; log lines on a terminal
    carry the local time of day, not a 25-character UTC stamp."""
    import io
    import re

    from rich.console import Console

    from mcu_arms.supervise.live import LiveView
    from mcu_arms.supervise.progress import ArmProgress

    episodes = []
    for arm in ("demo", "demo_random"):
        for seed in range(6):
            state = "finished" if seed < 2 else "running" if seed == 2 else "queued"
            progress = ArmProgress(f"{arm} s{seed}", max_steps=300, state=state, grid=(arm, seed))
            progress.step = 120 if state == "running" else 0
            episodes.append(progress)
    screen = io.StringIO()
    view = LiveView(Console(file=screen, force_terminal=True, width=80, color_system=None))
    view.line("demo s0", "finished")
    view.refresh(episodes, summary="4 of 12 done, 2 running, 6 queued")
    view.close(episodes)
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    last = drawn.split("4 of 12 done")[-1].strip().splitlines()  # the final frame of the live display
    assert len(last) <= 8, drawn
    assert any(line.split()[:1] == ["demo"] and "▶ 120/300" in line for line in last), drawn
    assert "demo_random: 2 finished, 1 running, 3 queued" in drawn
    assert all(len(line) <= 80 for line in drawn.splitlines())
    assert re.search(r"^\d\d:\d\d:\d\d demo s0: finished", drawn, re.M), drawn


def test_every_command_is_summed_up_in_at_most_two_lines_of_the_help(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mcu_arms.cli import app

    listing = CliRunner().invoke(app, ["--help"], terminal_width=100).output
    rows = [line[2:] for line in listing.split("Commands")[1].splitlines() if line.startswith("│ ")]
    summaries: dict[str, int] = {}
    name = ""
    for row in rows:  # a command's first line starts with its name, the lines that continue it with spaces
        name = row.split()[0] if not row.startswith(" ") else name
        summaries[name] = summaries.get(name, 0) + 1
    assert {"run", "stop", "status", "doctor", "view", "acceptance"} <= set(summaries), summaries
    assert all(count <= 2 for count in summaries.values()), summaries


def test_run_given_an_arm_name_as_a_file_suggests_the_flag(tmp_path: Path) -> None:
    write_arm(tmp_path, "demo")
    said = invoke(tmp_path, {}, "run", "demo", "--dry-run")
    assert said.exit_code == 2 and "did you mean `--arm demo`?" in said.err
    assert len(said.err.strip().splitlines()) == 1 or "--arm demo" in said.err.splitlines()[0]


def test_compare_to_an_mlflow_file_store_is_one_line_when_mlflow_3_refuses_them(tmp_path: Path, monkeypatch) -> None:
    """MLflow itself is a stand-in here (its version and presence): the refusal comes before it is imported."""
    import importlib.metadata
    import importlib.util

    real_version, real_find = importlib.metadata.version, importlib.util.find_spec
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.1.0" if name == "mlflow" else real_version(name))
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "mlflow" else real_find(name, *a)
    )
    write_arm(tmp_path, "base")
    write_run(tmp_path, "base")
    said = invoke(tmp_path, {}, "compare", "base", "--to", f"mlflow=file://{tmp_path}/mlruns")
    assert said.exit_code == 2 and "Traceback" not in said.err
    assert "MLflow 3.1.0 does not write file stores" in said.err and "sqlite:///" in said.err
    assert len(said.err.strip().splitlines()) == 1


def test_codex_home_for_an_arm_that_does_not_run_codex_is_refused(tmp_path: Path) -> None:
    write_arm(tmp_path, "scripted_one")
    root = tmp_path / "var" / "codex"
    said = invoke(tmp_path, {}, "codex-home", "scripted_one", "--root", str(root))
    assert said.exit_code == 2 and "runs agent 'scripted', which does not use codex" in said.err
    assert not root.exists(), "nothing was built"


def test_the_index_of_every_run_heads_the_bundle_and_an_arm_with_two_experiments_no_longer_refuses(
    tmp_path: Path,
) -> None:
    """`report --html` with nothing named (as `view`): each arm's latest experiment compared, the index of every
    run (latest first, n, status, score, how to open it) on runs.html and at the head of the comparison page; checked
    in headless Chromium where it is installed."""
    import html

    write_arm(tmp_path, "base")
    write_arm(tmp_path, "other", agent="random")
    import json

    for arm, episode, hour, changes in (
        ("base", 1, 10, {"steps": {"collect_wood": 12}}),
        ("base", 2, 11, {"settings_steps": 20}),  # a second experiment of base
        ("other", 1, 12, {"steps": {"collect_wood": 40}}),
    ):
        write_run(tmp_path, arm, episode, **changes)
        path = tmp_path / "output" / arm / f"episode_{episode:03d}" / "result.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "started_at": f"2026-11-30T{hour}:00:00+00:00"}))

    written = invoke(tmp_path, {}, "report", "--html", "bundle")
    assert written.exit_code == 0, written.out + written.err
    runs = html.unescape((tmp_path / "bundle" / "runs.html").read_text())
    order = [runs.index(f'data-name="{name}"') for name in ("other", "base")]
    assert order == sorted(order), "latest first"
    assert runs.count('data-name="base"') == 2, "one row per experiment"
    assert "mcu-arms view base --experiment" in runs and "1 of 1" in runs
    assert 'href="/' not in runs, "a bundle links only the comparison it holds; the other rows show their command"
    comparison = (tmp_path / "bundle" / "index.html").read_text()
    assert comparison.index('id="run-index"') < comparison.index('id="arms"'), "the index heads the page"
    assert str(tmp_path) not in runs, "no path of this machine in the bundle"

    from browser import chromium_missing, start_browser

    if chromium_missing() is not None:
        return  # the file checks above stand; Chromium checks the page where it is installed
    with start_browser(window=(1200, 800)) as browser:
        browser.open((tmp_path / "bundle" / "runs.html").as_uri())
        rows = browser.run_js(
            "[...document.querySelectorAll('#run-index tbody tr')].map(r => [r.dataset.name, r.cells[6].innerText])"
        )
        assert rows == [["other", "1"], ["base", "0"], ["base", "1"]], rows
        assert all(r["url"].startswith(("file://", "data:", "about:")) for r in browser.requests())


def test_the_comparison_page_draws_the_score_first_in_headless_chromium(tmp_path: Path) -> None:
    import pytest
    from browser import chromium_missing, start_browser

    write_arm(tmp_path, "base")
    write_arm(tmp_path, "other", agent="random")
    for seed in (0, 1):
        write_run(tmp_path, "base", seed + 1, seed=seed, steps={"collect_wood": 12, "place_table": 30})
        write_run(tmp_path, "other", seed + 1, seed=seed, steps={"collect_wood": 40} if seed else {})
    assert invoke(tmp_path, {}, "report", "base", "other", "--html", "bundle").exit_code == 0
    page = (tmp_path / "bundle" / "index.html").read_text()
    assert page.index('id="score-chart"') < page.index('id="milestone-chart"'), "the score at the top"
    if chromium_missing() is not None:
        pytest.skip(chromium_missing() or "")
    with start_browser(window=(1200, 900)) as browser:
        browser.open((tmp_path / "bundle" / "index.html").as_uri())
        browser.wait_for("window.VIEWER_READY === true", timeout=60)
        traces = browser.run_js(
            "document.getElementById('score-chart').data.map(t => [t.mode, t.x, t.y, t.error_y ? true : false])"
        )
        joins = [trace for trace in traces if trace[0] == "lines"]
        assert sorted(trace[2] for trace in joins) == [[2, 0], [2, 1]], "seed 0 and seed 1 joined across the arms"
        points = [trace for trace in traces if trace[0] == "markers" and not trace[3]]
        assert [trace[2] for trace in points] == [[2, 2], [0, 1]], "a point per seed"
        assert sum(trace[3] for trace in traces) == 2, "each arm's mean with its interval"


def test_the_page_of_a_single_arm_says_there_is_nothing_to_compare_it_with(tmp_path: Path) -> None:
    write_arm(tmp_path, "solo")
    write_run(tmp_path, "solo")
    assert invoke(tmp_path, {}, "report", "solo", "--html", "bundle").exit_code == 0
    page = (tmp_path / "bundle" / "index.html").read_text()
    assert "one arm: nothing to compare it with" in page and "has no finished episode" not in page


def test_a_run_ends_saying_what_to_do_next(tmp_path: Path) -> None:
    """After `run`, the command that compares (or views) what just finished: flags and names that exist."""
    write_arm(tmp_path, "demo")
    write_arm(tmp_path, "demo_random", agent="random")
    write_run(tmp_path, "demo")
    write_run(tmp_path, "demo_random")
    said = invoke(tmp_path, {}, "run", "--arm", "demo", "--arm", "demo_random")  # both finished already: skipped
    assert said.exit_code == 0, said.out + said.err
    line = next(line for line in said.out.splitlines() if line.startswith("next:"))
    assert "`mcu-arms compare demo demo_random`" in line
    assert invoke(tmp_path, {}, "compare", "demo", "demo_random").exit_code == 0, "the command it names works"


def test_episode_links_are_named_by_seed(tmp_path: Path) -> None:
    from view_episodes import write_episode

    write_episode(tmp_path, "cx", steps=10)
    assert invoke(tmp_path, {}, "report", "cx", "--html", "bundle").exit_code == 0
    page = (tmp_path / "bundle" / "index.html").read_text()
    assert (
        '<a class="episode-link" href="episodes/cx-001-mine_diamond_from_scratch/index.html" title="episode 1">' in page
    )
    assert "seed 0: mine_diamond_from_scratch</a>" in page


def test_no_path_of_this_machine_travels_in_the_bundle(tmp_path: Path) -> None:
    from view_episodes import write_episode

    write_episode(tmp_path, "cx", steps=20)
    write_episode(tmp_path, "rnd", steps=20, agent="random", frames=False)  # its page says how to get frames
    assert invoke(tmp_path, {}, "report", "cx", "rnd", "--html", "bundle").exit_code == 0
    texts = [path for path in (tmp_path / "bundle").rglob("*") if path.suffix in (".html", ".js")]
    assert texts and not [path for path in texts if str(tmp_path) in path.read_text(errors="replace")]


def test_episode_timelines_keep_their_colours_across_pages_and_label_each_milestone_star(tmp_path: Path) -> None:
    import pytest
    from browser import chromium_missing, start_browser
    from view_episodes import MILESTONE_STEPS, write_episode

    if chromium_missing() is not None:
        pytest.skip(chromium_missing() or "")
    STEPS_TO_A_MILESTONE = MILESTONE_STEPS["mine_log"] + 10  # noqa: N806 - a constant of this test
    write_episode(tmp_path, "cx", steps=STEPS_TO_A_MILESTONE)  # a codex agent: turns and more series than the other
    write_episode(tmp_path, "rnd", steps=STEPS_TO_A_MILESTONE, agent="random", frames=False)
    assert invoke(tmp_path, {}, "report", "cx", "rnd", "--html", "bundle").exit_code == 0
    colours: list[dict[str, str]] = []
    starred = 0
    with start_browser(window=(1200, 900)) as browser:
        for arm in ("cx", "rnd"):
            browser.open("about:blank")
            page = tmp_path / "bundle" / "episodes" / f"{arm}-001-mine_diamond_from_scratch" / "index.html"
            browser.open(page.as_uri())
            browser.wait_for("window.VIEWER_READY === true", timeout=60)
            traces = browser.run_js(
                "[...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => gd.data)"
                ".map(t => [t.name, t.mode, t.line ? t.line.color : null, t.text || null])"
            )
            colours.append({name: colour for name, mode, colour, _ in traces if mode == "lines" and colour})
            stars = [trace for trace in traces if trace[0] == "milestone"]
            for star in stars:
                assert star[1] == "markers+text" and all(star[3]), "each star says which milestone"
                starred += 1
    assert starred, "the episodes reached a milestone"
    shared = set(colours[0]) & set(colours[1])
    assert shared and all(colours[0][name] == colours[1][name] for name in shared), colours


def test_the_pace_of_an_episode_that_ended_is_its_own_not_decayed_by_the_wait_after_it() -> None:
    """300 steps in 5 s is 3600 steps/min, however long the view goes on showing it after it ended."""
    import time

    from mcu_arms.contracts.steps import StepProgress
    from mcu_arms.supervise.progress import ArmProgress, StepSample

    progress = ArmProgress("demo", max_steps=300, state="running")
    start = time.time() - 60  # ended a minute ago
    progress.add_steps([StepSample("t", StepProgress(step=i, t=start + i * 5 / 299)) for i in range(300)])
    progress.finished = time.monotonic()
    rate = progress.steps_per_minute()
    assert rate is not None and 3500 < rate < 3700, rate


def test_campaign_words_agree_a_stopped_episode_is_interrupted_and_no_eta_without_a_run() -> None:
    from mcu_arms.contracts.campaign_run import CampaignTally

    stopped = CampaignTally(
        total=4, done=2, running=0, queued=0, failed=0, interrupted=1, retried=0, ended=3, elapsed_s=60, live=False
    )
    said = stopped.text()
    assert "0 failed, 1 interrupted" in said and "ETA" not in said and "not running" in said
    live = stopped.model_copy(update={"live": True, "running": 1, "interrupted": 0})
    assert "ETA" in live.text() and "interrupted" not in live.text()


def test_status_of_a_campaign_at_80_columns_is_an_arm_by_seed_grid_with_no_word_split() -> None:
    import io

    from rich.console import Console

    from mcu_arms.cli.status import _render_campaign
    from mcu_arms.contracts.campaign_run import CampaignTally
    from mcu_arms.environment import Environment
    from mcu_arms.report.status import CampaignCellState, CampaignState

    note = "purple: exited with code 3 before it was ready (mine_diamond_from_scratch)"
    cells = [
        CampaignCellState(
            arm=arm,
            seed=seed,
            state="failed" if seed == 5 else "done",
            episode=seed + 1,
            attempts=1,
            step=300,
            max_steps=300,
            score=2.0,
            note=note if seed == 5 else None,
        )
        for arm in ("scripted_arm_with_a_long_name", "random_arm_with_a_long_name")
        for seed in range(6)
    ]
    tally = CampaignTally(total=12, done=10, running=0, queued=0, failed=2, retried=0, ended=12, elapsed_s=60)
    state = CampaignState(
        campaign="agents", run="r1", started_at=None, supervisor_alive=False, cells=cells, tally=tally
    )
    screen = io.StringIO()
    _render_campaign(state, Environment(console=Console(file=screen, width=80, color_system=None)))
    drawn = screen.getvalue()
    assert all(len(line) <= 80 for line in drawn.splitlines()), drawn
    assert len(drawn.splitlines()) <= 10, "the tally, a row per arm, a line per note (not a row per cell)"
    words = {word.strip("():,") for line in drawn.splitlines() for word in line.split()}
    assert {"scripted_arm_with_a_long_name", "mine_diamond_from_scratch", "s5"} <= words, drawn


def test_each_row_of_the_served_index_opens_its_comparison_and_a_forged_one_is_404(tmp_path: Path) -> None:
    """`mcu-arms view` (a real process, nothing named): a row's link on runs.html opens that comparison as a page of
    the viewer, built from the index's own names; a name the index does not hold (`..`, an unknown arm or campaign)
    is a short 404, never a file of the machine nor a traceback."""
    import re
    import signal
    import urllib.error
    import urllib.request

    from run_helpers import Started, wait_for
    from test_campaigns import CAMPAIGN

    from mcu_arms.contracts.settings import CampaignTag

    project = tmp_path / "project"
    (project / "campaigns").mkdir(parents=True)
    (project / "campaigns" / "agents.toml").write_text(CAMPAIGN)
    write_arm(project, "scripted_arm")
    write_arm(project, "random_arm", agent="random")
    write_arm(project, "solo")
    for arm, steps in (("scripted_arm", {"collect_wood": 10}), ("random_arm", {"collect_wood": 40})):
        write_run(project, arm, steps=steps, campaign=CampaignTag(name="agents", run="r1"))
    write_run(project, "solo", steps={"collect_wood": 5})

    def get(url: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    started = Started(project, tmp_path / "state", "view")
    try:
        found = wait_for(
            lambda: re.search(r"http://127\.0\.0\.1:\d+/", started.output) or started.popen.poll() is not None,
            "mcu-arms view to print its URL",
            timeout=60,
        )
        assert isinstance(found, re.Match), started.output
        root = found.group(0)
        status, runs = get(root + "runs.html")
        assert status == 200
        links = dict(
            re.findall(r'data-name="([^"]+)" data-kind="campaign".*?class="open-comparison" href="([^"]+)"', runs, re.S)
        )
        assert links == {"agents": "/campaign/agents/index.html"}, runs
        status, page = get(root + links["agents"].lstrip("/"))
        assert status == 200, page
        assert 'data-arm="scripted_arm"' in page and 'data-arm="random_arm"' in page and 'data-arm="solo"' not in page
        assert get(root + "campaign/agents/comparison-data.js")[0] == 200, "its own files, by relative links"
        (solo,) = re.findall(r'class="open-comparison" href="(/experiment/solo/[^"]+)"', runs)
        status, page = get(root + solo.lstrip("/"))
        assert status == 200 and 'data-arm="solo"' in page and 'data-arm="random_arm"' not in page
        for forged in (
            "campaign/..%2F..%2Fetc%2Fpasswd/index.html",
            "campaign/nobody/index.html",
            "experiment/nobody/abc/index.html",
            "experiment/solo/000000000000/index.html",
            "experiment/../../../etc/passwd",
        ):
            status, body = get(root + forged)
            assert status == 404 and "Traceback" not in body and len(body.splitlines()) == 1, (forged, body)

        from browser import chromium_missing, start_browser

        if chromium_missing() is not None:
            return  # the HTTP checks above stand; Chromium follows the link where it is installed
        with start_browser(window=(1200, 800)) as browser:
            browser.open(root + "runs.html")
            browser.run_js("document.querySelector('tr[data-kind=campaign] a.open-comparison').click()")
            arms = browser.wait_for(
                "location.pathname === '/campaign/agents/index.html' && window.VIEWER_READY === true"
                " && [...document.querySelectorAll('#arms tr[data-arm]')].map(r => r.dataset.arm)",
                timeout=60,
            )
            assert sorted(arms) == ["random_arm", "scripted_arm"], arms
            assert not browser.external_requests() and not browser.errors()
    finally:
        started.popen.send_signal(signal.SIGINT)  # our own child, by its Popen
        started.wait(timeout=30)
        started.kill_if_running()
