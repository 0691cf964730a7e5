"""What `run` says of each episode and of the whole run (the outcome models), apart from the runner that makes them:
the executors, the Slurm watcher, `run-episode`, notifications and the CLI read them."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from mcu_arms.contracts.run_report import Failure, RunReport
from mcu_arms.contracts.states import ArmOutcomeStatus
from mcu_arms.layout import STOP_COMMAND, RunDir

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class ArmOutcome(BaseModel):
    arm: str
    seed: int | None = None
    episode: int | None = None
    attempt: int = 1
    retried: bool = False  # a later attempt of this episode was run: this outcome does not decide the exit code
    status: ArmOutcomeStatus
    message: str = ""
    episode_dir: str | None = None
    report_path: str | None = None
    failure: Failure | None = None
    score: float | None = None
    max_score: float | None = None
    steps_run: int | None = None
    milestones_reached: int | None = None
    milestones_total: int | None = None
    milestones_reachable: int | None = None  # on this simulator: what a perfect run reaches
    infrastructure: dict[str, int] = {}
    simulator_label: str | None = None
    alerts: list[str] = []
    agent_reasons: dict[str, int] = {}  # why the agent's turns failed, in its own words (its report's top reasons)
    stopped_on_request: bool = False  # interrupted because a user asked (`mcu-arms stop`): it ended as asked


class RunOutcome(BaseModel):
    arms: list[ArmOutcome]
    interrupted_by: str | None = None

    @property
    def exit_code(self) -> int:
        """0 when every arm ended as asked: finished, or stopped by a user's `mcu-arms stop` (even the last one, whose
        stop ends the run itself); else 1 when an arm failed (arms --fail-fast then stopped count as that failure);
        else 130: the run was interrupted (Ctrl-C, a signal) before its arms ended. An attempt that was retried does
        not count: its retry does."""
        counted = [arm for arm in self.arms if not arm.retried]
        if any(arm.status == "failed" for arm in counted):
            return EXIT_FAILED
        unasked = [arm for arm in counted if arm.status == "interrupted" and not arm.stopped_on_request]
        if unasked or (self.interrupted_by and not any(arm.stopped_on_request for arm in counted)):
            return EXIT_INTERRUPTED
        return EXIT_OK

    def stopped_by_users(self) -> list[tuple[str, str]]:
        """(arm, who) for each arm a user stopped: what `run` says beside its exit code 0."""
        return [
            (arm.arm, arm.failure.stopped_by or STOP_COMMAND)
            for arm in self.arms
            if arm.stopped_on_request and arm.failure is not None
        ]


def outcome_of(report: RunReport, *, episode_dir: str, report_path: str | None, attempt: int) -> ArmOutcome:
    """What `run` says of an episode, from its final report (written here, or on a Slurm node)."""
    reached, total, reachable = report.milestone_counts()
    return ArmOutcome(
        arm=report.arm,
        seed=report.settings.seed,
        episode=report.episode,
        attempt=attempt,
        status=report.status,  # type: ignore[arg-type]
        episode_dir=episode_dir,
        report_path=report_path,
        failure=report.failure,
        score=report.score,
        max_score=report.max_score,
        steps_run=report.steps_run,
        milestones_reached=reached,
        milestones_total=total or None,
        milestones_reachable=reachable if total else None,
        infrastructure=dict(report.infrastructure),
        simulator_label=report.simulator_label,
        alerts=list(report.alerts),
        agent_reasons=dict(report.agent.top_failure_reasons) if report.agent else {},
        stopped_on_request=report.status == "interrupted" and RunDir(Path(episode_dir)).stopped_by_user(),
    )


def retryable(outcome: ArmOutcome) -> bool:
    """Only an episode that failed for infrastructure reasons is run again; one that failed because of the agent
    under test, or was stopped, is kept as it is."""
    return outcome.status == "failed" and outcome.failure is not None and outcome.failure.kind == "infrastructure"
