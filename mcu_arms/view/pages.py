"""The pages as HTML: jinja2 templates (autoescaped, undefined names are errors) over the typed results.

jinja2 is imported here only, when a page is rendered: the light commands never load it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mcu_arms import __version__
from mcu_arms.report.analysis import Analysis, simulator_label
from mcu_arms.report.compare import (
    across_tasks_title,
    annotation_lines,
    episode_legend,
    episode_rows,
    excluded_lines,
    experiment_text,
    filter_text,
    milestone_text,
    result_rows,
    setting_text,
)
from mcu_arms.report.index import IndexRow
from mcu_arms.view.downsample import LATENCY_BUCKETS
from mcu_arms.view.episode import EpisodeView

TEMPLATES_DIR = Path(__file__).parent / "templates"
# Also sent as a header by the server. 'self' covers sibling files under file:// too; plotly adds <style> elements.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'none'; font-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'"
)


@dataclass(frozen=True)
class EpisodeLink:
    """An episode page as the comparison page links to it."""

    id: str
    arm: str
    episode: int
    task: str
    href: str  # relative to the site's root
    running: bool = False
    seed: int | None = None  # how a link is named: episodes of one arm differ by their seed


@functools.cache
def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    return Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _common(generated_at: datetime, root: str, refresh_s: int | None) -> dict[str, Any]:
    return {
        "root": root,
        "refresh_s": refresh_s,
        "csp": CONTENT_SECURITY_POLICY,
        "version": __version__,
        "generated_at": generated_at.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def render_comparison(
    result: Analysis,
    episode_links: list[EpisodeLink],
    generated_at: datetime,
    *,
    running: dict[str, str] | None = None,
    unfinished: dict[str, str] | None = None,
    refresh_s: int | None = None,
    index_rows: list[tuple[IndexRow, str | None]] | None = None,
) -> str:
    """`running`: per arm whose latest episode runs, its progress in words; `unfinished`: per arm whose latest
    episode's report says started though its supervisor is gone, the same; `refresh_s`: reload while one runs;
    `index_rows`: every run in output/, each with the link that opens its comparison (None: its command only)."""
    names = result.arm_names()
    links: dict[str, list[EpisodeLink]] = {name: [] for name in names}
    for link in episode_links:
        links[link.arm].append(link)
    facts = episode_rows(result)
    milestones = [
        (row, [milestone_text(cell, name == result.baseline) for cell, name in zip(row.cells, names, strict=True)])
        for row in result.milestones
    ]
    return (
        _templates()
        .get_template("comparison.html.j2")
        .render(
            **_common(generated_at, "", refresh_s),
            result=result,
            running=running or {},
            unfinished=unfinished or {},
            annotations=annotation_lines(result),
            across_title=across_tasks_title(result),
            improvement={each.arm: each for each in result.across_tasks.improvement} if result.across_tasks else {},
            filter_text=filter_text(result),
            names=names,
            links=links,
            results=result_rows(result),
            episode_facts=facts,
            episode_legend=episode_legend(facts),
            excluded=excluded_lines(result),
            experiments={arm.arm: experiment_text(arm) for arm in result.arms},
            simulators={arm.arm: simulator_label(arm) for arm in result.arms},
            settings=[(row, [setting_text(value) for value in row.values]) for row in result.settings],
            milestones=milestones,
            one_task=len({row.task for row in result.milestones}) <= 1,
            index_rows=index_rows or [],
            shown=set(names),
        )
    )


def render_index(rows: list[tuple[IndexRow, str | None]], shown: list[str], generated_at: datetime) -> str:
    """Every run in output/ (report/index.py), each with the link that opens its comparison, if any."""
    return (
        _templates()
        .get_template("runs.html.j2")
        .render(**_common(generated_at, "", None), index_rows=rows, shown=set(shown))
    )


def render_episode(view: EpisodeView, generated_at: datetime, *, refresh_s: int | None = None) -> str:
    return (
        _templates()
        .get_template("episode.html.j2")
        .render(**_common(generated_at, "../../", refresh_s), view=view, latency_buckets=LATENCY_BUCKETS)
    )
