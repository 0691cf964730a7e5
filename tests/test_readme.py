"""The README and the tutorial as a newcomer meets them: a fresh clone, the README's two commands, then the
documentation's examples in order, each doing what the page says it does.

The commands are read from the pages themselves (their ```bash blocks: the README's, then those of DOC_PAGES in
order), so that this test breaks when the documentation drifts: an example it does not know fails it, as does one
that no longer does what is checked here. The README's "first comparison" is a shorter path through the same
examples: each of its commands must be one of the tutorial's, in the tutorial's order, so running the tutorial runs
it. The clone is `git clone` of this repository with the working tree's changes laid over it, so uncommitted edits
are what is tested.

Run as written, with one shortcut, test-only: the second command's `pytest` gets `--collect-only`, since the suite
it would start is the one running this test (collecting proves the test extra installed and every test module
imports in the clone). The first command's install is real (about 90 s against a package index; without one the
test skips, saying so).
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import summary_rows
from run_helpers import wait_for

REPO = Path(__file__).resolve().parents[1]
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
PYTEST = ".venv/bin/python -m pytest"
# The pages whose ```bash blocks this test runs, in the order it runs them, after the README's.
DOC_PAGES = (
    "docs/tutorial/first-comparison.md",
    "docs/tutorial/campaign.md",
    "docs/how-to/trackers.md",
    "docs/tutorial/results-browser.md",
)
NO_INDEX = ("Could not find a version", "Failed to establish a new connection", "No matching distribution")


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block, in order: blank lines and whole-line comments left out, and a comment
    after a command (two spaces, then #) cut off, as it says what the command does rather than being part of it."""
    return [
        [
            line.split("  #")[0].strip()
            for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        for block in BASH_BLOCK.findall(text)
    ]


def fresh_clone(target: Path) -> Path:
    """`git clone` of this repository, with what the working tree changed (tracked or new, not ignored) laid over."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(target)], check=True, timeout=120)
    listed = subprocess.run(
        ["git", "diff", "--name-only", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    listed += subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in listed:
        source, copy = REPO / name, target / name
        if source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
        else:
            copy.unlink(missing_ok=True)
    return target


def newcomer_env(state: Path) -> dict[str, str]:
    """This shell as a newcomer has it: the same package index settings, but no virtual environment of ours on PATH,
    no mcu-arms or pytest settings, no terminal width."""
    ours = str(Path(sys.prefix))
    path = [entry for entry in os.environ["PATH"].split(os.pathsep) if not entry.startswith(ours)]
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "COLUMNS", "LINES")
    kept = {
        key: value
        for key, value in os.environ.items()
        if key not in dropped and not key.startswith(("MCU_", "PYTEST_", "_MCU_ARMS"))
    }
    return {**kept, "PATH": os.pathsep.join(path), "MCU_ARMS_STATE_DIR": str(state)}


def shell(command: str, clone: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout)


def row(out: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is `first` (a piped table keeps each row on one line)."""
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells[:1] == [first]:
            return cells
    raise AssertionError(f"no table row {first!r} in:\n{out}")


Example = Callable[[str, Path, dict[str, str]], None]


def check_two_arms(line: str, clone: Path, env: dict[str, str]) -> None:
    """Right after the first command, only demo_random runs: demo is skipped, its run having finished already."""
    done = shell(line, clone, env, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    assert row(done.stdout, "demo")[1] == "skipped"
    finished = row(done.stdout, "demo_random")
    assert finished[1] == "finished" and finished[-1] == "output/demo_random/episode_001/result.json", finished
    assert not (clone / "output" / "demo" / "episode_002").exists()


def check_compare(line: str, clone: Path, env: dict[str, str]) -> None:
    """ "comparable: differs only in agent", and demo.png drawn."""
    done = shell(line, clone, env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "comparable: differs only in agent" in done.stdout
    assert row(done.stdout, "agent")[1:] == ["scripted", "random"]
    assert (clone / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def check_milestones(line: str, clone: Path, env: dict[str, str]) -> None:
    """Each milestone with the step it landed on, None when not reached, from the latest run report."""
    done = shell(line, clone, env, timeout=60)
    assert done.returncode == 0, done.stderr
    milestones = ast.literal_eval(done.stdout.strip())
    report = json.loads((clone / "logs" / "demo_result.json").read_text())
    assert milestones == [(m["identity"], m["step"]) for m in report["milestones"]]
    assert milestones[0][0] == "mine_log" and isinstance(milestones[0][1], int)
    assert ("iron_ingot", None) in milestones and len(milestones) == 10


def check_view_extra(line: str, clone: Path, env: dict[str, str]) -> None:
    """The view extra: jinja2 and plotly, into the clone's .venv (its pip is first on PATH)."""
    done = shell(line, clone, env, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    imported = shell('python -c "import jinja2, plotly"', clone, env, timeout=60)
    assert imported.returncode == 0, imported.stderr


def check_view(line: str, clone: Path, env: dict[str, str]) -> None:
    """Prints http://127.0.0.1:PORT/, serves the comparison there, and Ctrl-C stops it (cleanly: exit 0)."""
    viewer = subprocess.Popen(
        ["bash", "-c", f"exec {line}"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        first = viewer.stdout.readline() if viewer.stdout else ""  # it prints the URL once it listens
        url = re.search(r"http://127\.0\.0\.1:\d+/", first)
        assert url, first + (viewer.stderr.read() if viewer.poll() is not None and viewer.stderr else "")
        with urllib.request.urlopen(url.group(0), timeout=60) as page:
            assert page.status == 200 and "demo_random" in page.read().decode("utf-8")
        viewer.send_signal(signal.SIGINT)  # our own child, by its pid (`exec` made the shell into mcu-arms)
        assert viewer.wait(timeout=60) == 0
    finally:
        if viewer.poll() is None:
            viewer.kill()
            viewer.wait(timeout=30)


def check_report(line: str, clone: Path, env: dict[str, str]) -> None:
    """The same pages as files: demo-report/index.html."""
    done = shell(line, clone, env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo_random" in (clone / "demo-report" / "index.html").read_text(encoding="utf-8")


CAMPAIGN_ARMS = ("demo", "demo_random")
CAMPAIGN_SEEDS = tuple(range(6))  # the template's: six paired seeds, the fewest an exact sign-flip test can resolve


def check_campaign_file(line: str, clone: Path, env: dict[str, str]) -> None:
    """campaigns/agents.toml, the template: demo against demo_random."""
    done = shell(line, clone, env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (clone / "campaigns" / "agents.toml").read_text() == (clone / "templates" / "campaign.toml").read_text()


def _episodes(clone: Path) -> dict[str, list[str]]:
    return {arm: sorted(p.name for p in (clone / "output" / arm).glob("episode_*")) for arm in CAMPAIGN_ARMS}


def check_campaign_dry_run(line: str, clone: Path, env: dict[str, str]) -> None:
    """Run / skip / retry per episode: all twelve would run (300 steps is a new experiment), and nothing starts."""
    before = _episodes(clone)
    done = shell(line, clone, env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = summary_rows(done.stdout)
    assert {label: will for label, (will, _) in rows.items()} == {
        f"{arm} s{seed}": "run" for arm in CAMPAIGN_ARMS for seed in CAMPAIGN_SEEDS
    }, done.stdout[-2000:]
    assert done.stdout.index("run --dry-run") < 200, "the summary comes first"
    assert _episodes(clone) == before


def _campaign_rows(out: str, seed_at: int) -> dict[tuple[str, int], list[str]]:
    rows = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells[:1] and cells[0] in CAMPAIGN_ARMS:
            rows[(cells[0], int(cells[seed_at]))] = cells
    return rows


def check_campaign_run(line: str, clone: Path, env: dict[str, str]) -> None:
    """Every (arm, seed) finished, a row each with its seed."""
    done = shell(line, clone, env, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _campaign_rows(done.stdout, seed_at=1)
    assert sorted(rows) == [(arm, seed) for arm in CAMPAIGN_ARMS for seed in CAMPAIGN_SEEDS], done.stdout
    assert all(cells[2] == "finished" and cells[4] == "300" for cells in rows.values()), rows


def check_campaign_status(line: str, clone: Path, env: dict[str, str]) -> None:
    """Each arm × seed of the campaign from its own episodes (not the demo's earlier 3000-step runs): all done."""
    done = shell(line, clone, env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "12 of 12 done" in done.stdout, done.stdout
    rows = _campaign_rows(done.stdout, seed_at=1)
    assert sorted(rows) == [(arm, seed) for arm in CAMPAIGN_ARMS for seed in CAMPAIGN_SEEDS], done.stdout
    assert all(cells[2] == "done" and cells[5] == "300/300" for cells in rows.values()), rows


def check_refusal(line: str, clone: Path, env: dict[str, str]) -> None:
    """Both arms now have two experiments (3000 and 300 steps) that differ only in agent: compare refuses, naming
    each candidate, and says how to choose."""
    done = shell(line, clone, env, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "more than one experiment of 'demo', 'demo_random'" in done.stderr, done.stderr
    for arm in CAMPAIGN_ARMS:
        assert f"  {arm}: experiment " in done.stderr and "steps = 300 (arm file: 3000)" in done.stderr
    assert "--experiment PREFIX" in done.stderr


def check_campaign_compare(line: str, clone: Path, env: dict[str, str]) -> None:
    """Intervals over n = 6, the verdict with its n and design, a PDF, and the tidy export."""
    done = shell(line, clone, env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "comparable: differs only in agent" in done.stdout
    assert "distinguishable from seed noise (paired, n = 6)" in done.stdout or "at n = 6 + 6" in done.stdout
    assert row(done.stdout, "replicates")[1:] == ["n = 6 (seeds 0, 1, 2, 3, 4, 5)"] * 2
    assert (clone / "agents.pdf").read_bytes()[:5] == b"%PDF-"
    with (clone / "agents" / "tidy.csv").open() as handle:
        scores = [r for r in csv.DictReader(handle) if r["metric"] == "score"]
    assert sorted((r["arm"], r["seed"]) for r in scores) == [(a, str(s)) for a in CAMPAIGN_ARMS for s in CAMPAIGN_SEEDS]
    again = shell(line, clone, env, timeout=600)
    assert again.returncode == 2 and "never written over" in again.stderr, again.stderr


def check_tracker_extras(line: str, clone: Path, env: dict[str, str]) -> None:
    """The mlflow and wandb extras, into the clone's .venv."""
    done = shell(line, clone, env, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    imported = shell('python -c "import mlflow, wandb"', clone, env, timeout=300)
    assert imported.returncode == 0, imported.stderr


def _compared_episodes(clone: Path, env: dict[str, str]) -> int:
    done = shell("mcu-arms compare campaigns/agents.toml --json", clone, env, timeout=600)
    return sum(len(arm["used"]) for arm in json.loads(done.stdout)["arms"])  # the episodes the analysis used


def check_to_mlflow(line: str, clone: Path, env: dict[str, str]) -> None:
    """Each compared episode and the comparison as runs of experiment `my_campaign` (the template's campaign name)
    in ./mlflow.db; a rerun adds none."""
    quiet = {**env, "MLFLOW_DISABLE_TELEMETRY": "true"}
    runs = _compared_episodes(clone, env) + 1
    done = shell(line, clone, quiet, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"mlflow: {runs} run(s) created, 0 updated, 0 unchanged in experiment 'my_campaign'" in done.stderr, (
        done.stderr
    )
    count = (
        "import mlflow; c = mlflow.tracking.MlflowClient('sqlite:///mlflow.db'); "
        "print(len(c.search_runs([c.get_experiment_by_name('my_campaign').experiment_id])))"
    )
    stored = shell(f'python -c "{count}"', clone, quiet, timeout=600)
    assert stored.returncode == 0 and stored.stdout.strip() == str(runs), stored.stdout + stored.stderr
    again = shell(line, clone, quiet, timeout=900)
    assert f"0 run(s) created, 0 updated, {runs} unchanged" in again.stderr, again.stderr


def check_to_wandb(line: str, clone: Path, env: dict[str, str]) -> None:
    """One W&B offline run per compared episode and one for the comparison, in ./wandb/."""
    runs = _compared_episodes(clone, env) + 1
    done = shell(line, clone, env, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"wandb: {runs} run(s) created" in done.stderr, done.stderr
    assert len(list((clone / "wandb").glob("offline-run-*"))) == runs


def _summary_ends(out: str, arms: int) -> int:
    """The line the one-line-per-arm summary table closes on; it must come first: its title, its top border, its
    header, the rule under it, a line per arm, its bottom border."""
    lines = out.splitlines()
    closes = next(index for index, line in enumerate(lines) if line.startswith("└"))
    assert closes == 4 + arms, "\n".join(lines[: closes + 1])
    return closes


def check_summary_first_and_a_never_run_arm(clone: Path, env: dict[str, str]) -> None:
    """Not README lines, checked where the README leaves the user (demo finished, demo_random never run), reusing
    that state: `plan --dry-run` and `run --dry-run` open with one line per arm (will, why) before anything else, and
    `compare` with an arm that never ran is no success (exit 1)."""
    arms = sorted(path.stem for path in (clone / "arms").glob("*.toml"))
    plan = shell("mcu-arms plan --dry-run", clone, env, timeout=300)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    _summary_ends(plan.stdout, len(arms))
    planned = summary_rows(plan.stdout)
    assert sorted(planned) == arms and planned["demo"][0] == planned["demo_random"][0] == "ready", planned
    dry = shell("mcu-arms run --arm demo --arm demo_random --dry-run", clone, env, timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    _summary_ends(dry.stdout, 2)
    will = summary_rows(dry.stdout)
    assert will["demo"][0] == "skip" and will["demo_random"][0] == "run", will
    never = shell("mcu-arms compare demo demo_random", clone, env, timeout=300)
    assert never.returncode == 1, never.stdout + never.stderr
    assert "NO RESULT for demo_random" in never.stdout


def check_a_user_stop_is_success(clone: Path, env: dict[str, str]) -> None:
    """Not a README line: a run whose only arm a user stops with `mcu-arms stop` ended as asked: exit 0, saying who
    stopped it (a long run of demo_random on a seed of its own, started last so that no check above sees it)."""
    before = {path.name for path in (clone / "output" / "demo_random").glob("episode_*")}
    run = subprocess.Popen(
        ["bash", "-c", "exec mcu-arms run --arm demo_random --seeds 99 --steps 100000"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def started() -> bool:
            new = sorted({path.name for path in (clone / "output" / "demo_random").glob("episode_*")} - before)
            return bool(new) and _running(clone, new[-1])

        wait_for(started, "the stopped-by-the-user run to log steps", timeout=300, interval=0.5)
        stopped = shell("mcu-arms stop --arm demo_random", clone, env, timeout=120)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        output, _ = run.communicate(timeout=120)
        assert run.returncode == 0, output
        assert "demo_random stopped as asked, by mcu-arms stop (pid" in output, output
    finally:
        if run.poll() is None:
            run.kill()  # our own child, by its pid
            run.wait(timeout=30)


def _running(clone: Path, episode: str) -> bool:
    """Whether that episode's report says started, with its client up and a step logged."""
    green = clone / "output" / "demo_random" / episode / "green"
    try:
        data = json.loads((clone / "output" / "demo_random" / episode / "result.json").read_text())
    except (OSError, ValueError):
        return False
    logged = any(path.stat().st_size for path in green.glob("*/steps.jsonl")) if green.is_dir() else False
    return data["status"] == "started" and "client" in data["processes"] and logged


EXAMPLES: dict[str, Example] = {
    "mcu-arms run --arm demo --arm demo_random": check_two_arms,
    "mcu-arms compare arms/demo*.toml --plot demo.png": check_compare,
    "python3 -c \"import json; print([(m['identity'], m['step']) for m in "
    "json.load(open('logs/demo_result.json'))['milestones']])\"": check_milestones,
    "mkdir -p campaigns && cp templates/campaign.toml campaigns/agents.toml": check_campaign_file,
    "mcu-arms run campaigns/agents.toml --steps 300 --dry-run": check_campaign_dry_run,
    "mcu-arms run campaigns/agents.toml --steps 300": check_campaign_run,
    "mcu-arms status --campaign campaigns/agents.toml": check_campaign_status,
    "mcu-arms compare campaigns/agents.toml --plot agents.pdf --export agents/": check_campaign_compare,
    "mcu-arms compare demo demo_random": check_refusal,
    "pip install -e '.[mlflow,wandb]'": check_tracker_extras,
    "mcu-arms compare campaigns/agents.toml --to mlflow": check_to_mlflow,
    "mcu-arms compare campaigns/agents.toml --to wandb": check_to_wandb,
    "pip install -e '.[view]'": check_view_extra,
    "mcu-arms view campaigns/agents.toml": check_view,
    "mcu-arms report campaigns/agents.toml --html demo-report/": check_report,
}


@pytest.mark.slow
@pytest.mark.timeout(2700)
@pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash")
def test_a_fresh_clone_does_what_the_readme_says_from_the_top(tmp_path: Path) -> None:
    setup, *readme_blocks = bash_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(setup) == 2, f"the README's first block should hold its two commands: {setup}"
    clone = fresh_clone(tmp_path / "clone")
    env = newcomer_env(tmp_path / "state")

    first, second = setup
    demo = shell(first, clone, env, timeout=1500)
    if demo.returncode != 0 and any(sign in demo.stderr for sign in NO_INDEX):
        pytest.skip(f"pip could not reach a package index: {demo.stderr.strip().splitlines()[-1]}")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    shown = row(demo.stdout, "demo")  # the README: finished, 90 / 100 (its perfect score), 9/10 (9 reachable)
    assert shown[1:5] == ["finished", "90 / 100", "3000", "9/10 (9 reachable)"], shown
    assert "iron_ingot has no Crafter analogue" in demo.stdout

    assert second.endswith(PYTEST), f"the second command should end by running the tests: {second}"
    tests = shell(f"{second} --collect-only -q", clone, env, timeout=900)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert re.search(r"^\d{3,} tests collected", tests.stdout, re.MULTILINE), tests.stdout[-2000:]

    on_path = {**env, "PATH": f"{clone / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"}
    shortcut = [line for block in readme_blocks for line in block]
    examples = documented_examples()
    unknown = [line for line in shortcut + examples if line not in EXAMPLES]
    assert not unknown, f"examples this test does not know (say here what the page says they do): {unknown}"
    assert examples == list(EXAMPLES), "the documentation's examples changed order"
    assert is_in_order(shortcut, examples), f"the README's first comparison left the tutorial's order: {shortcut}"
    check_summary_first_and_a_never_run_arm(clone, on_path)
    for line in examples:
        EXAMPLES[line](line, clone, on_path)
    check_a_user_stop_is_success(clone, on_path)


def documented_examples() -> list[str]:
    """The examples of DOC_PAGES, in order."""
    return [line for page in DOC_PAGES for block in bash_blocks((REPO / page).read_text("utf-8")) for line in block]


def is_in_order(few: list[str], many: list[str]) -> bool:
    """Whether every line of `few` is in `many`, in the same order."""
    rest = iter(many)
    return all(line in rest for line in few)


def test_the_readme_shortcut_is_a_path_through_the_tutorial() -> None:
    """Fast, without a clone: the README's first comparison and the pages' examples are known, in order."""
    _, *readme_blocks = bash_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    shortcut = [line for block in readme_blocks for line in block]
    examples = documented_examples()
    assert 0 < len(shortcut) <= 6, shortcut
    assert examples == list(EXAMPLES)
    assert is_in_order(shortcut, examples), shortcut
