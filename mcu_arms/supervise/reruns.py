"""What earlier runs of an arm decide about this one: skip it (a run of it finished with the same fingerprint and
seed), retry it, or announce a changed fingerprint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcu_arms.contracts.run_report import RunReport
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.contracts.slurm import slurm_time
from mcu_arms.layout import arm_runs, episode_name


def latest_report(arm_dir: Path) -> RunReport | None:
    return next((run.report for run in arm_runs(arm_dir) if run.report is not None), None)


def latest_finished(arm_dir: Path, seed: int) -> RunReport | None:
    return next(
        (
            run.report
            for run in arm_runs(arm_dir)
            if run.report and run.report.status == "finished" and run.report.settings.seed == seed
        ),
        None,
    )


RerunAction = Literal["run", "skip", "retry"]
# The time limit a rerun after a time limit suggests: the episode's need at the pace it kept, with this much to spare.
TIME_LIMIT_HEADROOM = 1.2


@dataclass(frozen=True)
class RerunDecision:
    action: RerunAction  # skip: finished with this fingerprint; retry: its latest run did not finish
    message: str | None  # said to the user: why skipped or retried, or which settings changed since the last run

    @property
    def skip(self) -> bool:
        return self.action == "skip"


def _same_campaign(plan: ArmPlan, report: RunReport) -> bool:
    """A campaign's episode counts only its own campaign's earlier runs (its compare reads no other); an arm run on
    its own counts every earlier run of the arm."""
    if plan.campaign is None:
        return True
    return report.campaign is not None and report.campaign.name == plan.campaign.name


def rerun_decision(plan: ArmPlan, arm_dir: Path, *, rerun: bool) -> RerunDecision:
    """Skip an episode when any finished run of the arm has its fingerprint and seed (naming that run), however many
    runs with other settings came after it; retry one whose latest run failed or was interrupted (never skip it);
    announce a changed fingerprint."""
    seed = plan.settings.seed
    runs = [
        run.report
        for run in arm_runs(arm_dir)
        if run.report and run.report.settings.seed == seed and _same_campaign(plan, run.report)
    ]
    done = next((r for r in runs if r.status == "finished" and r.fingerprint == plan.fingerprint), None)
    if done is not None:
        where = episode_name(done.episode)
        if rerun:
            return RerunDecision(
                "run", f"{plan.label}: {where} already finished with this fingerprint; --rerun runs it again"
            )
        return RerunDecision(
            "skip",
            f"{plan.label}: skipped, {where} already finished with fingerprint {plan.fingerprint} and seed {seed} "
            "(--rerun to run again)",
        )
    latest = runs[0] if runs else None
    if latest is not None and latest.status in ("failed", "interrupted") and latest.fingerprint == plan.fingerprint:
        if latest.failure is not None and latest.failure.kind == "time_limit":
            return RerunDecision("retry", _restart_after_time_limit(plan, latest))
        why = latest.failure.reason if latest.failure else "no reason recorded"
        return RerunDecision(
            "retry", f"{plan.label}: retried, {episode_name(latest.episode)} ended {latest.status} ({why})"
        )
    finished = latest_finished(arm_dir, seed)
    if finished is not None and finished.fingerprint != plan.fingerprint:
        changed = changed_settings(finished, plan)
        shown = "; ".join(f"{key}: {old!r} -> {new!r}" for key, (old, new) in changed.items()) or "fingerprint version"
        return RerunDecision(
            "run",
            f"{plan.label}: fingerprint changed since {episode_name(finished.episode)} "
            f"({finished.fingerprint} -> {plan.fingerprint}): {shown}",
        )
    return RerunDecision("run", None)


def _restart_after_time_limit(plan: ArmPlan, latest: RunReport) -> str:
    """A time-limited episode is run again from its start (neither simulator can save a task mid-way, nor can the
    agents resume one): say so, how long it ran, and what time limit would fit it at the pace it kept."""
    where = episode_name(latest.episode)
    ran = f" after {slurm_time(max(int(latest.wall_s), 1))}" if latest.wall_s else ""
    done = f" ({latest.steps_run} of {latest.settings.steps} steps)" if latest.steps_run else ""
    text = (
        f"{plan.label}: restarted from its first step as a new episode: {where} hit its Slurm time limit{ran}{done} "
        "(an episode cannot continue mid-task: neither the simulators nor the agents can resume one)"
    )
    if latest.steps_run and latest.wall_s and plan.slurm is not None:
        needed_s = latest.wall_s / latest.steps_run * latest.settings.steps * max(len(plan.tasks), 1)
        fits_s = math.ceil((needed_s * TIME_LIMIT_HEADROOM + plan.slurm.stop_margin_s) / 60) * 60
        now = slurm_time(plan.slurm.time_minutes * 60)
        verdict = "is too short" if fits_s > plan.slurm.time_minutes * 60 else "should fit"
        text += (
            f"; at that pace the episode needs about {slurm_time(int(needed_s))}, so a time limit of about "
            f"{slurm_time(fits_s)} would fit (with its {plan.slurm.stop_margin_s} s stop margin and "
            f"{TIME_LIMIT_HEADROOM - 1:.0%} to spare): the limit now set ({now}) {verdict}"
        )
        if fits_s > plan.slurm.time_minutes * 60:
            text += ": raise [slurm] time or --slurm-time"
    return text


def changed_settings(report: RunReport, plan: ArmPlan) -> dict[str, tuple[object, object]]:
    """Fingerprinted settings that differ, old -> new; values of secret-looking env variables are masked."""
    old, new = report.settings.redacted().fingerprinted(), plan.settings.redacted().fingerprinted()
    return {key: (old.get(key), new.get(key)) for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)}
