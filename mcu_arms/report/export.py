"""`compare --export DIR`: the analysis as tidy tables — CSV always, Parquet when pyarrow is installed.

    analysis.json  the Analysis itself (what --json prints): every statistic, difference and verdict
    numbers.csv arm, metric, statistic, value          the analysis's numbers (what --csv prints)
    tidy.csv    arm, episode, seed, metric, value     one row per episode used and metric (the analysis's per-episode
                                                      values: score, sim_score, steps_run, wall_s, steps_per_minute,
                                                      noops, infrastructure_noops, and `milestone:<task>/<identity>` =
                                                      the step it was reached at, empty when it was not; across 2
                                                      tasks or more, `normalised:<task>` = score / max score)
    steps.csv   arm, episode, seed, task, step, t, noop_cause, agent_ms, sim_ms, reward, health, food, drink, energy,
                milestones                           one row per step of every replicate

The episodes are the ones the analysis used: per arm, its finished replicates of one experiment (interrupted and
failed episodes never). Nothing here computes a statistic. The rows are built here without pandas;
`mcu_arms.results` hands them to notebooks as DataFrames. The step table is streamed: its rows go to the CSV (and
the Parquet file, a row group per chunk) STEP_CHUNK at a time, so memory is bounded by a chunk, not by the steps.
"""

from __future__ import annotations

import csv
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.steps import STEPS_FILE, JsonlScan
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
STEP_CHUNK = 4096  # step rows held at once while exporting


class StepVitals(BaseModel):
    """The vitals of a step's `info` (the rest of it, the inventory and the position, is skipped while parsing)."""

    model_config = ConfigDict(extra="ignore")

    health: Any = None
    food: Any = None
    drink: Any = None
    energy: Any = None


class StepExport(BaseModel):
    """The part of a contracts/steps.py StepRecord the step table shows; parsing skips the rest (the reply, the
    action). Same names and meaning as StepRecord's."""

    model_config = ConfigDict(extra="ignore")

    step: int
    t: float
    noop_cause: str | None = None
    agent_ms: float
    sim_ms: float
    reward: float = 0.0
    events: list[dict[str, Any]] = Field(default_factory=list)
    info: StepVitals = Field(default_factory=StepVitals)


def _run_dirs(arm: ArmAnalysis) -> Iterator[tuple[RunDir, int, int]]:
    """(episode dir, episode, seed) of each episode the analysis used for this arm."""
    if arm.latest is None:
        return
    arm_dir = Path(arm.latest.episode_dir).parent
    for each in arm.used:
        yield RunDir(arm_dir / episode_name(each.episode)), each.episode, each.seed


def tidy_rows(result: Analysis) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    section = result.across_tasks
    normalised = {each.arm: each.normalised for each in section.arms} if section is not None else {}
    for arm in result.arms:
        values = {name: summary.values for name, summary in arm.metrics.items() if summary.n == arm.n}
        by_task = normalised.get(arm.arm, {})
        for index, (ref, milestones) in enumerate(zip(arm.used, arm.per_episode, strict=True)):
            metrics: dict[str, Any] = {name: column[index] for name, column in values.items()}
            metrics |= {
                f"milestone:{key}": step for key, step in milestones.steps.items() if arm.milestones[key].available
            }
            metrics |= {f"normalised:{task}": seeds[ref.seed] for task, seeds in by_task.items() if ref.seed in seeds}
            rows += [
                {"arm": arm.arm, "episode": ref.episode, "seed": ref.seed, "metric": key, "value": value}
                for key, value in metrics.items()
            ]
    return rows


def step_values(result: Analysis, excluded: list[str] | None = None) -> Iterator[tuple[Any, ...]]:
    """One tuple per step of every episode used, its values in STEP_COLUMNS order (what the step table writes). A
    step log that cannot be read within its bounds (contracts/reading.py) is left out from the line that broke one,
    with why appended to `excluded`."""
    for arm in result.arms:
        for run_dir, episode, seed in _run_dirs(arm):
            for path in sorted(run_dir.green.glob(f"*/{STEPS_FILE}")):
                task = path.parent.name
                try:
                    yield from _log_values(arm.arm, episode, seed, task, path)
                except UserError as error:
                    if excluded is None:
                        raise
                    excluded.append(f"{path}: steps left out from there: {error.message}")


