"""Everything in output/ at a glance: each arm's experiments and each campaign, latest first, with how many episodes
finished, how the latest ended and the mean score; what the viewer opens on, and what heads `report --html`.

Read with today's loaders (layout.arm_runs): a report that cannot be read is counted, never trusted.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from statistics import fmean
from typing import Literal

from pydantic import BaseModel

from mcu_arms.contracts.run_report import RunReport
from mcu_arms.layout import arm_runs, known_arms

FINGERPRINT_SHOWN = 12  # a fingerprint prefix `--experiment` accepts


class IndexRow(BaseModel):
    kind: Literal["experiment", "campaign"]
    name: str  # the arm, or the campaign
    arms: list[str]  # the arm itself, or the campaign's arms
    experiment: str | None  # a fingerprint prefix (an arm's experiment)
    latest: str  # when its latest episode started (ISO)
    episodes: int
    finished: int  # n: the episodes a comparison would use at most
    status: str  # its latest episode's
    score: float | None  # mean over its finished episodes
    unreadable: int = 0  # result.json files that could not be read
    command: str  # how to open it in the viewer

    def score_text(self) -> str:
        return "-" if self.score is None else f"{self.score:g}"


def _row(kind: Literal["experiment", "campaign"], name: str, reports: list[RunReport], command: str) -> IndexRow:
    newest = max(reports, key=lambda report: report.started_at)
    scores = [r.score for r in reports if r.status == "finished" and r.score is not None]
    return IndexRow(
        kind=kind,
        name=name,
        arms=sorted({report.arm for report in reports}),
        experiment=newest.fingerprint[: FINGERPRINT_SHOWN + 3] if kind == "experiment" else None,  # "v2:" + prefix
        latest=newest.started_at,
        episodes=len(reports),
        finished=sum(report.status == "finished" for report in reports),
        status=newest.status,
        score=round(fmean(scores), 3) if scores else None,
        command=command,
    )


def build_index(output_dir: Path) -> list[IndexRow]:
    """An experiment row per (arm, fingerprint) and a row per campaign, the most recently started first."""
    rows: list[IndexRow] = []
    campaigns: dict[str, list[RunReport]] = {}
    for arm in known_arms(output_dir):
        runs = arm_runs(output_dir / arm)
        by_experiment: dict[str, list[RunReport]] = {}
        for run in runs:
            if run.report is None:
                continue
            by_experiment.setdefault(run.report.fingerprint, []).append(run.report)
            if run.report.campaign is not None:
                campaigns.setdefault(run.report.campaign.name, []).append(run.report)
        unreadable = sum(run.report_error is not None for run in runs)
        several = len(by_experiment) > 1
        for fingerprint, reports in by_experiment.items():
            prefix = fingerprint.split(":", 1)[-1][:FINGERPRINT_SHOWN]
            command = f"mcu-arms view {shlex.quote(arm)}" + (f" --experiment {prefix}" if several else "")
            rows.append(_row("experiment", arm, reports, command).model_copy(update={"unreadable": unreadable}))
    for name, reports in campaigns.items():
        rows.append(_row("campaign", name, reports, f"mcu-arms view campaigns/{shlex.quote(name)}.toml"))
    return sorted(rows, key=lambda row: row.latest, reverse=True)


def latest_experiments(rows: list[IndexRow]) -> list[str]:
    """Each arm's most recently run experiment, as `--experiment` prefixes: what the viewer compares when nothing is
    named, instead of refusing an arm with several."""
    latest: dict[str, str] = {}
    for row in rows:  # latest first
        if row.kind == "experiment" and row.experiment is not None:
            latest.setdefault(row.name, row.experiment.split(":", 1)[-1])
    return list(latest.values())
