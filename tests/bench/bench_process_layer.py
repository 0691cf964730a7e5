"""The process layer at the episode lengths this tool exists for: the demo arm (3,000 steps) alone, and a campaign of
2 arms x 4 seeds x 3,000 steps at --max-parallel 2, each child started by exec. With --baseline TREE (a checkout of
an earlier commit, e.g. a `git worktree` of it), each round runs the baseline and then this tree, alternating, so that
a host slowing down weighs on both.

    python tests/bench/bench_process_layer.py [--baseline TREE] [--rounds 1] [--steps 3000] [--seeds 4]

Printed as ratios: the single episode's wall against the baseline's (target <= 1.05x), and each tree's campaign wall
against (the sum of its episodes' step time / 2) (target <= 1.10x). The load average is printed before and after:
a machine shared with other work says so there.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_episode_cost import CAMPAIGN, PARALLEL, ROOT, _demo_arm, _step_times

SINGLE_TARGET = 1.05
CAMPAIGN_TARGET = 1.10


def _run(tree: Path, project: Path, scratch: Path, *args: str) -> float:
    """`mcu-arms ARGS` in `project`, imported from `tree`; its wall in seconds."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "MCU_ARMS_STATE_DIR": str(scratch / "state"),
        "COLUMNS": "200",
    }
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mcu_arms", *args], cwd=project, env=env, capture_output=True)
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"{tree}: `mcu-arms {' '.join(args)}` failed ({done.returncode}): {done.stdout[-2000:]!r}")
    return wall


def single(tree: Path, scratch: Path, steps: int, label: str) -> float:
    project = scratch / f"single-{label}"
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "demo.toml").write_text(_demo_arm(steps))
    return _run(tree, project, scratch, "run", "--arm", "demo")


def campaign(tree: Path, scratch: Path, steps: int, seeds: int, label: str) -> tuple[float, float]:
    """The campaign's wall and the sum of its episodes' step time (first to last step record)."""
    project = scratch / f"campaign-{label}"
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "demo_cost.toml").write_text(_demo_arm(steps))
    (project / "campaigns").mkdir()
    (project / "campaigns" / "cost.toml").write_text(
        CAMPAIGN.format(seeds=", ".join(str(seed) for seed in range(seeds)), parallel=PARALLEL)
    )
    wall = _run(tree, project, scratch, "run", "campaigns/cost.toml", "--max-parallel", str(PARALLEL))
    step_time = 0.0
    for episode in sorted((project / "output").glob("*/episode_*")):
        times = _step_times(episode)
        step_time += times[-1] - times[0] if times else 0.0
    return wall, step_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="an earlier tree to alternate with")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=4, help="campaign seeds per arm")
    parser.add_argument("--no-campaign", action="store_true")
    args = parser.parse_args()
    trees = {"this": ROOT} if args.baseline is None else {"before": args.baseline.resolve(), "after": ROOT}
    for tree in trees.values():  # the bytecode an installed tree has after its first run
        compileall.compile_dir(tree / "mcu_arms", quiet=1)
    print(f"load before: {os.getloadavg()[0]:.2f} (1 min), cpus {os.cpu_count()}")
    singles: dict[str, list[float]] = {name: [] for name in trees}
    packing: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for index in range(args.rounds):
            for name, tree in trees.items():
                wall = single(tree, scratch, args.steps, f"{name}-{index}")
                singles[name].append(wall)
                print(f"round {index + 1} {name:6s} single episode ({args.steps} steps): wall {wall:.1f} s", flush=True)
            if args.no_campaign:
                continue
            for name, tree in trees.items():
                wall, step_time = campaign(tree, scratch, args.steps, args.seeds, f"{name}-{index}")
                packing[name].append(wall / (step_time / PARALLEL))
                print(
                    f"round {index + 1} {name:6s} campaign 2 arms x {args.seeds} seeds: wall {wall:.1f} s, step time "
                    f"{step_time:.1f} s, wall / (step time / {PARALLEL}) = {packing[name][-1]:.2f}",
                    flush=True,
                )
    if "before" in singles:
        ratio = statistics.median(singles["after"]) / statistics.median(singles["before"])
        print(f"\nsingle episode, after / before (medians): {ratio:.3f}  (target <= {SINGLE_TARGET})")
    for name, ratios in packing.items():
        if ratios:
            shown = f"{statistics.median(ratios):.3f}  (target <= {CAMPAIGN_TARGET})"
            print(f"campaign ({name}), wall / (step time / {PARALLEL}) (median): {shown}")
    print(f"load after: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
