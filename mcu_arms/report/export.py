"""`compare --export DIR`: the comparison as tidy tables for analysis — CSV always, Parquet when pyarrow is installed.

    tidy.csv    arm, episode, seed, metric, value     one row per episode and metric (score, steps_run, wall_s,
                                                      infrastructure_noops, and `milestone:<task>/<identity>` = the
                                                      step it was reached at, empty when it was not)
    steps.csv   arm, episode, seed, task, step, t, noop_cause, agent_ms, sim_ms, reward, health, food, drink, energy,
                milestones                           one row per step of every replicate

The episodes are the ones `compare` chose: per arm, its finished replicates of one experiment. The rows are built
here without pandas; `mcu_arms.results` hands them to notebooks as DataFrames.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcu_arms.contracts.run_report import read_report
from mcu_arms.contracts.steps import STEPS_FILE, JsonlScan, StepRecord
from mcu_arms.layout import RunDir, episode_name
from mcu_arms.report.compare import ArmResult, ComparisonResult

TIDY_COLUMNS = ("arm", "episode", "seed", "metric", "value")
STEP_COLUMNS = (
    "arm", "episode", "seed", "task", "step", "t", "noop_cause", "agent_ms", "sim_ms", "reward", "health", "food",
    "drink", "energy", "milestones",
)  # fmt: skip
VITALS = ("health", "food", "drink", "energy")


def _run_dirs(arm: ArmResult) -> Iterator[tuple[RunDir, int, int]]:
    """(episode dir, episode, seed) of each replicate compare chose for this arm."""
    if arm.replicates is None or arm.episode_dir is None:
        return
    arm_dir = Path(arm.episode_dir).parent
    for each in arm.replicates.per_episode:
        yield RunDir(arm_dir / episode_name(each.episode)), each.episode, each.seed


def tidy_rows(result: ComparisonResult) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for arm in result.arms:
        for run_dir, episode, seed in _run_dirs(arm):
            report = read_report(run_dir.report)
            metrics: dict[str, Any] = {
                "score": report.score,
                "steps_run": report.steps_run,
                "wall_s": report.wall_s,
                "infrastructure_noops": sum(report.infrastructure.values()),
            }
            metrics |= {f"milestone:{m.task}/{m.identity}": m.step for m in report.milestones if m.available}
            rows += [{"arm": arm.arm, "episode": episode, "seed": seed, "metric": key, "value": value}
                     for key, value in metrics.items()]  # fmt: skip
    return rows


def step_rows(result: ComparisonResult) -> Iterator[dict[str, Any]]:
    for arm in result.arms:
        for run_dir, episode, seed in _run_dirs(arm):
            for path in sorted(run_dir.green.glob(f"*/{STEPS_FILE}")):
                for _, _, record in JsonlScan(path, StepRecord):
                    row: dict[str, Any] = {
                        "arm": arm.arm, "episode": episode, "seed": seed, "task": path.parent.name,
                        "step": record.step, "t": record.t, "noop_cause": record.noop_cause,
                        "agent_ms": record.agent_ms, "sim_ms": record.sim_ms, "reward": record.reward,
                        "milestones": ",".join(str(event.get("identity")) for event in record.events),
                    }  # fmt: skip
                    row |= {vital: record.info.get(vital) for vital in VITALS}
                    yield row


def _write_csv(path: Path, columns: tuple[str, ...], rows: Any) -> None:
    with path.open("x", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _write_parquet(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({column: [row.get(column) for row in rows] for column in columns})
    with path.open("xb") as handle:
        pq.write_table(table, handle)


EXPORT_FILES = ("tidy.csv", "steps.csv", "tidy.parquet", "steps.parquet")


def earlier_export(directory: Path) -> list[str]:
    """The files of an earlier export already in `directory`: an export is never written over, nor mixed with one."""
    return [name for name in EXPORT_FILES if (directory / name).exists()]


def write_export(result: ComparisonResult, directory: Path) -> list[Path]:
    """Write the tables into `directory` (never over an earlier export); returns what was written."""
    import importlib.util

    directory.mkdir(parents=True, exist_ok=True)
    tidy, steps = tidy_rows(result), list(step_rows(result))
    written = [directory / "tidy.csv", directory / "steps.csv"]
    _write_csv(written[0], TIDY_COLUMNS, tidy)
    _write_csv(written[1], STEP_COLUMNS, steps)
    if importlib.util.find_spec("pyarrow") is not None:
        for name, columns, rows in (("tidy", TIDY_COLUMNS, tidy), ("steps", STEP_COLUMNS, steps)):
            _write_parquet(directory / f"{name}.parquet", columns, rows)
            written.append(directory / f"{name}.parquet")
    return written
