"""What earlier runs of an arm left behind: its episode dirs and their reports, newest first.

Used by `run` (skip an arm whose latest run finished with the same fingerprint; refuse one that is running now) and
by `status`/`stop`. Light: pydantic and psutil only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcu_arms.arms.plan import ArmPlan
from mcu_arms.report.run_report import RunReport, arm_episodes
from mcu_arms.procs import verified_process

SUPERVISOR_ROLE = "mcu-arms"
STOP_REQUEST = "stop.request"


def latest_report(arm_output: Path) -> RunReport | None:
    return next((e.report for e in arm_episodes(arm_output) if e.report is not None), None)


def latest_finished(arm_output: Path) -> RunReport | None:
    return next((e.report for e in arm_episodes(arm_output) if e.report and e.report.status == "finished"), None)


def supervisor_alive(report: RunReport) -> bool:
    """Is the `mcu-arms run` that wrote this `started` report still running (same pid and create_time)?"""
    record = report.processes.get(SUPERVISOR_ROLE)
    return record is not None and verified_process(record.pid, record.create_time) is not None


@dataclass(frozen=True)
class RerunDecision:
    skip: bool
    message: str | None  # said to the user: why skipped, or which settings changed since the last finished run


def rerun_decision(plan: ArmPlan, arm_output: Path, *, rerun: bool) -> RerunDecision:
    """Skip when the latest run of this arm finished with the same fingerprint; announce a changed fingerprint."""
    latest = latest_report(arm_output)
    if latest is not None and latest.status == "finished" and latest.fingerprint == plan.fingerprint:
        where = f"episode_{latest.episode:03d}"
        if rerun:
            return RerunDecision(False, f"{plan.arm}: {where} already finished with this fingerprint; --rerun runs it again")
        return RerunDecision(
            True, f"{plan.arm}: skipped, {where} already finished with fingerprint {plan.fingerprint} (--rerun to run again)"
        )
    finished = latest_finished(arm_output)
    if finished is not None and finished.fingerprint != plan.fingerprint:
        changed = changed_settings(finished, plan)
        shown = "; ".join(f"{key}: {old!r} -> {new!r}" for key, (old, new) in changed.items()) or "fingerprint version"
        return RerunDecision(
            False,
            f"{plan.arm}: fingerprint changed since episode_{finished.episode:03d} "
            f"({finished.fingerprint} -> {plan.fingerprint}): {shown}",
        )
    return RerunDecision(False, None)


def changed_settings(report: RunReport, plan: ArmPlan) -> dict[str, tuple[object, object]]:
    """Fingerprinted settings that differ, old -> new; values of secret-looking env variables are masked."""
    old, new = report.settings.redacted().fingerprinted(), plan.settings.redacted().fingerprinted()
    return {key: (old.get(key), new.get(key)) for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)}
