"""What an episode costs besides its steps: runs a copy of arms/demo.toml at 10, 100 and 1000 steps (3 runs each, the
lengths taken in turn round by round, so that a host slowing down weighs on each), fits wall = fixed + per-step x
steps, and splits the fixed part by phase from what each run records itself (the supervisor's log, the green's log,
its step records). Target: fixed <= 1.5 s on a quiet 2-core machine. Then a campaign of 2 arms x 20 seeds x 30 steps
at --max-parallel 2: its wall against (the sum of its episodes' step time / 2). Target: <= 1.5x.

    python tests/bench/bench_episode_cost.py [--steps 10 100 1000] [--repeats 3] [--seeds 20] [--no-campaign]

Phases, each from the run's own records (ISO stamps of logs/mcu-arms.log and logs/green.log, `t` of the step
records; the command's start and end from this script):
  start-up   the command starts -> `state starting` (imports, plan, episode prepared)
  servers    `state starting` -> `state ready` (green and purple started, both cards answer)
  client     `state ready` -> the green's `Starting MCU evaluation` (client started, first message)
  reset      -> the first step record (the simulator's reset, the purple's first answer)
  steps      first -> last step record (the per-step part)
  result     last step -> `client exited` (scoring, evaluation.json, the client's end)
  teardown   `client exited` -> `state finished` (children stopped, report written)
  exit       `state finished` -> the command has exited
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXED_TARGET_S = 1.5
PACKING_TARGET = 1.5
PARALLEL = 2
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) (.*)$")
PHASES = ("start-up", "servers", "client", "reset", "steps", "result", "teardown", "exit")

CAMPAIGN = """name = "cost"
seeds = [{seeds}]
max_parallel = {parallel}

[baseline]
arm = "demo_cost"

[[variants]]
name = "random_cost"
differs_in = ["agent"]
agent = "random"
"""


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _stamped(log: Path) -> list[tuple[float, str]]:
    found = []
    for line in log.read_text(encoding="utf-8").splitlines():
        match = STAMP.match(line)
        if match:
            found.append((_epoch(match.group(1)), match.group(2)))
    return found


def _first(lines: list[tuple[float, str]], prefix: str) -> float | None:
    return next((at for at, text in lines if text.startswith(prefix)), None)


def _step_times(episode: Path) -> list[float]:
    times = []
    for steps in sorted((episode / "green").glob("*/steps.jsonl")):
        times += [json.loads(line)["t"] for line in steps.read_text().splitlines() if line.strip()]
    return times


def phases_of(episode: Path, began: float, ended: float) -> dict[str, float | None]:
    """Each phase's seconds; None where a mark is not recorded (a version that does not log it)."""
    supervisor = _stamped(episode / "logs" / "mcu-arms.log")
    green = _stamped(episode / "logs" / "green.log")
    steps = _step_times(episode)
    marks = [
        began,
        _first(supervisor, "state starting"),
        _first(supervisor, "state ready"),
        _first(green, "Starting MCU evaluation"),
        steps[0],
        steps[-1],
        _first(supervisor, "client exited"),
        _first(supervisor, "state finished"),
        ended,
    ]
    return {
        name: None if marks[index] is None or marks[index + 1] is None else marks[index + 1] - marks[index]  # type: ignore[operator]
        for index, name in enumerate(PHASES)
    }


def _demo_arm(steps: int) -> str:
    text = (ROOT / "arms" / "demo.toml").read_text(encoding="utf-8")
    return re.sub(r"(?m)^steps = \d+$", f"steps = {steps}", text)


def _env(scratch: Path) -> dict[str, str]:
    return {**os.environ, "MCU_ARMS_STATE_DIR": str(scratch / "state"), "COLUMNS": "200"}


def one_episode(scratch: Path, steps: int, index: int) -> tuple[float, dict[str, float | None]]:
    project = scratch / f"episode-{steps}-{index}"
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "cost.toml").write_text(_demo_arm(steps))
    began = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--arm", "cost"],
        cwd=project,
        env=_env(scratch),
        capture_output=True,
    )
    ended = time.time()
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {done.stdout.decode()[-2000:]}")
    return ended - began, phases_of(project / "output" / "cost" / "episode_001", began, ended)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares: wall = fixed + per_step * steps."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return mean_y - slope * mean_x, slope


