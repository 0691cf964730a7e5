"""`compare --plot FILE`: first the score, the primary result, as a dot plot (one point per seed, the same seed joined
across arms, each arm's mean with its 95% interval); for arms compared on 2 tasks or more, their performance profiles
across tasks with bootstrap bands (the Analysis's `across_tasks`); then per milestone that some arm reached, each
arm's Kaplan–Meier curve of reaching it (steps on x, the probability of having reached it on y) with its confidence
band in the line's colour — the Analysis's `ArmAnalysis.survival`, an episode that did not reach it censored at the
steps it ran — in the format the file's suffix names (png, pdf, svg).

The curves come from the Analysis without matplotlib (tests read them); matplotlib is imported only to draw, with Agg.
Each line is labelled by what differs from the baseline (`agent=random`), not by the arm's name, and the title keeps
the simulator label: a figure pasted into a paper still says what ran where.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from mcu_arms.contracts.settings import differing_settings, flat_settings
from mcu_arms.report.analysis import Analysis, ArmAnalysis, ReachingCurve, simulator_label

PlotFormat = Literal["png", "pdf", "svg"]
FORMATS: tuple[PlotFormat, ...] = ("png", "pdf", "svg")
PANEL_COLUMNS = 4  # milestones side by side, then another row
PANEL_SIZE = (3.6, 2.8)  # inches per milestone
LABEL_SETTINGS = 3  # a legend names at most this many differing settings, then counts the rest


class PlotArm(BaseModel):
    arm: str
    label: str  # the settings that differ from the baseline, e.g. "agent=random"
    replicates: int


class PlotCurve(BaseModel):
    """One arm's curve for one milestone: x steps, y the probability of having reached it, and its band."""

    arm: str
    n: int
    median: float | None  # the Kaplan–Meier median steps to it; None: not reached
    curve: ReachingCurve


class ScoreColumn(BaseModel):
    """One arm's scores: a point per seed, and the mean with its 95% interval (None below two seeds)."""

    arm: str
    seeds: list[int]
    scores: list[float]
    mean: float | None
    low: float | None
    high: float | None


class ProfileCurve(BaseModel):
    """One arm's performance profile across tasks: the share of (task × seed) normalised scores above each threshold,
    with its stratified bootstrap band (None: one seed per task)."""

    arm: str
    thresholds: list[float]
    share: list[float]
    low: list[float] | None
    high: list[float] | None


class MilestonePanel(BaseModel):
    task: str
    identity: str
    curves: list[PlotCurve]  # one per plotted arm that has the milestone available, in arm order


class PlotData(BaseModel):
    title: str
    arms: list[PlotArm]  # plotted: at least one finished episode
    scores: list[ScoreColumn] = []  # one per plotted arm, in arm order
    max_score: float | None = None
    milestones: list[MilestonePanel]  # only those some arm reached
    not_plotted: list[str]  # arms with no finished episode
    profiles: list[ProfileCurve] = []  # arms compared on 2 tasks or more: one per plotted arm, in arm order
    profile_title: str = ""  # what the profiles are over, e.g. "3 tasks × 4 seeds"
    log_x: bool = False


def _label(arm: ArmAnalysis, baseline: ArmAnalysis) -> str:
    if arm is baseline:
        return f"{arm.arm} (baseline)"
    differing = differing_settings([baseline.settings, arm.settings])
    values = flat_settings(arm.settings)
    shown = ", ".join(f"{key}={values.get(key)}" for key in differing[:LABEL_SETTINGS])
    more = f" (+{len(differing) - LABEL_SETTINGS} more)" if len(differing) > LABEL_SETTINGS else ""
    return f"{arm.arm}: {shown}{more}" if shown else arm.arm