def _log_values(arm: str, episode: int, seed: int, task: str, path: Path) -> Iterator[tuple[Any, ...]]:
    for _, _, record in JsonlScan(path, StepExport):
        info, events = record.info, record.events
        yield (
            arm,
            episode,
            seed,
            task,
            record.step,
            record.t,
            record.noop_cause,
            record.agent_ms,
            record.sim_ms,
            record.reward,
            info.health,
            info.food,
            info.drink,
            info.energy,
            ",".join([str(event.get("identity")) for event in events]) if events else "",
        )


def step_rows(result: Analysis) -> Iterator[dict[str, Any]]:
    for values in step_values(result):
        yield dict(zip(STEP_COLUMNS, values, strict=True))


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


def _chunks(rows: Iterator[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == STEP_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _step_table(chunk: list[tuple[Any, ...]], schema: Any = None) -> Any:
    import pyarrow as pa

    columns = list(zip(*chunk, strict=True)) if chunk else [() for _ in STEP_COLUMNS]
    return pa.table({name: list(column) for name, column in zip(STEP_COLUMNS, columns, strict=True)}, schema=schema)


def _write_steps(csv_path: Path, parquet_path: Path | None, rows: Iterator[tuple[Any, ...]]) -> None:
    """One pass over the step logs into the CSV and, when given, the Parquet file: a chunk of rows at a time. The
    Parquet schema is fixed by the first chunk; a column still empty there is a string column."""
    with csv_path.open("x", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(STEP_COLUMNS)
        if parquet_path is None:
            for chunk in _chunks(rows):
                writer.writerows(chunk)
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        parquet: Any = None
        with parquet_path.open("xb") as binary:
            try:
                for chunk in _chunks(rows):
                    writer.writerows(chunk)
                    if parquet is None:
                        fields = _step_table(chunk).schema
                        schema = pa.schema(
                            [f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in fields]
                        )
                        parquet = pq.ParquetWriter(binary, schema)
                    parquet.write_table(_step_table(chunk, parquet.schema))
                if parquet is None:
                    pq.write_table(_step_table([]), binary)
            finally:
                if parquet is not None:
                    parquet.close()


EXPORT_FILES = ("analysis.json", "numbers.csv", "tidy.csv", "steps.csv", "tidy.parquet", "steps.parquet")


def earlier_export(directory: Path) -> list[str]:
    """The files of an earlier export already in `directory`: an export is never written over, nor mixed with one."""
    return [name for name in EXPORT_FILES if (directory / name).exists()]


def write_export(result: Analysis, directory: Path) -> tuple[list[Path], list[str]]:
    """Write the tables into `directory` (never over an earlier export); returns what was written and what was left
    out (with why). Written whole into a temporary sibling folder first, then moved in: a failure leaves nothing."""
    import importlib.util

    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", suffix=".partial", dir=directory))
    try:
        parquet = importlib.util.find_spec("pyarrow") is not None
        tidy = tidy_rows(result)
        excluded: list[str] = []
        names = list(EXPORT_FILES[:4])
        with (staging / names[0]).open("x", encoding="utf-8") as handle:
            handle.write(result.model_dump_json(indent=2))
        rows = [dict(zip(CSV_COLUMNS, row, strict=True)) for row in tidy_numbers(result)]
        _write_csv(staging / names[1], CSV_COLUMNS, rows)
        _write_csv(staging / names[2], TIDY_COLUMNS, tidy)
        _write_steps(staging / names[3], staging / "steps.parquet" if parquet else None, step_values(result, excluded))
        if parquet:
            _write_parquet(staging / "tidy.parquet", TIDY_COLUMNS, tidy)
            names += ["tidy.parquet", "steps.parquet"]
        moved: list[Path] = []
        try:
            for name in names:
                if os.path.lexists(directory / name):
                    raise FileExistsError(errno.EEXIST, "an export appeared meanwhile", str(directory / name))
                os.rename(staging / name, directory / name)
                moved.append(directory / name)
        except BaseException:
            for path in moved:
                path.unlink(missing_ok=True)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return moved, excluded