def campaign(scratch: Path, seeds: int, steps: int) -> None:
    project = scratch / "campaign"
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "demo_cost.toml").write_text(_demo_arm(steps))
    (project / "campaigns").mkdir()
    (project / "campaigns" / "cost.toml").write_text(
        CAMPAIGN.format(seeds=", ".join(str(seed) for seed in range(seeds)), parallel=PARALLEL)
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "campaigns/cost.toml", "--max-parallel", str(PARALLEL)],
        cwd=project,
        env=_env(scratch),
        capture_output=True,
    )
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"the campaign failed ({done.returncode}): {done.stdout.decode()[-2000:]}")
    episodes = sorted((project / "output").glob("*/episode_*"))
    statuses = sorted({json.loads((episode / "result.json").read_text())["status"] for episode in episodes})
    step_time = 0.0
    for episode in episodes:
        times = _step_times(episode)
        step_time += times[-1] - times[0] if times else 0.0
    packed = step_time / PARALLEL
    print(
        f"\ncampaign: {len(episodes)} episodes ({', '.join(statuses)}; exit {done.returncode}), {steps} steps each, "
        f"--max-parallel {PARALLEL}: wall {wall:.1f} s; sum of the episodes' step time {step_time:.1f} s, / {PARALLEL} "
        f"= {packed:.1f} s"
    )
    print(f"ratio wall / (step time / {PARALLEL}) = {wall / packed:.2f}  (target <= {PACKING_TARGET})")
    print("an episode's phases in the campaign (mean over its episodes; start-up and exit are the run's, once):")
    parts = [phases_of(episode, 0.0, 0.0) for episode in episodes]
    for name in PHASES[1:-1]:
        known = [value for part in parts if (value := part[name]) is not None]
        print(f"  {name:9s} {_seconds(sum(known) / len(known) if known else None)} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=20, help="campaign seeds per arm")
    parser.add_argument("--campaign-steps", type=int, default=30)
    parser.add_argument("--no-campaign", action="store_true")
    args = parser.parse_args()
    # Start-up is imports: measured with the bytecode an installed tree has after its first run, even where
    # PYTHONDONTWRITEBYTECODE kept it from being written (then every run would compile what changed since).
    compileall.compile_dir(ROOT / "mcu_arms", quiet=1)
    print(f"load before: {os.getloadavg()[0]:.2f} (1 min), cpus {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        walls: list[tuple[int, float]] = []
        phases: list[dict[str, float | None]] = []
        for index in range(args.repeats):  # round by round, so that a host slowing down weighs on every length
            for steps in args.steps:
                wall, parts = one_episode(scratch, steps, index)
                walls.append((steps, wall))
                phases.append(parts)
                shown = "  ".join(f"{name} {_seconds(parts[name])}" for name in PHASES)
                print(f"{steps:5d} steps: wall {wall:6.2f} s  |  {shown}")
        fixed, per_step = fit(walls)
        print(f"\nfit: wall = {fixed:.2f} s + {1000 * per_step:.2f} ms x steps  (fixed target <= {FIXED_TARGET_S} s)")
        print("fixed cost by phase (mean over runs):")
        for name in PHASES:
            known = [value for part in phases if (value := part[name]) is not None]
            if name != "steps":
                print(f"  {name:9s} {_seconds(sum(known) / len(known) if known else None)} s")
        if not args.no_campaign:
            campaign(scratch, args.seeds, args.campaign_steps)
        version = subprocess.run([sys.executable, "-m", "mcu_arms", "--version"], capture_output=True)
        began = time.monotonic()
        for _ in range(5):
            subprocess.run([sys.executable, "-m", "mcu_arms", "--version"], capture_output=True, check=True)
        print(f"\n`mcu-arms --version`: {(time.monotonic() - began) / 5:.3f} s ({version.stdout.decode().strip()})")
    print(f"load after: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
