"""Video evaluation: a vision model grades sampled frames of an episode on the six MCU criteria.

Two rubrics (contracts/rubric.py), and every result names the one used:
- `mcu`: MCU's own, as MCU-AgentBeats grades. The rating prompt (the system message) and the task's criteria file
  are read from the user's checkout of MCU's auto_eval folder; every 20th frame (every 60th from 1,200 frames on)
  as JPEG quality 85; temperature 0, top_p 1, seed 42; the answer's "- Task Progress: 7" lines are parsed. The user
  message that carries the task name and the criteria is worded by us.
- `mcu_arms`: our generic prompt and six criteria (MCU_benchmark/auto_eval/), up to 16 evenly spaced PNG frames,
  a JSON answer.

The frames graded are the simulator's recording of the render when there is one (MineStudio's RecordCallback at
640x360, what MCU grades), else the observation frames the step log saved (at the agent's obs_size); the result says
which (GradedFrames).

It never raises: a disabled evaluation, a missing OPENAI_API_KEY and every failure come back as a status with a
reason, so the score falls back loudly (score_task marks what was used).
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from mcu_arms.contracts.evaluation import GradedFrames
from mcu_arms.contracts.resources import AUTO_EVAL_DIR
from mcu_arms.contracts.rubric import MCU_PROMPT_FILE, criteria_file, rubric_of
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.wire import DEFAULT_VIDEO_MODEL
from mcu_arms.green.scoring import CRITERIA, VideoEvaluation, VideoStatus
from mcu_arms.green.sims.base import Recording

PROMPT_FILE = AUTO_EVAL_DIR / "prompt" / "video_eval.md"
CRITERIA_FILE = AUTO_EVAL_DIR / "criteria.yaml"
MAX_FRAMES = 16
REQUEST_SEED = 20240601
REQUEST_TIMEOUT_S = 180.0
DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_REASON_CHARS = 500
# MCU's rubric, as MCU-AgentBeats applies it.
MCU_FRAME_EVERY = 20
MCU_LONG_FRAME_EVERY = 60
MCU_LONG_FROM_FRAMES = 1200
MCU_JPEG_QUALITY = 85
MCU_REQUEST_SEED = 42
# How MCU's answer names each criterion ("- Task Progress: 7").
MCU_CRITERION_NAMES: dict[str, str] = {
    "Task Progress": "task_progress",
    "Action Control": "action_control",
    "Error Recognition and Correction": "error_recognition_and_correction",
    "Creative Attempts": "creative_attempts",
    "Task Completion Efficiency": "task_completion_efficiency",
    "Material Selection and Usage": "material_selection_and_usage",
}
_MCU_SCORE_LINE = re.compile(
    r"^(?:-\s*)?(?P<name>" + "|".join(map(re.escape, MCU_CRITERION_NAMES)) + r")"
    r"\s*:\s*(?P<value>[-+]?\d+(?:\.\d+)?)\s*$"
)


@dataclass(frozen=True)
class _Request:
    """One grading request, whichever rubric built it."""

    messages: list[dict[str, Any]]
    options: dict[str, Any]  # sampling options for chat.completions.create
    graded: GradedFrames


def evaluate_video(
    task: TaskSpec,
    frames_dir: Path | None,
    recording: Recording | None,
    *,
    enabled: bool,
    env: Mapping[str, str],
    model: str = DEFAULT_VIDEO_MODEL,
    needed: bool,
    reached: Iterable[str] = (),
    auto_eval_dir: Path | None = None,
) -> VideoEvaluation:
    """Grade the episode's frames (the `recording` of the render, else the PNG files in `frames_dir`).

    `needed` is False when the simulator score is already full; `reached` names the milestones already reached, so
    that for a milestone task the model grades progress on the current (first unreached) milestone. With
    `auto_eval_dir` (a checkout of MCU's auto_eval folder) MCU's rubric grades; without, ours.
    """
    rubric = rubric_of(auto_eval_dir)

    def outcome(status: VideoStatus, reason: str) -> VideoEvaluation:
        return VideoEvaluation(status=status, reason=reason, model=model, rubric=rubric)

    if not needed:
        return outcome("skipped_perfect", "the simulator score is already full")
    if not enabled:
        return outcome("disabled", "video evaluation is off (video_eval = false)")
    api_key = env.get("OPENAI_API_KEY", "")
    if not api_key:
        return outcome("no_api_key", "OPENAI_API_KEY is not set, so video evaluation cannot run")
    try:
        if auto_eval_dir is not None:
            request = _mcu_request(task, auto_eval_dir, frames_dir, recording, set(reached))
        else:
            request = _our_request(task, frames_dir, recording, set(reached))
        if request is None:
            return outcome("failed", f"no frames to evaluate (frames_dir={frames_dir}, recording={recording})")
        answer = _ask_model(
            request, api_key=api_key, base_url=env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL, model=model
        )
        scores = parse_mcu_scores(answer) if auto_eval_dir is not None else parse_scores(answer)
    except Exception as error:  # the contract is a status, never an exception
        return outcome("failed", f"{type(error).__name__}: {error}"[:MAX_REASON_CHARS])
    return VideoEvaluation(
        status="ok",
        task_progress=scores["task_progress"],
        criteria=scores,
        model=model,
        rubric=rubric,
        graded_frames=request.graded,
    )


def _our_request(
    task: TaskSpec, frames_dir: Path | None, recording: Recording | None, reached: set[str]
) -> _Request | None:
    source = _FrameSource.of(frames_dir, recording)
    if source is None:
        return None
    frames = [_png(frame) for frame in source.frames(_evenly(source.count, MAX_FRAMES))]
    content: list[dict[str, Any]] = [{"type": "text", "text": build_prompt(task, len(frames), source.count, reached)}]
    content += [_image_part("image/png", frame, detail="low") for frame in frames]
    return _Request(
        messages=[{"role": "user", "content": content}],
        options={"temperature": 0, "seed": REQUEST_SEED, "response_format": {"type": "json_object"}},
        graded=source.graded(len(frames)),
    )


def _mcu_request(
    task: TaskSpec, auto_eval_dir: Path, frames_dir: Path | None, recording: Recording | None, reached: set[str]
) -> _Request | None:
    """MCU's rating prompt as the system message, then the task and its criteria, then the sampled frames."""
    criteria_path = criteria_file(auto_eval_dir, task.name)
    if not criteria_path.is_file():
        raise FileNotFoundError(
            f"MCU's auto_eval folder {auto_eval_dir} has no criteria file for {task.name} ({criteria_path})"
        )
    system = (auto_eval_dir / MCU_PROMPT_FILE).read_text(encoding="utf-8")
    criteria = criteria_path.read_text(encoding="utf-8")
    source = _FrameSource.of(frames_dir, recording)
    if source is None:
        return None
    every = MCU_LONG_FRAME_EVERY if source.count >= MCU_LONG_FROM_FRAMES else MCU_FRAME_EVERY
    frames = [_jpeg(frame) for frame in source.frames(range(0, source.count, every))]
    text = (
        f"Task: {task.name.replace('_', ' ')}\n{_milestone_focus(task, reached)}"
        f"Grade the agent in the video frames that follow by these criteria:\n{criteria}"
    )
    return _Request(
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": text},
            {"role": "user", "content": [_image_part("image/jpeg", frame) for frame in frames]},
        ],
        options={"temperature": 0, "top_p": 1, "seed": MCU_REQUEST_SEED, "frequency_penalty": 0, "presence_penalty": 0},
        graded=source.graded(len(frames)),
    )


