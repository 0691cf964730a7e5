"""A campaign of 3 arms x 3 seeds on the embedded simulator with --max-parallel 2: how close it comes to perfect
packing, and what supervising 9 episodes costs. Targets: wall time within 1.15x of (the sum of its episodes' own
wall times / 2), and the supervising `mcu-arms run` under 2 % of one core.

    python tests/bench/bench_campaign.py [--steps 600]

Both ratios are measured in one run: the episodes' wall times come from their own reports.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run_helpers import write_arm  # the tests' helpers, as the other benches use them

PACKING_TARGET = 1.15
CPU_TARGET_PERCENT = 2.0
PARALLEL = 2

CAMPAIGN = """name = "bench"
seeds = [0, 1, 2]
max_parallel = {parallel}

[baseline]
arm = "scripted_b"

[[variants]]
name = "random_b"
differs_in = ["agent"]
agent = "random"

[[variants]]
name = "noop_b"
differs_in = ["agent"]
agent = "noop"
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "project"
        write_arm(project, "scripted_b", agent="scripted", steps=args.steps, step_timeout=30)
        (project / "campaigns").mkdir()
        (project / "campaigns" / "bench.toml").write_text(CAMPAIGN.format(parallel=PARALLEL))
        env = {**os.environ, "MCU_ARMS_STATE_DIR": str(Path(scratch) / "state")}
        started = time.monotonic()
        run = subprocess.Popen(
            [sys.executable, "-m", "mcu_arms", "run", "campaigns/bench.toml"],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        supervisor = psutil.Process(run.pid)
        cpu = first_cpu = supervisor.cpu_times()
        first_at = None  # start-up imports are not supervision: measure from the first episode's report on
        while run.poll() is None:
            try:
                cpu = supervisor.cpu_times()
            except psutil.Error:
                break
            if first_at is None and any((project / "output").glob("*/episode_*/result.json")):
                first_at, first_cpu = time.monotonic(), cpu
            time.sleep(0.2)
        ended = time.monotonic()
        wall = ended - started
        reports = [json.loads(p.read_text()) for p in (project / "output").glob("*/episode_*/result.json")]
    episodes_wall = sum(report["wall_s"] for report in reports)
    packed = episodes_wall / PARALLEL
    supervised = ended - (first_at or started)
    cpu_percent = 100.0 * (cpu.user + cpu.system - first_cpu.user - first_cpu.system) / supervised
    statuses = sorted({report["status"] for report in reports})
    print(
        f"{len(reports)} episodes ({', '.join(statuses)}), {args.steps} steps each, --max-parallel {PARALLEL}, "
        f"cpus {os.cpu_count()}"
    )
    print(f"campaign wall {wall:.1f} s; sum of episode walls {episodes_wall:.1f} s; / {PARALLEL} = {packed:.1f} s")
    print(f"ratio campaign / perfect packing = {wall / packed:.2f}  (target <= {PACKING_TARGET})")
    print(f"supervisor CPU {cpu_percent:.2f} % of one core while supervising  (target < {CPU_TARGET_PERCENT} %)")


if __name__ == "__main__":
    main()
