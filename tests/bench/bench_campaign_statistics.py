"""Issue 46's checks on real campaigns (embedded simulator, `scripted` against `random` and `noop`), each compared
through the CLI as a researcher would, printing what it found and exiting 1 when a check fails:

1. 3 + 3 seeds: no milestone p below the exact minimum of 3 paired seeds (2 / 2^3 = 0.25), and the score not called
   distinguishable (no 3-seed test can reach 0.05);
2. 6 seeds, the variant's last seed interrupted (Ctrl-C to the run this script started, while that episode runs): the
   comparison stays paired over the 5 seeds both finished, and the text, --json, --csv and the HTML page name the
   excluded seed and why;
3. 2 variants with the template's seeds for 2 variants (7): both resolve, and compare exits 0.

    python tests/bench/bench_campaign_statistics.py [--steps 600] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run_helpers import cli_env, write_arm  # noqa: E402 - the tests' helpers, as the other benches use them

from mcu_arms.contracts.errors import UserError  # noqa: E402 - after the sys.path line
from mcu_arms.contracts.run_report import read_report  # noqa: E402 - after the sys.path line

MILESTONE_MINIMUM_3 = 2 / 2**3
TEMPLATE_SEEDS_2_VARIANTS = 7


def _campaign(project: Path, name: str, seeds: int, variants: list[str]) -> None:
    lines = [f'name = "{name}"', f"seeds = {list(range(seeds))}", "", "[baseline]", 'arm = "scripted"']
    for agent in variants:
        lines += ["", "[[variants]]", f'name = "{agent}"', 'differs_in = ["agent"]', f'agent = "{agent}"']
    (project / "campaigns").mkdir(exist_ok=True)
    (project / "campaigns" / f"{name}.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _mcu_arms(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", *args], cwd=project, env=env, capture_output=True, text=True, timeout=3600
    )


def _project(root: Path, name: str, steps: int) -> tuple[Path, dict[str, str]]:
    project = root / name
    project.mkdir(parents=True)
    write_arm(project, "scripted", agent="scripted", steps=steps)
    return project, cli_env(root / f"{name}-state")


def three_and_three(root: Path, steps: int) -> list[str]:
    project, env = _project(root, "three", steps)
    _campaign(project, "three", 3, ["random"])
    assert _mcu_arms(project, env, "run", "campaigns/three.toml", "--max-parallel", "2").returncode == 0
    result = json.loads(_mcu_arms(project, env, "compare", "campaigns/three.toml", "--json").stdout)
    difference = result["differences"][0]
    milestones = [(line["metric"], line["p"]) for line in difference["milestone_steps"]]
    lowest = min(p for _, p in milestones if p is not None)
    problems = [] if lowest >= MILESTONE_MINIMUM_3 - 1e-12 else [f"a milestone p {lowest} below {MILESTONE_MINIMUM_3}"]
    if difference["score"]["verdict"] == "distinguishable":
        problems.append("3 + 3 called distinguishable")
    print(f"1. 3 + 3: {len(milestones)} milestone tests, lowest p {lowest:.3g} (exact minimum {MILESTONE_MINIMUM_3});")
    print(f"   {difference['score']['text']}")
    return problems


def _episode_of(output: Path, arm: str, seed: int) -> Path | None:
    for report in sorted((output / arm).glob("episode_*/result.json")):
        try:
            if read_report(report).settings.seed == seed:
                return report
        except (OSError, UserError):
            continue  # being written
    return None


def interrupted_seed(root: Path, steps: int) -> list[str]:
    project, env = _project(root, "six", steps)
    _campaign(project, "six", 6, ["random"])
    run = subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", "run", "campaigns/six.toml", "--max-parallel", "1"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while _episode_of(project / "output", "random", 5) is None and run.poll() is None:
        time.sleep(0.2)  # a script watching a real run, not a test's synchronisation
    run.send_signal(signal.SIGINT)  # this script's own child: the run stops its own processes
    run.wait(timeout=300)
    report = _episode_of(project / "output", "random", 5)
    status = read_report(report).status if report else "not run"
    text = _mcu_arms(project, env, "compare", "campaigns/six.toml").stdout
    result = json.loads(_mcu_arms(project, env, "compare", "campaigns/six.toml", "--json").stdout)
    csv_text = _mcu_arms(project, env, "compare", "campaigns/six.toml", "--csv").stdout
    bundle = root / "six-html"
    _mcu_arms(project, env, "report", "campaigns/six.toml", "--html", str(bundle))
    pages = " ".join(page.read_text(encoding="utf-8") for page in bundle.glob("**/*.html"))
    pairing = result["differences"][0]["pairing"]
    excluded = [(seed["seed"], seed["arm"], seed["cause"]) for seed in pairing["excluded"]]
    problems = []
    if status != "interrupted":
        problems.append(f"the variant's seed 5 ended {status}, not interrupted")
    if pairing["design"] != "paired" or pairing["seeds"] != [0, 1, 2, 3, 4]:
        problems.append(f"pairing {pairing['design']} over {pairing['seeds']}")
    if excluded != [(5, "random", "interrupted")]:
        problems.append(f"excluded {excluded}")
    views = {
        "text": "seed 5" in " ".join(text.split()),
        "csv": "excluded_seed:5:random:interrupted" in csv_text,
        "html": "seed 5" in pages,
    }
    problems += [f"the {view} does not name seed 5" for view, named in views.items() if not named]
    print(
        f"2. 6 seeds, random's seed 5 {status}: {pairing['design']} over seeds {pairing['seeds']}; excluded {excluded};"
    )
    print(f"   named in: {', '.join(view for view, named in views.items() if named)}")
    return problems


def two_variants(root: Path, steps: int) -> list[str]:
    project, env = _project(root, "two", steps)
    _campaign(project, "two", TEMPLATE_SEEDS_2_VARIANTS, ["random", "noop"])
    assert _mcu_arms(project, env, "run", "campaigns/two.toml", "--max-parallel", "2").returncode == 0
    compared = _mcu_arms(project, env, "compare", "campaigns/two.toml", "--json")
    result = json.loads(compared.stdout)
    verdicts = {line["arm"]: line["score"]["verdict"] for line in result["differences"]}
    problems = [] if compared.returncode == 0 else [f"compare exited {compared.returncode}"]
    problems += [f"{arm}: {verdict}" for arm, verdict in verdicts.items() if verdict != "distinguishable"]
    print(f"3. 2 variants, {TEMPLATE_SEEDS_2_VARIANTS} seeds: compare exit {compared.returncode}; {verdicts}")
    for line in result["differences"]:
        print(f"   {line['score']['text']}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="steps per episode")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep it")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        os.environ.pop("MCU_ARMS_OUTPUT_DIR", None)
        problems = (
            three_and_three(root, args.steps) + interrupted_seed(root, args.steps) + two_variants(root, args.steps)
        )
    print(f"({time.perf_counter() - started:.0f} s)")
    for problem in problems:
        print(f"FAILED: {problem}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
