"""Results for notebooks: the tables `compare --export` writes, as pandas DataFrames.

    from mcu_arms.results import analysis, numbers, tidy, steps
    scores = tidy(["arms/demo.toml", "arms/demo_random.toml"], project="~/mcu-arms")
    scores[scores.metric == "score"].groupby("arm").value.describe()

The episodes are the ones `compare` chooses (per arm, its finished replicates of one experiment); `analysis` is
that Analysis itself, with every statistic, difference and verdict. pandas is needed here only:
`pip install 'mcu-arms[analysis]'`.

    from mcu_arms.results import to_mlflow, to_wandb
    to_mlflow(["campaigns/agents.toml"], tracking_uri="http://127.0.0.1:5000")   # what `compare --to mlflow` writes
    to_wandb(["campaigns/agents.toml"])                                          # offline runs in ./wandb/

Both return what was created, updated or found unchanged; they need the `mlflow` or `wandb` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

    from mcu_arms.report.analysis import Analysis
    from mcu_arms.report.tracking import ExportOutcome, TrackerName


def analysis(
    items: list[str], project: str | Path = ".", *, baseline: str | None = None, experiments: list[str] | None = None
) -> Analysis:
    """The Analysis `compare` renders: experiments chosen, episodes used and excluded, statistics, differences."""
    from mcu_arms.environment import Environment
    from mcu_arms.report.analysis import analyse

    env = Environment(cwd=Path(project).expanduser().resolve())
    return analyse(items, env, baseline=baseline, experiments=experiments)


def numbers(items: list[str], project: str | Path = ".", *, baseline: str | None = None) -> pandas.DataFrame:
    """The analysis's numbers, one row per (arm, metric, statistic): what `compare --csv` prints."""
    import pandas as pd

    from mcu_arms.report.compare import CSV_COLUMNS, tidy_numbers

    return pd.DataFrame(tidy_numbers(analysis(items, project, baseline=baseline)), columns=list(CSV_COLUMNS))


def tidy(items: list[str], project: str | Path = ".", *, baseline: str | None = None) -> pandas.DataFrame:
    """One row per (arm, episode, seed, metric): score, steps_run, wall_s, infrastructure_noops, milestone steps."""
    import pandas as pd

    from mcu_arms.report.export import TIDY_COLUMNS, tidy_rows

    return pd.DataFrame(tidy_rows(analysis(items, project, baseline=baseline)), columns=list(TIDY_COLUMNS))


def steps(items: list[str], project: str | Path = ".", *, baseline: str | None = None) -> pandas.DataFrame:
    """One row per step of every replicate: latencies, noop cause, reward, vitals, milestones reached."""
    import pandas as pd

    from mcu_arms.report.export import STEP_COLUMNS, step_rows

    return pd.DataFrame(list(step_rows(analysis(items, project, baseline=baseline))), columns=list(STEP_COLUMNS))


def _track(
    items: list[str], project: str | Path, tracker: TrackerName, where: str | None, baseline: str | None
) -> ExportOutcome:
    from mcu_arms.environment import Environment
    from mcu_arms.report.trackers import export_to
    from mcu_arms.report.tracking import compared, experiment_name, parse_destination

    parse_destination(tracker)
    env = Environment(cwd=Path(project).expanduser().resolve())
    result = analysis(items, project, baseline=baseline)
    return export_to(tracker, where, compared(result), experiment_name(items, env, result.arm_names()), env)


def to_mlflow(
    items: list[str], project: str | Path = ".", *, tracking_uri: str | None = None, baseline: str | None = None
) -> ExportOutcome:
    """Each compared episode as an MLflow run, the verdicts as their parent (as `compare --to mlflow[=URI]`)."""
    return _track(items, project, "mlflow", tracking_uri, baseline)


def to_wandb(
    items: list[str], project: str | Path = ".", *, directory: str | Path | None = None, baseline: str | None = None
) -> ExportOutcome:
    """Each compared episode as a W&B offline run under DIRECTORY/wandb/ (as `compare --to wandb[=DIR]`)."""
    return _track(items, project, "wandb", str(directory) if directory is not None else None, baseline)
