"""What supervising costs: the `mcu-arms run` process's CPU (% of one core) while an embedded arm runs, and the
resident memory of that arm's green + purple. Targets: < 2 % and < 400 MB together.

    python tests/bench/bench_supervisor.py [--steps 3000] [--agent random]

Measured in one run, between the client starting and the evaluation ending (start-up imports are not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

CPU_TARGET_PERCENT = 2.0
RSS_TARGET_MB = 400.0
SAMPLE_S = 0.5

ARM = """agent = "{agent}"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = {steps}
step_timeout = 30
save_frames = false

[ports]
green = "auto"
purple = "auto"
"""


def _tree_rss_mb(pid: int, create_time: float) -> float:
    try:
        root = psutil.Process(pid)
        if abs(root.create_time() - create_time) > 0.01:
            return 0.0
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20
    except psutil.Error:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--agent", default="random")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        (project / "arms").mkdir(parents=True)
        (project / "arms" / "bench.toml").write_text(ARM.format(agent=args.agent, steps=args.steps))
        env = {**os.environ, "MCU_ARMS_STATE_DIR": str(Path(tmp) / "state")}
        run = subprocess.Popen(
            [sys.executable, "-m", "mcu_arms", "run", "--arm", "bench"],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        supervisor = psutil.Process(run.pid)
        result = project / "output" / "bench" / "episode_001" / "result.json"
        pause = threading.Event()
        report: dict = {}
        while run.poll() is None:
            try:
                report = json.loads(result.read_text())
            except (OSError, ValueError):
                report = {}
            if "client" in report.get("processes", {}):
                break
            pause.wait(0.1)
        if run.poll() is not None:
            raise SystemExit(f"the run ended before its client started (exit {run.returncode})")

        servers = [(report["processes"][r]["pid"], report["processes"][r]["create_time"]) for r in ("green", "purple")]
        cpu_start, wall_start = supervisor.cpu_times(), time.monotonic()
        cpu_end, wall_end = cpu_start, wall_start
        peak_rss_mb = 0.0
        while run.poll() is None:
            try:
                cpu_end, wall_end = supervisor.cpu_times(), time.monotonic()
            except psutil.Error:
                break
            peak_rss_mb = max(peak_rss_mb, sum(_tree_rss_mb(pid, created) for pid, created in servers))
            pause.wait(SAMPLE_S)
        run.wait()
        final = json.loads(result.read_text())

    used = (cpu_end.user + cpu_end.system) - (cpu_start.user + cpu_start.system)
    wall = wall_end - wall_start
    cpu_percent = 100.0 * used / wall if wall > 0 else float("nan")
    print(
        f"arm: {args.agent} agent, {final.get('steps_run')} steps, status {final.get('status')}, {wall:.1f} s watched"
    )
    print(
        f"supervisor CPU: {cpu_percent:.2f} % of one core (target < {CPU_TARGET_PERCENT:g} %)"
        f" -> ratio to target {cpu_percent / CPU_TARGET_PERCENT:.2f}"
    )
    print(
        f"green + purple peak RSS: {peak_rss_mb:.0f} MB (target < {RSS_TARGET_MB:g} MB)"
        f" -> ratio to target {peak_rss_mb / RSS_TARGET_MB:.2f}"
    )


if __name__ == "__main__":
    main()
