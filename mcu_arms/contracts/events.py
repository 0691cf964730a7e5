"""The green agent's progress events: typed, so that nobody downstream parses its status text.

Each status update the green streams carries a human line (a text part, as AgentBeats clients print it) and the same
event as data (a data part, which those clients ignore). `mcu-arms evaluate --events FILE` appends every event it
receives to FILE as an `EventRecord` line; the supervisor reads that file. Numbers in A2A data parts arrive as floats
(protobuf Values); the models here accept 3.0 as 3.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from mcu_arms.contracts.rubric import VideoRubric
from mcu_arms.contracts.wire import DEFAULT_OBS_ENCODING, DEFAULT_OBS_SIZE, ObsEncoding


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EvaluationStarted(_Event):
    kind: Literal["evaluation_started"] = "evaluation_started"
    category: str
    tasks: list[str]  # in the order they run
    skipped: dict[str, str] = Field(default_factory=dict)  # task -> why this simulator cannot run it
    simulator_label: str
    max_steps: int
    max_steps_note: str | None = None
    step_timeout: float
    seed: int
    video_model: str | None = None  # None: video evaluation off
    video_rubric: VideoRubric = "mcu_arms"
    obs_size: tuple[int, int] = DEFAULT_OBS_SIZE
    obs_encoding: ObsEncoding = DEFAULT_OBS_ENCODING
    output_dir: str

    def text(self) -> str:
        video = f"on ({self.video_model}, {self.video_rubric} rubric)" if self.video_model else "off"
        width, height = self.obs_size
        return (
            f"Starting MCU evaluation with {len(self.tasks)} tasks from {self.category} on {self.simulator_label}; "
            f"max_steps {self.max_steps}, step_timeout {self.step_timeout:g} s, seed {self.seed}; "
            f"observations {width}x{height} {self.obs_encoding}; video evaluation {video}; output {self.output_dir}"
        )


class ConfigKeysIgnored(_Event):
    """The request's config named keys this green does not use: accepted, as upstream's green accepts them."""

    kind: Literal["config_keys_ignored"] = "config_keys_ignored"
    keys: list[str]

    def text(self) -> str:
        return f"Ignoring config keys this green does not use: {', '.join(self.keys)}"


class TaskSkipped(_Event):
    kind: Literal["task_skipped"] = "task_skipped"
    task: str
    reason: str

    def text(self) -> str:
        return f"Skipping task {self.task}: {self.reason}"


class Notice(_Event):
    """Something about the whole evaluation a reader must see (e.g. the step cap applied)."""

    kind: Literal["notice"] = "notice"
    message: str

    def text(self) -> str:
        return self.message


class TaskStarted(_Event):
    kind: Literal["task_started"] = "task_started"
    task: str
    index: int  # 0-based, in EvaluationStarted.tasks
    count: int
    entries: int = 0  # reward or milestone entries the task scores
    reachable: int = 0  # of those, the ones this simulator can observe at all

    def text(self) -> str:
        return f"Running task: {self.task}"


class InitFailed(_Event):
    kind: Literal["init_failed"] = "init_failed"
    task: str
    cause: str
    message: str

    def text(self) -> str:
        return f"{self.task}: agent init failed ({self.cause}: {self.message})"


class MilestoneReached(_Event):
    kind: Literal["milestone"] = "milestone"
    task: str
    step: int
    entry_kind: str  # reward | milestone
    identity: str
    reached: int
    total: int
    reward: float
    max_reward: float

    def text(self) -> str:
        return (
            f"{self.task}: step {self.step} {self.entry_kind} {self.identity} reached "
            f"({self.reached}/{self.total}, reward {self.reward:g}/{self.max_reward:g})"
        )


class TaskProgress(_Event):
    kind: Literal["task_progress"] = "task_progress"
    task: str
    steps_done: int
    max_steps: int
    reward: float
    max_reward: float
    reached: int
    total: int
    noops: int

    def text(self) -> str:
        return (
            f"{self.task}: step {self.steps_done}/{self.max_steps}, reward {self.reward:g}/{self.max_reward:g}, "
            f"reached {self.reached}/{self.total}, noops {self.noops}"
        )


class TaskFinished(_Event):
    kind: Literal["task_finished"] = "task_finished"
    task: str
    score: float | None
    max_score: float
    score_source: str
    steps_run: int
    noop_total: int
    error: str | None = None

    def text(self) -> str:
        score = "unscored" if self.score is None else f"{self.score:.2f} / {self.max_score:g}"
        tail = f"; error: {self.error}" if self.error else ""
        return (
            f"Task {self.task} finished: score {score} [{self.score_source}] after {self.steps_run} steps, "
            f"noops {self.noop_total}{tail}"
        )


class EvaluationFinished(_Event):
    kind: Literal["evaluation_finished"] = "evaluation_finished"
    total_score: float
    total_max_score: float
    scored_tasks: int
    num_tasks: int

    def text(self) -> str:
        return (
            f"Evaluation complete: total score {self.total_score:.2f} / {self.total_max_score:.2f} "
            f"over {self.scored_tasks} scored of {self.num_tasks} tasks"
        )


GreenEvent = Annotated[
    EvaluationStarted
    | ConfigKeysIgnored
    | TaskSkipped
    | Notice
    | TaskStarted
    | InitFailed
    | MilestoneReached
    | TaskProgress
    | TaskFinished
    | EvaluationFinished,
    Field(discriminator="kind"),
]
GREEN_EVENT = TypeAdapter(GreenEvent)


def parse_event(data: object) -> GreenEvent | None:
    """The event a status update's data part holds, or None when it holds none of ours."""
    try:
        return GREEN_EVENT.validate_python(data)
    except ValidationError:
        return None


class EventRecord(BaseModel):
    """One line of an episode's events.jsonl: when the client received the event, and the event."""

    at: str
    event: GreenEvent