@dataclass(frozen=True)
class _FrameSource:
    """The episode's frames to grade: the recording of the render if there is one, else the observation PNGs."""

    graded_source: Literal["render_recording", "observation_frames"]
    path: Path
    count: int
    width: int
    height: int

    @staticmethod
    def of(frames_dir: Path | None, recording: Recording | None) -> _FrameSource | None:
        if recording is not None and recording.path.is_file():
            count, (height, width) = 0, (recording.height, recording.width)
            for frame in _video_frames(recording.path):
                count, (height, width) = count + 1, frame.shape[:2]
            return _FrameSource("render_recording", recording.path, count, width, height) if count else None
        if frames_dir is not None and frames_dir.is_dir() and (paths := sorted(frames_dir.glob("*.png"))):
            from PIL import Image

            with Image.open(paths[0]) as first:
                width, height = first.size
            return _FrameSource("observation_frames", frames_dir, len(paths), width, height)
        return None

    def frames(self, indices: Iterable[int]) -> list[Any]:
        """The frames at `indices`, as RGB arrays."""
        wanted = set(indices)
        if self.graded_source == "render_recording":
            return [frame for index, frame in enumerate(_video_frames(self.path)) if index in wanted]
        import numpy as np
        from PIL import Image

        chosen = []
        for index, path in enumerate(sorted(self.path.glob("*.png"))):
            if index in wanted:
                with Image.open(path) as image:
                    chosen.append(np.asarray(image.convert("RGB")))
        return chosen

    def graded(self, sent: int) -> GradedFrames:
        return GradedFrames(
            source=self.graded_source,
            path=str(self.path),
            width=self.width,
            height=self.height,
            frames_in_episode=self.count,
            frames_sent=sent,
        )


