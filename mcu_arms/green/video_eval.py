"""Video evaluation: a vision model grades sampled frames of an episode on the six MCU criteria.

Two rubrics (contracts/rubric.py), and every result names the one used:
- `mcu`: MCU's own, as MCU-AgentBeats grades. The rating prompt (the system message) and the task's criteria file
  are read from the user's checkout of MCU's auto_eval folder; every 20th frame (every 60th from 1,200 frames on)
  as JPEG quality 85; temperature 0, top_p 1, seed 42; the answer's "- Task Progress: 7" lines are parsed. The user
  message that carries the task name and the criteria is worded by us.
- `mcu_arms`: our generic prompt and six criteria (MCU_benchmark/auto_eval/), up to 16 evenly spaced PNG frames,
  a JSON answer.

It never raises: a disabled evaluation, a missing OPENAI_API_KEY and every failure come back as a status with a
reason, so the score falls back loudly (score_task marks what was used).
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mcu_arms.contracts.resources import AUTO_EVAL_DIR
from mcu_arms.contracts.rubric import MCU_PROMPT_FILE, criteria_file, rubric_of
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.wire import DEFAULT_VIDEO_MODEL
from mcu_arms.green.scoring import CRITERIA, VideoEvaluation, VideoStatus

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


def evaluate_video(
    task: TaskSpec,
    frames_dir: Path | None,
    recording: Path | None,
    *,
    enabled: bool,
    env: Mapping[str, str],
    model: str = DEFAULT_VIDEO_MODEL,
    needed: bool,
    reached: Iterable[str] = (),
    auto_eval_dir: Path | None = None,
) -> VideoEvaluation:
    """Grade the episode's frames (PNG files in `frames_dir`, else the `recording` video).

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
        answer = _ask_model(request, api_key=api_key, base_url=env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
                            model=model)
        scores = parse_mcu_scores(answer) if auto_eval_dir is not None else parse_scores(answer)
    except Exception as error:  # noqa: BLE001 — the contract is a status, never an exception
        return outcome("failed", f"{type(error).__name__}: {error}"[:MAX_REASON_CHARS])
    return VideoEvaluation(
        status="ok", task_progress=scores["task_progress"], criteria=scores, model=model, rubric=rubric
    )


def _our_request(
    task: TaskSpec, frames_dir: Path | None, recording: Path | None, reached: set[str]
) -> _Request | None:
    frames, step_count = _sample_frames(frames_dir, recording, MAX_FRAMES)
    if not frames:
        return None
    content: list[dict[str, Any]] = [{"type": "text", "text": build_prompt(task, len(frames), step_count, reached)}]
    content += [_image_part("image/png", frame, detail="low") for frame in frames]
    return _Request(
        messages=[{"role": "user", "content": content}],
        options={"temperature": 0, "seed": REQUEST_SEED, "response_format": {"type": "json_object"}},
    )


def _mcu_request(
    task: TaskSpec, auto_eval_dir: Path, frames_dir: Path | None, recording: Path | None, reached: set[str]
) -> _Request | None:
    """MCU's rating prompt as the system message, then the task and its criteria, then the sampled frames."""
    criteria_path = criteria_file(auto_eval_dir, task.name)
    if not criteria_path.is_file():
        raise FileNotFoundError(f"MCU's auto_eval folder {auto_eval_dir} has no criteria file for {task.name} "
                                f"({criteria_path})")
    system = (auto_eval_dir / MCU_PROMPT_FILE).read_text(encoding="utf-8")
    criteria = criteria_path.read_text(encoding="utf-8")
    frames = _mcu_frames(frames_dir, recording)
    if not frames:
        return None
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
        options={"temperature": 0, "top_p": 1, "seed": MCU_REQUEST_SEED, "frequency_penalty": 0,
                 "presence_penalty": 0},
    )


def _mcu_frames(frames_dir: Path | None, recording: Path | None) -> list[bytes]:
    """Every 20th frame (every 60th for episodes of 1,200 frames or more), each as JPEG quality 85."""
    if frames_dir is not None and frames_dir.is_dir() and (paths := sorted(frames_dir.glob("*.png"))):
        every = MCU_LONG_FRAME_EVERY if len(paths) >= MCU_LONG_FROM_FRAMES else MCU_FRAME_EVERY
        return [_jpeg_file(path) for path in paths[::every]]
    if recording is not None and recording.is_file():
        import imageio.v3 as iio

        count = sum(1 for _ in iio.imiter(recording))
        every = MCU_LONG_FRAME_EVERY if count >= MCU_LONG_FROM_FRAMES else MCU_FRAME_EVERY
        return [_jpeg(frame) for index, frame in enumerate(iio.imiter(recording)) if index % every == 0]
    return []


def _jpeg_file(path: Path) -> bytes:
    from PIL import Image

    with Image.open(path) as image:
        return _jpeg(image.convert("RGB"))


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


def _sample_frames(frames_dir: Path | None, recording: Path | None, wanted: int) -> tuple[list[bytes], int]:
    """PNG bytes of up to `wanted` evenly spaced frames, and how many frames the episode had."""
    if frames_dir is not None and frames_dir.is_dir():
        paths = sorted(frames_dir.glob("*.png"))
        if paths:
            return [paths[i].read_bytes() for i in _evenly(len(paths), wanted)], len(paths)
    if recording is not None and recording.is_file():
        return _sample_recording(recording, wanted)
    return [], 0


def _sample_recording(recording: Path, wanted: int) -> tuple[list[bytes], int]:
    """Decode a recorded video (MineStudio's RecordCallback mp4) with imageio; needs its ffmpeg plugin."""
    import io

    import imageio.v3 as iio
    from PIL import Image

    count = sum(1 for _ in iio.imiter(recording))
    keep = set(_evenly(count, wanted))
    frames: list[bytes] = []
    for index, frame in enumerate(iio.imiter(recording)):
        if index in keep:
            buffer = io.BytesIO()
            Image.fromarray(frame).save(buffer, format="PNG")
            frames.append(buffer.getvalue())
    return frames, count


def _image_part(media_type: str, frame: bytes, **extra: str) -> dict[str, Any]:
    url = f"data:{media_type};base64," + base64.b64encode(frame).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def _ask_model(request: _Request, *, api_key: str, base_url: str, model: str) -> str:
    from openai import OpenAI

    client = OpenAI(api_key=api_key, base_url=base_url, timeout=REQUEST_TIMEOUT_S, max_retries=2)
    try:
        response = client.chat.completions.create(model=model, messages=request.messages, **request.options)
    finally:
        client.close()
    answer = response.choices[0].message.content
    if not answer:
        raise ValueError("the model returned an empty answer")
    return answer
