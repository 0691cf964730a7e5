"""The statistics of a large campaign: 2 arms x 200 seeds x 20 milestones, target <= 2 s on 2 cores, printed as the
ratio to a bare read (json.loads) of the same 400 result files.

    python tests/bench/bench_compare_stats.py [--seeds 200] [--milestones 20] [--repeats 3] [--compare]

"methods" reads and validates every report (contracts.run_report.read_report), pairs the arms by seed, and computes
everything stats/ offers a compare: the paired score difference (exact sign flip is out of reach at 200
pairs: 100,000 seeded random signs; paired bootstrap), per milestone both Kaplan–Meier curves with their bands,
medians and the log-rank test, Holm over the 21 tests, and the sequential-experiment check. `--compare` also times
`analyse` (report/analysis.py: the Analysis every view renders, the whole pipeline).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from cli_support import make_environment  # noqa: E402 - after the sys.path line that finds the tests' helpers
from test_compare import write_arm  # noqa: E402 - after the sys.path line that finds the tests' helpers

from mcu_arms.arms.plan import resolve_settings  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.arms.spec import load_arm  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.contracts.run_report import MilestoneRecord, Provenance, RunReport, read_report  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.contracts.settings import fingerprint  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.layout import RunDir  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.stats.comparison import compare_metric, compare_milestone  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.stats.design import pairing  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.stats.multiplicity import holm  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.stats.sequential import sequential_experiment  # noqa: E402 - after the sys.path line that finds the tests' helpers

TARGET_S = 2.0
STEPS = 3000


def write_campaign(root: Path, seeds: int, milestones: int) -> list[Path]:
    rng = random.Random(11)
    identities = [f"milestone_{index:02d}" for index in range(milestones)]
    files = []
    for arm, pace in (("base_arm", 1.0), ("variant_arm", 1.3)):
        write_arm(root, arm, steps=STEPS, agent="scripted" if arm == "base_arm" else "random")
        settings, compaction = resolve_settings(load_arm(root / "arms" / f"{arm}.toml"), [])
        for seed in range(seeds):
            steps = {
                identity: int(rng.expovariate(1 / (150 * (i + 1) * pace))) for i, identity in enumerate(identities)
            }
            records = [
                MilestoneRecord(task="t", identity=identity, step=step if step < STEPS else None)
                for identity, step in steps.items()
            ]
            report = RunReport(
                status="finished",
                arm=arm,
                episode=seed + 1,
                source=f"arms/{arm}.toml",
                fingerprint=fingerprint(settings),
                settings=settings.model_copy(update={"seed": seed}),
                compaction_limit=compaction.limit,
                provenance=Provenance(
                    mcu_arms_version="0",
                    git_sha=None,
                    git_dirty=None,
                    python="3",
                    packages={},
                    host="bench",
                    platform="bench",
                ),
                started_at="2026-12-01T00:00:00+00:00",
                milestones=records,
                steps_run=STEPS,
                score=float(sum(1 for r in records if r.step is not None)),
                max_score=float(milestones),
            )
            run_dir = RunDir(root / "output" / arm / f"episode_{seed + 1:03d}")
            run_dir.path.mkdir(parents=True)
            run_dir.write_report(report)
            files.append(run_dir.report)
    return files


def bare_read(files: list[Path]) -> int:
    return sum(len(json.loads(path.read_bytes())["milestones"]) for path in files)


def validated_read(files: list[Path]) -> int:
    return sum(len(read_report(path).milestones) for path in files)


def methods(files: list[Path]) -> int:
    reports: dict[str, list[RunReport]] = {}
    for path in files:
        report = read_report(path)
        reports.setdefault(report.arm, []).append(report)
    base, variant = reports["base_arm"], reports["variant_arm"]
    design = pairing(
        variant[0].settings.simulator,
        variant[0].settings.reset_mode,
        [r.settings.seed for r in variant],
        base[0].settings.simulator,
        base[0].settings.reset_mode,
        [r.settings.seed for r in base],
    )
    score = compare_metric(
        "score",
        {r.settings.seed: r.score for r in variant},
        {r.settings.seed: r.score for r in base},
        design,
        name_a="variant_arm",
        name_b="base_arm",
    )
    milestones = []
    for index, record in enumerate(base[0].milestones):
        times = [[(r.milestones[index].step, r.steps_run) for r in arm] for arm in (variant, base)]
        milestones.append(compare_milestone(record.task, record.identity, times[0], times[1]))
    family = [("score", score.p_value)] + [(m.identity, m.logrank.p_value) for m in milestones]
    holm(family, family="score and every milestone's log-rank test")
    sequential_experiment([r.sequential for r in variant])
    return len(milestones)


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--milestones", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        files = write_campaign(root, options.seeds, options.milestones)
        bare = statistics.median(timed(bare_read, files) for _ in range(options.repeats))
        validated = statistics.median(timed(validated_read, files) for _ in range(options.repeats))
        full = statistics.median(timed(methods, files) for _ in range(options.repeats))
        print(f"2 arms x {options.seeds} seeds x {options.milestones} milestones ({len(files)} result files)")
        print(f"bare read (json.loads):   {bare:.3f} s")
        print(f"read + RunReport:         {validated:.3f} s  ({validated / bare:.1f}x the bare read)")
        print(
            f"read + stats/:    {full:.3f} s  ({full / bare:.1f}x the bare read; target {TARGET_S:g} s: "
            f"{full / TARGET_S:.2f} of it)"
        )
        if options.compare:
            from mcu_arms.report.analysis import analyse

            env, _, _ = make_environment(root, {})
            whole = timed(analyse, ["base_arm", "variant_arm"], env)
            print(f"analyse (every view's):   {whole:.3f} s  ({whole / bare:.1f}x the bare read)")


if __name__ == "__main__":
    main()
