"""Results for notebooks: the tables `compare --export` writes, as pandas DataFrames.

    from mcu_arms.results import tidy, steps
    scores = tidy(["arms/demo.toml", "arms/demo_random.toml"], project="~/mcu-arms")
    scores[scores.metric == "score"].groupby("arm").value.describe()

The episodes are the ones `compare` chooses (per arm, its finished replicates of one experiment). pandas is
needed here only: `pip install 'mcu-arms[analysis]'`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

    from mcu_arms.report.compare import ComparisonResult


def _comparison(items: list[str], project: str | Path, baseline: str | None) -> ComparisonResult:
    from mcu_arms.environment import Environment
    from mcu_arms.report.compare import compare_arms

    return compare_arms(items, Environment(cwd=Path(project).expanduser().resolve()), baseline=baseline)


def tidy(items: list[str], project: str | Path = ".", *, baseline: str | None = None) -> pandas.DataFrame:
    """One row per (arm, episode, seed, metric): score, steps_run, wall_s, infrastructure_noops, milestone steps."""
    import pandas as pd

    from mcu_arms.report.export import TIDY_COLUMNS, tidy_rows

    return pd.DataFrame(tidy_rows(_comparison(items, project, baseline)), columns=list(TIDY_COLUMNS))


def steps(items: list[str], project: str | Path = ".", *, baseline: str | None = None) -> pandas.DataFrame:
    """One row per step of every replicate: latencies, noop cause, reward, vitals, milestones reached."""
    import pandas as pd

    from mcu_arms.report.export import STEP_COLUMNS, step_rows

    return pd.DataFrame(list(step_rows(_comparison(items, project, baseline))), columns=list(STEP_COLUMNS))
