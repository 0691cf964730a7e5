"""MCU scoring: simulator rewards from event counters, milestones, and the video-evaluation blend.

The tracker reads per-step deltas of cumulative counters exactly as MineStudio's RewardsCallback does, so both
simulators score the same task files the same way. Only pydantic here: light to import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

from mcu_arms.contracts.evaluation import GradedFrames, MilestoneResult
from mcu_arms.contracts.rubric import VideoRubric
from mcu_arms.contracts.tasks import RewardEntry, ScoringKind, TaskSpec

CRITERIA: tuple[str, ...] = (
    "task_progress",
    "action_control",
    "error_recognition_and_correction",
    "creative_attempts",
    "task_completion_efficiency",
    "material_selection_and_usage",
)
REWARD_MAX_SCORE = 10.0
MILESTONE_MAX_SCORE = 100.0
VIDEO_MAX_SCORE = 10.0

VideoStatus = Literal["ok", "disabled", "no_api_key", "failed", "skipped_perfect"]
ScoreSource = Literal["sim", "sim+video", "milestones", "milestones+video", "video", "unscored"]


class MilestoneEvent(BaseModel):
    """One payout: entry `identity` paid `reward` at `step` because counters[event][object] grew."""

    identity: str
    event: str
    object: str
    reward: float
    step: int
    kind: Literal["reward", "milestone"]


class RewardTracker:
    """Pays a task's reward or milestone entries from per-step deltas of cumulative counters.

    Counters are cumulative since reset, so the baseline is all zeros. An entry pays at most once per step and at
    most `max_reward_times` in all. Entries named in `unavailable` (no analogue on this simulator) never pay but
    still count in `max_reward` and in the milestone total, so a simulator that cannot observe them scores lower
    rather than looking complete.
    """

    def __init__(self, task: TaskSpec, unavailable: Iterable[str] = ()) -> None:
        self.task = task
        self.kind: Literal["reward", "milestone"] = "milestone" if task.milestones else "reward"
        self.entries: tuple[RewardEntry, ...] = task.milestones or task.reward_cfg
        known = {entry.identity for entry in self.entries}
        self.unavailable: frozenset[str] = frozenset(unavailable)
        unknown = self.unavailable - known
        if unknown:
            raise ValueError(f"unavailable entries not in task {task.name}: {sorted(unknown)}")
        self._previous: dict[str, dict[str, int]] = {}
        self._payouts: dict[str, int] = {}
        self._events: list[MilestoneEvent] = []
        self._reached: dict[str, int] = {}

    def update(self, step: int, counters: Mapping[str, Mapping[str, int]]) -> list[MilestoneEvent]:
        """Pay every entry whose counters grew since the previous update; return this step's payouts."""
        paid: list[MilestoneEvent] = []
        for entry in self.entries:
            if entry.identity in self.unavailable or self._payouts.get(entry.identity, 0) >= entry.max_reward_times:
                continue
            now = counters.get(entry.event, {})
            before = self._previous.get(entry.event, {})
            grown = [obj for obj in entry.objects if now.get(obj, 0) > before.get(obj, 0)]
            if not grown:
                continue
            self._payouts[entry.identity] = self._payouts.get(entry.identity, 0) + 1
            self._reached.setdefault(entry.identity, step)
            paid.append(
                MilestoneEvent(
                    identity=entry.identity,
                    event=entry.event,
                    object=grown[0],
                    reward=entry.reward,
                    step=step,
                    kind=self.kind,
                )
            )
        self._previous = {event: dict(objects) for event, objects in counters.items()}
        self._events.extend(paid)
        return paid

    @property
    def sim_reward(self) -> float:
        return sum(event.reward for event in self._events)

    @property
    def max_reward(self) -> float:
        return sum(entry.reward * entry.max_reward_times for entry in self.entries)

    @property
    def events(self) -> list[MilestoneEvent]:
        return list(self._events)

    @property
    def reached(self) -> dict[str, int]:
        """Identity -> the step it first paid."""
        return dict(self._reached)

    def is_perfect(self) -> bool:
        """Everything payable was paid: video evaluation would add nothing."""
        return bool(self.entries) and self.sim_reward >= self.max_reward


class VideoEvaluation(BaseModel):
    """The outcome of video evaluation; anything but "ok" carries the reason, and no scores."""

    status: VideoStatus
    reason: str = ""
    task_progress: float | None = Field(default=None, ge=0, le=10)
    criteria: dict[str, float] = Field(default_factory=dict)
    model: str | None = None
    rubric: VideoRubric = "mcu_arms"
    graded_frames: GradedFrames | None = None


class TaskScore(BaseModel):
    task: str
    category: str
    scoring_kind: ScoringKind
    max_score: float
    sim_score: float  # the raw reward sum, upstream's meaning
    normalised_sim_score: float | None  # scaled to max_score; None for a video-only task: the simulator scores nothing
    score: float | None  # None: unscored (e.g. video-only without video evaluation), never a silent 0
    scored: bool
    score_source: ScoreSource
    milestones: list[MilestoneResult]
    milestones_available: int
    milestones_total: int
    video: VideoEvaluation
    criteria: dict[str, float]


def score_task(task: TaskSpec, tracker: RewardTracker, video: VideoEvaluation) -> TaskScore:
    """Combine the tracker's payouts and the video evaluation into the task's MCU score."""
    progress = video.task_progress if video.status == "ok" else None  # 0-10, only from a usable evaluation
    reached = tracker.reached
    milestones = [
        MilestoneResult(
            identity=entry.identity,
            step=reached.get(entry.identity),
            available=entry.identity not in tracker.unavailable,
        )
        for entry in tracker.entries
    ]
    source: ScoreSource
    kind = task.scoring_kind
    sim_score: float | None  # normalised: the simulator's share of max_score
    score: float | None
    if kind == "reward":
        max_score = REWARD_MAX_SCORE
        sim_score = REWARD_MAX_SCORE * tracker.sim_reward / tracker.max_reward if tracker.max_reward > 0 else 0.0
        if sim_score < REWARD_MAX_SCORE and progress is not None:
            score, source = (sim_score + progress) / 2, "sim+video"
        else:
            score, source = sim_score, "sim"
    elif kind == "milestones":
        max_score = MILESTONE_MAX_SCORE
        total = len(tracker.entries)
        completed = sum(1 for state in milestones if state.step is not None)
        sim_score = MILESTONE_MAX_SCORE * completed / total
        if completed < total and progress is not None:
            current_milestone_share = progress / VIDEO_MAX_SCORE
            score, source = MILESTONE_MAX_SCORE * (completed + current_milestone_share) / total, "milestones+video"
        else:
            score, source = sim_score, "milestones"
    else:
        max_score = VIDEO_MAX_SCORE
        sim_score = None
        score, source = (progress, "video") if progress is not None else (None, "unscored")
    return TaskScore(
        task=task.name,
        category=task.category,
        scoring_kind=kind,
        max_score=max_score,
        sim_score=tracker.sim_reward,
        normalised_sim_score=sim_score,
        score=score,
        scored=score is not None,
        score_source=source,
        milestones=milestones,
        milestones_available=sum(1 for state in milestones if state.available),
        milestones_total=len(milestones),
        video=video,
        criteria=dict(video.criteria) if progress is not None else {},
    )
