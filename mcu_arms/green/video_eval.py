"""Video evaluation: a vision model grades sampled frames of an episode on the six MCU criteria.

It never raises: a disabled evaluation, a missing OPENAI_API_KEY and every failure come back as a status with a
reason, so the score falls back loudly (score_task marks what was used). The request is made deterministic where
the service allows (temperature 0, a fixed seed, the same evenly sampled frames).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from mcu_arms.contracts.resources import AUTO_EVAL_DIR
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.wire import DEFAULT_VIDEO_MODEL
from mcu_arms.green.scoring import CRITERIA, VideoEvaluation

PROMPT_FILE = AUTO_EVAL_DIR / "prompt" / "video_eval.md"
CRITERIA_FILE = AUTO_EVAL_DIR / "criteria.yaml"
MAX_FRAMES = 16
REQUEST_SEED = 20240601
REQUEST_TIMEOUT_S = 180.0
DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_REASON_CHARS = 500


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
) -> VideoEvaluation:
    """Grade the episode's frames (PNG files in `frames_dir`, else the `recording` video).

    `needed` is False when the simulator score is already full; `reached` names the milestones already reached, so
    that for a milestone task the model grades progress on the current (first unreached) milestone.
    """
    if not needed:
        return VideoEvaluation(status="skipped_perfect", reason="the simulator score is already full", model=model)
    if not enabled:
        return VideoEvaluation(status="disabled", reason="video evaluation is off (video_eval = false)", model=model)
    api_key = env.get("OPENAI_API_KEY", "")
    if not api_key:
        return VideoEvaluation(
            status="no_api_key", reason="OPENAI_API_KEY is not set, so video evaluation cannot run", model=model
        )
    try:
        frames, step_count = _sample_frames(frames_dir, recording, MAX_FRAMES)
        if not frames:
            return VideoEvaluation(
                status="failed", reason=f"no frames to evaluate (frames_dir={frames_dir}, recording={recording})",
                model=model,
            )
        prompt = build_prompt(task, len(frames), step_count, set(reached))
        answer = _ask_model(prompt, frames, api_key=api_key, base_url=env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
                            model=model)
        scores = parse_scores(answer)
    except Exception as error:  # noqa: BLE001 — the contract is a status, never an exception
        reason = f"{type(error).__name__}: {error}"[:MAX_REASON_CHARS]
        return VideoEvaluation(status="failed", reason=reason, model=model)
    return VideoEvaluation(status="ok", task_progress=scores["task_progress"], criteria=scores, model=model)


def build_prompt(task: TaskSpec, frame_count: int, step_count: int, reached: set[str]) -> str:
    criteria = yaml.safe_load(CRITERIA_FILE.read_text(encoding="utf-8"))["criteria"]
    listed = "\n".join(f"- {item['key']} ({item['name']}): {item['description']}" for item in criteria)
    focus = ""
    if task.milestones:
        pending = [entry for entry in task.milestones if entry.identity not in reached]
        if pending:
            current = pending[0]
            objects = ", ".join(current.objects)
            focus = (
                f"\nThis is a long task scored by milestones; {len(task.milestones) - len(pending)} of "
                f"{len(task.milestones)} are already reached. For task_progress, grade only progress toward the "
                f"current milestone '{current.identity}' ({current.event.replace('_', ' ')}: {objects}), where 10 "
                f"means it is done.\n"
            )
    return PROMPT_FILE.read_text(encoding="utf-8").format(
        frame_count=frame_count,
        step_count=step_count,
        task_text=task.text,
        focus=focus,
        criteria=listed,
        score_keys=", ".join(f'"{key}": <0-10>' for key in CRITERIA),
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


def _ask_model(prompt: str, frames: list[bytes], *, api_key: str, base_url: str, model: str) -> str:
    from openai import OpenAI

    client = OpenAI(api_key=api_key, base_url=base_url, timeout=REQUEST_TIMEOUT_S, max_retries=2)
    content: list[dict] = [{"type": "text", "text": prompt}]
    for frame in frames:
        url = "data:image/png;base64," + base64.b64encode(frame).decode("ascii")
        content.append({"type": "image_url", "image_url": {"url": url, "detail": "low"}})
    try:
        response = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": content}],
            temperature=0,
            seed=REQUEST_SEED,
            response_format={"type": "json_object"},
        )
    finally:
        client.close()
    answer = response.choices[0].message.content
    if not answer:
        raise ValueError("the model returned an empty answer")
    return answer