def plot_data(result: Analysis, *, log_x: bool = False) -> PlotData:
    baseline = next(arm for arm in result.arms if arm.arm == result.baseline)
    drawn = [arm for arm in result.arms if arm.used]  # interrupted and failed episodes are never drawn
    not_plotted = [arm.arm for arm in result.arms if not arm.used]
    panels: list[MilestonePanel] = []
    for row in result.milestones:
        curves = []
        for arm in drawn:
            survival = arm.survival(f"{row.task}/{row.identity}")
            if survival is not None:
                curves.append(PlotCurve(arm=arm.arm, n=survival.n, median=survival.median, curve=survival.reaching()))
        if any(max(curve.curve.reached, default=0) > 0 for curve in curves):  # a panel nobody reached says nothing
            panels.append(MilestonePanel(task=row.task, identity=row.identity, curves=curves))
    tasks = list(dict.fromkeys(arm.settings.task for arm in result.arms))
    labels = list(dict.fromkeys(simulator_label(arm) for arm in result.arms))
    counts = ", ".join(f"{arm.arm} n={arm.n}" for arm in drawn)
    title = f"{', '.join(tasks)} ({counts})\n{' vs '.join(labels)}"
    if not_plotted:
        title += f"\n(no finished episode: {', '.join(not_plotted)})"
    arms = [PlotArm(arm=arm.arm, label=_label(arm, baseline), replicates=arm.n) for arm in drawn]
    maxima = [arm.max_score for arm in drawn if arm.max_score is not None]
    profiles, profile_title = _profiles(result)
    return PlotData(
        title=title,
        arms=arms,
        scores=[_score_column(arm) for arm in drawn],
        max_score=max(maxima) if maxima else None,
        milestones=panels,
        not_plotted=not_plotted,
        profiles=profiles,
        profile_title=profile_title,
        log_x=log_x,
    )


def _profiles(result: Analysis) -> tuple[list[ProfileCurve], str]:
    section = result.across_tasks
    if section is None or section.unavailable is not None:
        return [], ""
    curves = [
        ProfileCurve(
            arm=each.arm,
            thresholds=each.profile.thresholds,
            share=each.profile.share,
            low=each.profile.low,
            high=each.profile.high,
        )
        for each in section.arms
    ]
    seeds = sorted({n for each in section.arms for n in each.seeds})
    shown = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
    return curves, f"{len(section.tasks)} tasks × {shown} seeds"


def _score_column(arm: ArmAnalysis) -> ScoreColumn:
    scored = [(each.seed, each.score) for each in arm.per_episode if each.score is not None]
    summary = arm.metrics.get("score")
    interval = summary.ci if summary is not None else None
    return ScoreColumn(
        arm=arm.arm,
        seeds=[seed for seed, _ in scored],
        scores=[score for _, score in scored],
        mean=summary.mean if summary is not None else None,
        low=interval.low if interval is not None else None,
        high=interval.high if interval is not None else None,
    )


def draw_scores(axes: Any, data: PlotData, colours: dict[str, str]) -> None:
    """The score panel: arm i at x = i, a point per seed (a little to the left), the seeds that both neighbours ran
    joined by a grey line, the mean and its interval to the right of the points."""
    by_seed: dict[int, list[tuple[int, float]]] = {}
    for index, column in enumerate(data.scores):
        for seed, score in zip(column.seeds, column.scores, strict=True):
            by_seed.setdefault(seed, []).append((index, score))
    for points in by_seed.values():
        if len(points) > 1:
            axes.plot([x for x, _ in points], [y for _, y in points], color="0.75", linewidth=0.8, zorder=1)
    for index, column in enumerate(data.scores):
        colour = colours[column.arm]
        axes.scatter([index] * len(column.scores), column.scores, color=colour, s=18, zorder=2)
        if column.mean is not None:
            low = column.mean - column.low if column.low is not None else 0
            high = column.high - column.mean if column.high is not None else 0
            axes.errorbar(
                [index + 0.18], [column.mean], yerr=[[low], [high]], fmt="D", color=colour, capsize=3, markersize=4
            )
    axes.set_xticks(range(len(data.scores)), [column.arm for column in data.scores], fontsize=7)
    axes.set_xlim(-0.5, max(1, len(data.scores)) - 0.5)  # no arm with a score: still a unit-wide axis
    if data.max_score:
        axes.set_ylim(-0.02 * data.max_score, data.max_score * 1.05)
    axes.set_title("score: a point per seed (same seed joined), mean with 95% interval", fontsize=8)
    axes.set_ylabel("score", fontsize=8)
    axes.grid(True, axis="y", alpha=0.3)
    axes.tick_params(labelsize=7)


