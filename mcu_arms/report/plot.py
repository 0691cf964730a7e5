"""`compare --plot`: milestones reached against step, one line per arm that ran.

The series are computed without matplotlib (tests read them); matplotlib is imported only to draw, with Agg.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcu_arms.report.compare import ComparisonResult


class PlotSeries(BaseModel):
    arm: str
    steps: list[int]  # x: 0, each step a milestone landed on, the last step run
    reached: list[int]  # y: milestones reached by that step


class PlotData(BaseModel):
    title: str
    series: list[PlotSeries]
    not_plotted: list[str]  # arms with no run


def plot_data(result: ComparisonResult) -> PlotData:
    series: list[PlotSeries] = []
    not_plotted: list[str] = []
    for index, arm in enumerate(result.arms):
        if arm.status == "no run":
            not_plotted.append(arm.arm)
            continue
        landed = sorted(row.cells[index].step for row in result.milestones if row.cells[index].step is not None)
        steps = [0, *landed]
        reached = list(range(len(landed) + 1))
        last = max(arm.steps_run or 0, steps[-1])
        if last > steps[-1]:
            steps.append(last)
            reached.append(len(landed))
        series.append(PlotSeries(arm=arm.arm, steps=steps, reached=reached))
    tasks = list(dict.fromkeys(arm.settings.task for arm in result.arms))
    labels = list(dict.fromkeys(arm.simulator_label or arm.settings.simulator for arm in result.arms))
    title = f"{', '.join(tasks)}\n{' vs '.join(labels)}"
    if not_plotted:
        title += f"\n(no run: {', '.join(not_plotted)})"
    return PlotData(title=title, series=series, not_plotted=not_plotted)


def build_figure(data: PlotData) -> Any:
    """A matplotlib Figure (Agg canvas) with one step line per series."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 5.5), dpi=100)
    axes = figure.add_subplot()
    for series in data.series:
        landed = list(range(1, max(series.reached) + 1))  # a marker where a milestone landed, not at the last step
        axes.plot(
            series.steps, series.reached, drawstyle="steps-post", marker="o", markersize=4, markevery=landed,
            label=series.arm,
        )  # fmt: skip
    axes.set_xlabel("step")
    axes.set_ylabel("milestones reached")
    axes.set_title(data.title, fontsize=10)
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.grid(True, alpha=0.3)
    if data.series:
        axes.legend(loc="upper left")
    figure.tight_layout()
    return figure


def save_plot(result: ComparisonResult, path: Path) -> PlotData:
    """Write the PNG (Agg: no display needed) and return what was drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    data = plot_data(result)
    figure = build_figure(data)
    FigureCanvasAgg(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return data