def _video_frames(path: Path) -> Iterator[Any]:
    """The RGB frames of a video, decoded with OpenCV (which MineStudio 1.1.6 installs); imageio where there is none."""
    try:
        import cv2
    except ImportError:
        import imageio.v3 as iio

        yield from iio.imiter(path)
        return
    capture = cv2.VideoCapture(str(path))
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                return
            yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    finally:
        capture.release()


def _png(frame: Any) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return buffer.getvalue()


def _jpeg(image: Any) -> bytes:
    from PIL import Image

    picture = image if isinstance(image, Image.Image) else Image.fromarray(image)
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=MCU_JPEG_QUALITY)
    return buffer.getvalue()


def parse_mcu_scores(answer: str) -> dict[str, float]:
    """The criteria from MCU-style "- Key: value" lines, clipped to 0..10 as MCU-AgentBeats clips them.

    Task Progress is the score, so an answer without it is an error (MCU-AgentBeats would count it as 0 silently);
    a criterion the answer leaves out is left out.
    """
    scores: dict[str, float] = {}
    for line in answer.splitlines():
        match = _MCU_SCORE_LINE.match(line.strip())
        if match:
            scores[MCU_CRITERION_NAMES[match["name"]]] = min(10.0, max(0.0, float(match["value"])))
    if "task_progress" not in scores:
        raise ValueError(f"the answer has no '- Task Progress: N' line; it starts {answer[:120]!r}")
    return scores


def build_prompt(task: TaskSpec, frame_count: int, step_count: int, reached: set[str]) -> str:
    criteria = yaml.safe_load(CRITERIA_FILE.read_text(encoding="utf-8"))["criteria"]
    listed = "\n".join(f"- {item['key']} ({item['name']}): {item['description']}" for item in criteria)
    focus = _milestone_focus(task, reached)
    return PROMPT_FILE.read_text(encoding="utf-8").format(
        frame_count=frame_count,
        step_count=step_count,
        task_text=task.text,
        focus=f"\n{focus}" if focus else "",
        criteria=listed,
        score_keys=", ".join(f'"{key}": <0-10>' for key in CRITERIA),
    )


def _milestone_focus(task: TaskSpec, reached: set[str]) -> str:
    """For a milestone task, the line that points Task Progress at the current milestone (both rubrics)."""
    pending = [entry for entry in task.milestones if entry.identity not in reached]
    if not task.milestones or not pending:
        return ""
    current = pending[0]
    objects = ", ".join(current.objects)
    return (
        f"This is a long task scored by milestones; {len(task.milestones) - len(pending)} of "
        f"{len(task.milestones)} are already reached. For Task Progress, grade only progress toward the "
        f"current milestone '{current.identity}' ({current.event.replace('_', ' ')}: {objects}), where 10 "
        f"means it is done.\n"
    )


def parse_scores(answer: str) -> dict[str, float]:
    """The six criteria from the model's JSON answer; anything missing or out of range is an error."""
    data = json.loads(answer)
    scores = data.get("scores", data) if isinstance(data, dict) else None
    if not isinstance(scores, dict):
        raise ValueError("the answer has no 'scores' object")
    parsed: dict[str, float] = {}
    for key in CRITERIA:
        value = scores.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10:
            raise ValueError(f"criterion '{key}' is missing or not a number in 0..10: {value!r}")
        parsed[key] = float(value)
    return parsed


def _evenly(count: int, wanted: int) -> list[int]:
    if count <= wanted:
        return list(range(count))
    return sorted({round(i * (count - 1) / (wanted - 1)) for i in range(wanted)})


def _image_part(media_type: str, frame: bytes, **extra: str) -> dict[str, Any]:
    url = f"data:{media_type};base64," + base64.b64encode(frame).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def _ask_model(request: _Request, *, api_key: str, base_url: str, model: str) -> str:
    from openai import OpenAI

    client = OpenAI(api_key=api_key, base_url=base_url, timeout=REQUEST_TIMEOUT_S, max_retries=2)
    try:
        # plain role/content dicts, which openai's TypedDict unions do not accept as typed
        response = client.chat.completions.create(model=model, messages=request.messages, **request.options)  # type: ignore[arg-type]
    finally:
        client.close()
    answer = response.choices[0].message.content
    if not answer:
        raise ValueError("the model returned an empty answer")
    return answer