def draw_profiles(axes: Any, data: PlotData, colours: dict[str, str]) -> None:
    """The performance profile across tasks: per arm the share of normalised scores above τ, its band beneath."""
    for curve in data.profiles:
        colour = colours.get(curve.arm, "0.3")
        axes.plot(curve.thresholds, curve.share, drawstyle="steps-post", color=colour)
        if curve.low is not None and curve.high is not None:
            axes.fill_between(curve.thresholds, curve.low, curve.high, step="post", alpha=0.2, color=colour)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_title(f"performance profile over {data.profile_title}\n(95% stratified bootstrap band)", fontsize=8)
    axes.set_xlabel("normalised score τ", fontsize=8)
    axes.set_ylabel("share of scores > τ", fontsize=8)
    axes.grid(True, alpha=0.3)
    axes.tick_params(labelsize=7)


def build_figure(data: PlotData) -> Any:
    """A matplotlib Figure (Agg canvas): one panel per milestone, per arm a Kaplan–Meier step line and, in the same
    colour, its band. Line i of every panel is arm i (`data.arms`), so one legend serves them all."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    extra = 2 if data.profiles else 1  # the score first, then the performance profile across tasks when there is one
    panels = len(data.milestones) + extra
    columns = min(PANEL_COLUMNS, panels)
    rows = math.ceil(panels / columns)
    figure = Figure(figsize=(PANEL_SIZE[0] * columns, PANEL_SIZE[1] * rows + 1.2), dpi=100)
    grid = figure.subplots(rows, columns, squeeze=False)
    colours = {arm.arm: f"C{index}" for index, arm in enumerate(data.arms)}
    labels = {arm.arm: f"{arm.label} (n={arm.replicates})" for arm in data.arms}
    draw_scores(grid.flat[0], data, colours)
    if data.profiles:
        draw_profiles(grid.flat[1], data, colours)
    for axes, panel in zip(grid.flat[extra:], data.milestones, strict=False):  # the grid may have spare cells
        for drawn in panel.curves:
            curve, colour = drawn.curve, colours[drawn.arm]
            axes.plot(curve.steps, curve.reached, drawstyle="steps-post", color=colour, label=labels[drawn.arm])
            if drawn.n > 1:
                axes.fill_between(curve.steps, curve.low, curve.high, step="post", alpha=0.2, color=colour)
        if data.log_x:
            axes.set_xscale("symlog", linthresh=1)
        axes.set_title(panel.identity, fontsize=9)
        axes.set_ylim(0, 1.02)
        axes.grid(True, alpha=0.3)
        axes.tick_params(labelsize=7)
    for axes in grid.flat[panels:]:
        axes.set_axis_off()
    for axes in grid.flat[extra:panels]:
        axes.set_ylabel("P(reached)", fontsize=8)
        axes.set_xlabel("step" + (" (log)" if data.log_x else ""), fontsize=8)
    figure.suptitle(
        f"{data.title}\nKaplan–Meier: probability of having reached each milestone by step (95% band)"
        + ("" if data.milestones else "\n(no arm reached a milestone)"),
        fontsize=9,
    )
    if data.arms:
        handles = [Line2D([], [], color=colours[arm.arm], label=labels[arm.arm]) for arm in data.arms]
        figure.legend(handles=handles, loc="lower center", ncols=min(len(handles), 3), fontsize=8)
    figure.tight_layout(rect=(0, 0.08, 1, 1))
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
