"""`compare --export DIR`: the analysis as tidy tables — CSV always, Parquet when pyarrow is installed.

    analysis.json  the Analysis itself (what --json prints): every statistic, difference and verdict
    numbers.csv arm, metric, statistic, value          the analysis's numbers (what --csv prints)
    tidy.csv    arm, episode, seed, metric, value     one row per episode used and metric (the analysis's per-episode
                                                      values: score, sim_score, steps_run, wall_s, steps_per_minute,
                                                      noops, infrastructure_noops, and `milestone:<task>/<identity>` =
                                                      the step it was reached at, empty when it was not)
    steps.csv   arm, episode, seed, task, step, t, noop_cause, agent_ms, sim_ms, reward, health, food, drink, energy,
                milestones                           one row per step of every replicate

The episodes are the ones the analysis used: per arm, its finished replicates of one experiment (interrupted and
failed episodes never). Nothing here computes a statistic. The rows are built here without pandas;
`mcu_arms.results` hands them to notebooks as DataFrames.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcu_arms.contracts.steps import STEPS_FILE, JsonlScan, StepRecord
from mcu_arms.layout import RunDir, episode_name
from mcu_arms.report.analysis import Analysis, ArmAnalysis
from mcu_arms.report.compare import CSV_COLUMNS, tidy_numbers

TIDY_COLUMNS = ("arm", "episode", "seed", "metric", "value")
STEP_COLUMNS = (
    "arm",
    "episode",
    "seed",
    "task",
    "step",
    "t",
    "noop_cause",
    "agent_ms",
    "sim_ms",
    "reward",
    "health",
    "food",
    "drink",
    "energy",
    "milestones",
)
VITALS = ("health", "food", "drink", "energy")


def _run_dirs(arm: ArmAnalysis) -> Iterator[tuple[RunDir, int, int]]:
    """(episode dir, episode, seed) of each episode the analysis used for this arm."""
    if arm.latest is None:
        return
    arm_dir = Path(arm.latest.episode_dir).parent
    for each in arm.used:
        yield RunDir(arm_dir / episode_name(each.episode)), each.episode, each.seed


def tidy_rows(result: Analysis) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for arm in result.arms:
        values = {name: summary.values for name, summary in arm.metrics.items() if summary.n == arm.n}
        for index, (ref, milestones) in enumerate(zip(arm.used, arm.per_episode, strict=True)):
            metrics: dict[str, Any] = {name: column[index] for name, column in values.items()}
            metrics |= {
                f"milestone:{key}": step for key, step in milestones.steps.items() if arm.milestones[key].available
            }
            rows += [
                {"arm": arm.arm, "episode": ref.episode, "seed": ref.seed, "metric": key, "value": value}
                for key, value in metrics.items()
            ]
    return rows


def step_rows(result: Analysis) -> Iterator[dict[str, Any]]:
    for arm in result.arms:
        for run_dir, episode, seed in _run_dirs(arm):
            for path in sorted(run_dir.green.glob(f"*/{STEPS_FILE}")):
                for _, _, record in JsonlScan(path, StepRecord):
                    row: dict[str, Any] = {
                        "arm": arm.arm,
                        "episode": episode,
                        "seed": seed,
                        "task": path.parent.name,
                        "step": record.step,
                        "t": record.t,
                        "noop_cause": record.noop_cause,
                        "agent_ms": record.agent_ms,
                        "sim_ms": record.sim_ms,
                        "reward": record.reward,
                        "milestones": ",".join(str(event.get("identity")) for event in record.events),
                    }
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


EXPORT_FILES = ("analysis.json", "numbers.csv", "tidy.csv", "steps.csv", "tidy.parquet", "steps.parquet")


def earlier_export(directory: Path) -> list[str]:
    """The files of an earlier export already in `directory`: an export is never written over, nor mixed with one."""
    return [name for name in EXPORT_FILES if (directory / name).exists()]


def write_export(result: Analysis, directory: Path) -> list[Path]:
    """Write the tables into `directory` (never over an earlier export); returns what was written."""
    import importlib.util

    directory.mkdir(parents=True, exist_ok=True)
    tidy, steps = tidy_rows(result), list(step_rows(result))
    written = [directory / name for name in EXPORT_FILES[:4]]
    with written[0].open("x", encoding="utf-8") as handle:
        handle.write(result.model_dump_json(indent=2))
    _write_csv(written[1], CSV_COLUMNS, [dict(zip(CSV_COLUMNS, row, strict=True)) for row in tidy_numbers(result)])
    _write_csv(written[2], TIDY_COLUMNS, tidy)
    _write_csv(written[3], STEP_COLUMNS, steps)
    if importlib.util.find_spec("pyarrow") is not None:
        for name, columns, rows in (("tidy", TIDY_COLUMNS, tidy), ("steps", STEP_COLUMNS, steps)):
            _write_parquet(directory / f"{name}.parquet", columns, rows)
            written.append(directory / f"{name}.parquet")
    return written
