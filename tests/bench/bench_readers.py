"""The readers against their floor (issue 33): each figure printed with its target and its ratio to a bare read.

    python tests/bench/bench_readers.py [--seeds 40] [--episodes 80] [--steps 3000] [--repeats 5]

- statistics: `analyse` (the Analysis every view renders) over 2 arms x SEEDS seeds, against reading the same reports
  with json.loads; target <= 50 ms at 40 seeds.
- view index: a second index request with nothing changed (`view`'s server rebuilds its Site on every index request:
  the cached Analysis read back, then the page rendered); target <= 50 ms.
- export: `compare --export` of EPISODES x STEPS steps against a bare parse (json.loads of every line of the same step
  logs); target within 1.5x; and its peak traced memory at STEPS and 4 x STEPS steps per episode (bounded by a chunk,
  it should not grow with the steps).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "bench"))

from bench_compare_stats import write_campaign  # noqa: E402
from cli_support import make_environment  # noqa: E402

from mcu_arms.contracts.steps import STEPS_FILE, StepRecord  # noqa: E402
from mcu_arms.layout import RunDir  # noqa: E402

STATISTICS_TARGET_S = 0.050
INDEX_TARGET_S = 0.050
EXPORT_TARGET_RATIO = 1.5
ARMS = ["base_arm", "variant_arm"]
PEAK_EPISODES = 4


def timed(function: Callable[[], object], repeats: int) -> float:
    """The median wall time of `repeats` calls."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def write_step_logs(root: Path, steps: int) -> list[Path]:
    """A step log of `steps` steps for every episode under output/, each line as the green writes it."""
    template = StepRecord(
        step=0, t=1.7e9, received='{"action": "noop"}', applied={"noop": 1}, agent_ms=12.5, sim_ms=3.25
    ).model_dump(mode="json")
    logs = []
    for report in sorted((root / "output").glob("*/episode_*/result.json")):
        log = RunDir(report.parent).green / "t" / STEPS_FILE
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w", encoding="utf-8") as handle:
            for step in range(steps):
                info = {"health": 9, "food": 8, "drink": 7, "energy": 6, "inventory": {"wood": step % 5}}
                handle.write(json.dumps(template | {"step": step, "t": 1.7e9 + step, "info": info}) + "\n")
        logs.append(log)
    return logs


def bare_parse(logs: list[Path]) -> int:
    lines = 0
    for log in logs:
        with log.open("rb") as handle:
            for line in handle:
                json.loads(line)
                lines += 1
    return lines


def export_once(result: object, root: Path, runs: Iterator[int]) -> None:
    from mcu_arms.report.export import write_export

    write_export(result, root / f"export-{next(runs)}")  # type: ignore[arg-type]


def statistics_figures(root: Path, seeds: int, repeats: int) -> None:
    from mcu_arms.report.analysis import analyse

    root.mkdir()
    write_campaign(root, seeds, 20)
    env, _, _ = make_environment(root, {})
    reports = sorted((root / "output").glob("*/episode_*/result.json"))
    bare = timed(lambda: [json.loads(path.read_bytes()) for path in reports], repeats)
    whole = timed(lambda: analyse(ARMS, env), repeats)
    print(f"statistics, 2 arms x {seeds} seeds x 20 milestones ({len(reports)} reports)")
    print(f"  bare read (json.loads):           {bare * 1000:7.1f} ms")
    print(
        f"  analyse (the Analysis):           {whole * 1000:7.1f} ms  ({whole / bare:.1f}x the bare read; "
        f"target {STATISTICS_TARGET_S * 1000:.0f} ms: {whole / STATISTICS_TARGET_S:.2f} of it)"
    )

    from mcu_arms.view.server import SiteHolder
    from mcu_arms.view.site import INDEX, Site

    holder = SiteHolder(lambda: Site.build(ARMS, env))
    started = time.perf_counter()
    holder.current(rebuild=True).get(INDEX)
    first = time.perf_counter() - started
    second = timed(lambda: holder.current(rebuild=True).get(INDEX), repeats)
    print(f"  view index, first request:        {first * 1000:7.1f} ms  (computes and caches the Analysis)")
    print(
        f"  view index, again, unchanged:     {second * 1000:7.1f} ms  ({second / bare:.1f}x the bare read; "
        f"target {INDEX_TARGET_S * 1000:.0f} ms: {second / INDEX_TARGET_S:.2f} of it)"
    )


def export_figures(root: Path, episodes: int, steps: int, repeats: int) -> None:
    from mcu_arms.report.analysis import analyse
    from mcu_arms.report.export import write_export

    root.mkdir()
    write_campaign(root, episodes // 2, 20)
    env, _, _ = make_environment(root, {})
    result = analyse(ARMS, env)
    logs = write_step_logs(root, steps)
    write_export(result, root / "export-warm")  # pyarrow's import (once per process) is not the export's
    bare = timed(partial(bare_parse, logs), repeats)
    exported = timed(partial(export_once, result, root, iter(range(repeats))), repeats)
    rows = sum(1 for _ in (root / "export-0" / "steps.csv").open()) - 1
    print(f"export, {episodes} episodes x {steps} steps ({rows} step rows)")
    print(f"  bare parse (json.loads a line):   {bare:7.2f} s")
    print(
        f"  compare --export:                 {exported:7.2f} s  ({exported / bare:.2f}x the bare parse; "
        f"target {EXPORT_TARGET_RATIO}x)"
    )


def peak_figures(root: Path, episodes: int, steps: int) -> None:
    """Peak traced memory of the export at STEPS and 4 x STEPS steps per episode (tracemalloc slows it several times,
    hence fewer episodes: a chunk bounds the memory whatever the episodes and the steps)."""
    from mcu_arms.report.analysis import analyse
    from mcu_arms.report.export import write_export

    root.mkdir()
    write_campaign(root, episodes // 2, 20)
    env, _, _ = make_environment(root, {})
    result = analyse(ARMS, env)
    peaks = []
    for count in (steps, 4 * steps):
        write_step_logs(root, count)
        write_export(result, root / "export-warm")  # imports and first-call caches are not the export's memory
        shutil.rmtree(root / "export-warm")
        tracemalloc.start()
        write_export(result, root / "export-peak")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        shutil.rmtree(root / "export-peak")
    print(
        f"  peak traced memory ({episodes} episodes): {peaks[0] / 2**20:.1f} MiB at {steps} steps/episode, "
        f"{peaks[1] / 2**20:.1f} MiB at {4 * steps} ({peaks[1] / peaks[0]:.2f}x for 4x the steps)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--episodes", type=int, default=80)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-export", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        statistics_figures(Path(directory) / "statistics", options.seeds, options.repeats)
    if not options.no_export:
        with tempfile.TemporaryDirectory() as directory:
            export_figures(Path(directory) / "export", options.episodes, options.steps, max(1, options.repeats // 2))
        with tempfile.TemporaryDirectory() as directory:
            peak_figures(Path(directory) / "peak", PEAK_EPISODES, options.steps)


if __name__ == "__main__":
    main()
