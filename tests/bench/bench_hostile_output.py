"""Readers against output/ files far past their bounds (issue 43): each refused fast and in bounded memory.

    python tests/bench/bench_hostile_output.py [--gigabytes 1]

Copies the tracking fixture (two arms, two episodes each), then makes one episode's result.json GIGABYTES long and
one step log hold a line GIGABYTES long (both sparse files: nothing is written). Each reader runs as its own
`python -m mcu_arms` process; printed per command: its wall time, its peak RSS (wait4), and the target. Also timed
in-process: the refusal itself (reading the report, scanning the log), against the target of one second.
Targets: every command's peak RSS <= 200 MB; each refusal <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tracking_support import FIXTURE  # noqa: E402

from mcu_arms.contracts.errors import UserError  # noqa: E402
from mcu_arms.contracts.steps import JsonlScan, StepRecord  # noqa: E402
from mcu_arms.layout import RunDir, read_episode_report  # noqa: E402

RSS_TARGET_MB = 200
REFUSAL_TARGET_S = 1.0


def _prepare(root: Path, size: int) -> tuple[Path, Path, Path]:
    project = root / "project"
    shutil.copytree(FIXTURE, project)
    report = project / "output/scripted_arm/episode_002/result.json"
    with report.open("r+b") as handle:
        handle.truncate(size)
    log = project / "output/random_arm/episode_001/green/collect_wood/steps.jsonl"
    log.parent.mkdir(parents=True)
    step = {"step": 0, "t": 1.0, "received": "{}", "applied": {}, "agent_ms": 1.0, "sim_ms": 1.0}
    with log.open("wb") as handle:
        handle.write(json.dumps(step).encode() + b"\n")
        handle.truncate(handle.tell() + size)
    return project, report, log


def _command(project: Path, *args: str) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of `python -m mcu_arms ARGS` in `project`."""
    env = {**os.environ, "MCU_ARMS_STATE_DIR": str(project / "state"), "COLUMNS": "200"}
    began = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", *args],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    return time.monotonic() - began, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def _refusal_s(read: object) -> float:
    began = time.monotonic()
    try:
        read()  # type: ignore[operator]
    except UserError:
        return time.monotonic() - began
    raise AssertionError("not refused")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gigabytes", type=float, default=1.0)
    options = parser.parse_args()
    size = int(options.gigabytes * (1 << 30))
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as folder:
        project, report, log = _prepare(Path(folder), size)
        refused = _refusal_s(lambda: read_episode_report(RunDir(report.parent)))
        print(f"refusing the {options.gigabytes:g} GB result.json: {refused * 1000:.1f} ms (target <= 1 s)")
        refused = _refusal_s(lambda: list(JsonlScan(log, StepRecord)))
        print(f"refusing the {options.gigabytes:g} GB step-log line: {refused * 1000:.1f} ms (target <= 1 s)")
        commands = [
            ("status", ["status"]),
            ("compare --json", ["compare", "campaigns/tiny.toml", "--json"]),
            ("compare --export", ["compare", "campaigns/tiny.toml", "--export", "tables"]),
            ("report --html", ["report", "--html", "bundle", "scripted_arm", "random_arm"]),
        ]
        worst = 0.0
        for name, args in commands:
            wall, rss, code = _command(project, *args)
            worst = max(worst, rss)
            print(f"{name:18} exit {code}  {wall:6.2f} s  peak RSS {rss:6.1f} MB (target <= {RSS_TARGET_MB} MB)")
        print(f"worst peak RSS {worst:.1f} MB: {'within' if worst <= RSS_TARGET_MB else 'OVER'} the target")


if __name__ == "__main__":
    main()
