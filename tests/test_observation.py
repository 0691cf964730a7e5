"""The observation the agent is sent: the default 128x128 PNG, and the upstream-compatible 640x360 `jpeg_bgr` that
gives a cv2-decoding purple the same pixels MCU-AgentBeats' green gives it (cv2.imencode of the RGB frame).

cv2 comes with the test extra (opencv-python-headless); the green itself writes the JPEG with Pillow."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import numpy as np
import pytest

from mcu_arms.green.observation import FrameEncoder, encode_png

cv2 = pytest.importorskip("cv2", reason="opencv-python-headless (the test extra) is needed to decode as cv2 does")


def _frame(width: int = 640, height: int = 360) -> np.ndarray:
    """An RGB frame with smooth gradients and a pure red block: what a swapped channel order would turn blue."""
    y, x = np.mgrid[0:height, 0:width]
    frame = np.stack([(x * 255 // width), (y * 255 // height), ((x + y) * 127 // (width + height))], axis=-1)
    frame = frame.astype(np.uint8)
    frame[40:120, 40:200] = (230, 20, 20)
    return frame


def _cv2_decode(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def test_jpeg_bgr_decodes_with_cv2_to_the_frame_as_upstreams_green_would():
    frame = _frame()
    ours = _cv2_decode(FrameEncoder((640, 360), "jpeg_bgr").encode(frame).obs)
    ok, buffer = cv2.imencode(".jpeg", frame)  # exactly what MCU-AgentBeats' green does with obs["image"]
    assert ok
    upstream = _cv2_decode(buffer.tobytes())
    assert ours.shape == upstream.shape == frame.shape
    assert np.abs(ours.astype(int) - frame.astype(int)).mean() < 2.0  # the RGB array back, up to JPEG loss
    assert np.abs(ours.astype(int) - upstream.astype(int)).max() <= 4  # same quality, same subsampling
    red = ours[60:100, 60:180].reshape(-1, 3).mean(axis=0)
    assert red[0] > 200 and red[2] < 50  # channel 0 is red for the purple, as the simulator's frame has it


def test_a_standard_decoder_sees_jpeg_bgr_swapped_and_plain_jpeg_as_it_is():
    from PIL import Image

    frame = _frame()
    swapped = np.asarray(Image.open(io.BytesIO(FrameEncoder((640, 360), "jpeg_bgr").encode(frame).obs)))
    assert swapped[60:100, 60:180, 2].mean() > 200  # red shows as blue: why it is not the default
    plain = np.asarray(Image.open(io.BytesIO(FrameEncoder((640, 360), "jpeg").encode(frame).obs)))
    assert plain[60:100, 60:180, 0].mean() > 200


def test_the_default_is_the_frame_as_png_encoded_once():
    frame = _frame(128, 128)
    encoded = FrameEncoder().encode(frame)
    assert encoded.obs is encoded.png and encoded.obs == encode_png(frame)
    resized = FrameEncoder((640, 360), "png").encode(frame)
    assert _cv2_decode(resized.obs).shape == (360, 640, 3)


@pytest.mark.slow
def test_the_green_sends_jpeg_bgr_that_cv2_decodes_to_the_simulators_frame(tmp_path: Path):
    """End to end on the embedded simulator: the purple's cv2 decode of each observation is the frame the green
    logged (the step log keeps an RGB PNG of what the agent was shown)."""
    from purples import ScriptedPurple, build_test_purple
    from server_procs import running_app
    from test_green_server import _evaluate, request_for

    import mcu_arms.green.server as green_server

    purple = ScriptedPurple([])
    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        request = request_for(
            purple_url,
            tmp_path,
            task_category="crafting",
            tasks=["craft_furnace"],
            max_steps=2,
            obs_size=[640, 360],
            obs_encoding="jpeg_bgr",
        )
        evaluation = asyncio.run(asyncio.wait_for(_evaluate(green_url, request), timeout=180))
    assert evaluation.final_state == "completed", evaluation.statuses
    assert any("observations 640x360 jpeg_bgr" in line for line in evaluation.statuses)
    assert [payload["encoding"] for payload in purple.payloads] == ["jpeg_bgr", "jpeg_bgr"]
    from PIL import Image

    for payload in purple.payloads:
        seen = _cv2_decode(base64.b64decode(payload["obs"]))
        logged = np.asarray(Image.open(tmp_path / "craft_furnace" / "frames" / f"{payload['step']:06d}.png"))
        assert seen.shape == logged.shape == (360, 640, 3)
        assert np.abs(seen.astype(int) - logged.astype(int)).mean() < 3.0
    assert evaluation.result["config"]["obs_encoding"] == "jpeg_bgr"


def test_without_kept_frames_the_jpeg_modes_encode_once():
    encoded = FrameEncoder((640, 360), "jpeg_bgr", keep_frames=False).encode(_frame())
    assert encoded.png is None and encoded.obs.startswith(b"\xff\xd8")
