"""`compare --plot FILE`: milestones reached against step, one line per arm — the median over its replicates with
the interquartile range as a band, the analysis's ReachedCurve — in the format the file's suffix names (png, pdf, svg).

The series come from the Analysis without matplotlib (tests read them); matplotlib is imported only to draw, with Agg.
Each
line is labelled by what differs from the baseline (`agent=random`), not by the arm's name, and the title keeps the
simulator label: a figure pasted into a paper still says what ran where.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from mcu_arms.contracts.settings import differing_settings, flat_settings
from mcu_arms.report.analysis import Analysis, ArmAnalysis, simulator_label

PlotFormat = Literal["png", "pdf", "svg"]
FORMATS: tuple[PlotFormat, ...] = ("png", "pdf", "svg")


class PlotSeries(BaseModel):
    arm: str
    label: str  # the settings that differ from the baseline, e.g. "agent=random"
    steps: list[int]  # x: 0, each step a milestone landed on in any replicate, the last step run
    median: list[float]  # y: milestones reached by that step, the median over replicates
    low: list[float]  # the 25th percentile
    high: list[float]  # the 75th percentile
    replicates: int
    landed: list[tuple[int, str]]  # (median step, milestone) where a milestone was reached by half the replicates


class PlotData(BaseModel):
    title: str
    series: list[PlotSeries]
    not_plotted: list[str]  # arms with no finished episode
    log_x: bool = False


LABEL_SETTINGS = 3  # a legend names at most this many differing settings, then counts the rest


def _label(arm: ArmAnalysis, baseline: ArmAnalysis) -> str:
    if arm is baseline:
        return f"{arm.arm} (baseline)"
    differing = differing_settings([baseline.settings, arm.settings])
    values = flat_settings(arm.settings)
    shown = ", ".join(f"{key}={values.get(key)}" for key in differing[:LABEL_SETTINGS])
    more = f" (+{len(differing) - LABEL_SETTINGS} more)" if len(differing) > LABEL_SETTINGS else ""
    return f"{arm.arm}: {shown}{more}" if shown else arm.arm


def _series(arm: ArmAnalysis, baseline: ArmAnalysis) -> PlotSeries | None:
    curve = arm.curve
    if curve is None:
        return None  # interrupted and failed episodes are never drawn
    return PlotSeries(
        arm=arm.arm,
        label=_label(arm, baseline),
        steps=curve.steps,
        median=curve.median,
        low=curve.low,
        high=curve.high,
        replicates=arm.n,
        landed=curve.landed,
    )


def plot_data(result: Analysis, *, log_x: bool = False) -> PlotData:
    baseline = next(arm for arm in result.arms if arm.arm == result.baseline)
    series: list[PlotSeries] = []
    not_plotted: list[str] = []
    for arm in result.arms:
        drawn = _series(arm, baseline)
        if drawn is None:
            not_plotted.append(arm.arm)
        else:
            series.append(drawn)
    tasks = list(dict.fromkeys(arm.settings.task for arm in result.arms))
    labels = list(dict.fromkeys(simulator_label(arm) for arm in result.arms))
    counts = ", ".join(f"{s.arm} n={s.replicates}" for s in series)
    title = f"{', '.join(tasks)} ({counts})\n{' vs '.join(labels)}"
    if not_plotted:
        title += f"\n(no finished episode: {', '.join(not_plotted)})"
    return PlotData(title=title, series=series, not_plotted=not_plotted, log_x=log_x)


def build_figure(data: PlotData) -> Any:
    """A matplotlib Figure (Agg canvas): per series a median step line, its IQR band, and the milestones named."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 5.5), dpi=100)
    axes = figure.add_subplot()
    for series in data.series:
        (line,) = axes.plot(
            series.steps, series.median, drawstyle="steps-post", label=f"{series.label} (n={series.replicates})"
        )
        if series.replicates > 1:
            axes.fill_between(series.steps, series.low, series.high, step="post", alpha=0.2, color=line.get_color())
        for step, name in series.landed:
            reached = max((m for x, m in zip(series.steps, series.median, strict=True) if x <= step), default=0)
            axes.annotate(
                name,
                (max(step, 1) if data.log_x else step, reached),
                fontsize=7,
                rotation=30,
                color=line.get_color(),
                xytext=(2, 3),
                textcoords="offset points",
            )
    if data.log_x:
        axes.set_xscale("symlog", linthresh=1)
    axes.set_xlabel("step" + (" (log)" if data.log_x else ""))
    axes.set_ylabel("milestones reached (median, IQR band)")
    axes.set_title(data.title, fontsize=10)
    # the y axis's locator is a MaxNLocator, which takes `integer`; the stubs type it as the base Locator
    axes.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    axes.grid(True, alpha=0.3)
    if data.series:
        axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    return figure


def plot_format(path: Path) -> PlotFormat:
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        from mcu_arms.contracts.errors import UserError

        raise UserError(
            f"cannot draw a .{suffix or '(no suffix)'} file", path=path, key="--plot", allowed=", ".join(FORMATS)
        )
    return suffix


def save_plot(result: Analysis, path: Path, *, log_x: bool = False) -> PlotData:
    """Write the figure in the format its suffix names (Agg: no display needed) and return what was drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    kind = plot_format(path)
    data = plot_data(result, log_x=log_x)
    figure = build_figure(data)
    FigureCanvasAgg(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format=kind)
    return data
