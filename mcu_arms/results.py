"""Results for notebooks: the tables `compare --export` writes, as pandas DataFrames.

    from mcu_arms.results import analysis, numbers, tidy, steps
    scores = tidy(["arms/demo.toml", "arms/demo_random.toml"], project="~/mcu-arms")
    scores[scores.metric == "score"].groupby("arm").value.describe()

The episodes are the ones `compare` chooses (per arm, its finished replicates of one experiment); `analysis` is
that Analysis itself, with every statistic, difference and verdict. pandas is needed here only:
`pip install 'mcu-arms[analysis]'`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

    from mcu_arms.report.analysis import Analysis


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
