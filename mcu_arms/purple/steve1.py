"""`--agent steve1`: MineStudio's STEVE-1 (text-conditioned VPT) as a purple agent, on one CUDA device.

Needs the optional extra (`pip install 'mcu-arms[minestudio]'`), the STEVE-1 weights and a CUDA device. All three are
checked when the policy is constructed, from files and module specs only, so a missing piece is a clear UserError
before torch or minestudio is imported. The model is loaded once per process (loading takes tens of seconds) and
answers in MineStudio's compact agent format, which is what its action head emits: nothing is lost to re-binning.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import AckPayload, ActionPayload, InitPayload, ObservationPayload
from mcu_arms.purple.base import Policy

HF_REPO = "CraftJarvis/MineStudio_STEVE-1.official"
WEIGHTS_ENV = "MCU_STEVE1_WEIGHTS"
COND_SCALE = 4.0  # classifier-free guidance scale STEVE-1 is usually run with
FRAME_SIZE = (128, 128)
REQUIRED_MODULES = ("minestudio", "torch")
NVIDIA_DEVICE_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia/version")

_models: dict[tuple[str, str], Any] = {}


def _module_available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _driver_present() -> bool:
    return any(Path(path).exists() for path in NVIDIA_DEVICE_FILES)


def huggingface_snapshot(environ: Mapping[str, str]) -> Path | None:
    """The cached snapshot of the STEVE-1 repository, if one was downloaded."""
    if environ.get("HF_HUB_CACHE"):
        hub = Path(environ["HF_HUB_CACHE"])
    else:
        hf_home = Path(environ.get("HF_HOME") or Path(environ.get("HOME", str(Path.home()))) / ".cache" / "huggingface")
        hub = hf_home / "hub"
    snapshots = hub / f"models--{HF_REPO.replace('/', '--')}" / "snapshots"
    found = sorted(path for path in snapshots.glob("*") if (path / "config.json").exists()) if snapshots.is_dir() else []
    return found[-1] if found else None


def resolve_weights(environ: Mapping[str, str]) -> Path:
    """A directory holding the STEVE-1 checkpoint (config.json + weights), from MCU_STEVE1_WEIGHTS or the HF cache."""
    if environ.get(WEIGHTS_ENV):
        path = Path(environ[WEIGHTS_ENV])
        if not (path / "config.json").is_file():
            raise UserError(
                f"{path} holds no STEVE-1 checkpoint (no config.json); point it at a download of {HF_REPO}",
                key=WEIGHTS_ENV,
            )
        return path
    snapshot = huggingface_snapshot(environ)
    if snapshot is None:
        raise UserError(
            f"the STEVE-1 weights are not on this machine: run `huggingface-cli download {HF_REPO}` "
            f"or set {WEIGHTS_ENV} to a directory holding them",
            key=WEIGHTS_ENV,
        )
    return snapshot


def check_requirements(
    options: PurpleOptions,
    environ: Mapping[str, str],
    module_available: Callable[[str], bool] = _module_available,
    driver_present: Callable[[], bool] = _driver_present,
) -> Path:
    """Extra, weights, CUDA: in that order, without importing anything heavy. Returns the weights directory."""
    missing = [name for name in REQUIRED_MODULES if not module_available(name)]
    if missing:
        raise UserError(
            f"STEVE-1 needs the minestudio extra ({', '.join(missing)} not installed): "
            "pip install 'mcu-arms[minestudio]'",
            key="--agent",
        )
    weights = resolve_weights(environ)
    device = options.cuda_device if options.cuda_device is not None else environ.get("CUDA_VISIBLE_DEVICES")
    if device is not None and device.strip() in ("", "-1"):
        raise UserError(f"CUDA_VISIBLE_DEVICES={device!r} hides every GPU; STEVE-1 needs one", key="--cuda-device")
    if not driver_present():
        raise UserError(
            "STEVE-1 needs a CUDA device and no NVIDIA driver was found on this host", key="--cuda-device"
        )
    return weights


def _load_model(weights: Path, device: str) -> Any:
    """Load (once per process) and move to the GPU. Called in a worker thread: it takes tens of seconds."""
    key = (str(weights), device)
    if key not in _models:
        import torch
        from minestudio.models import SteveOnePolicy

        if not torch.cuda.is_available():
            raise UserError(
                f"torch sees no CUDA device (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})",
                key="--cuda-device",
            )
        model = SteveOnePolicy.from_pretrained(str(weights)).to("cuda")
        model.eval()
        _models[key] = model
    return _models[key]


class Steve1Policy(Policy):
    """One episode of STEVE-1: the task text is its condition, its recurrent state runs across the episode."""

    def __init__(self, options: PurpleOptions, environ: Mapping[str, str] | None = None) -> None:
        self.options = options
        self.environ = os.environ if environ is None else environ
        self.weights = check_requirements(options, self.environ)
        self._model: Any = None
        self._condition: Any = None
        self._state: Any = None

    async def init(self, payload: InitPayload) -> AckPayload:
        if self.options.cuda_device is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = self.options.cuda_device  # before torch initialises CUDA
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
        self._model = await asyncio.to_thread(_load_model, self.weights, device)
        self._condition = await asyncio.to_thread(self._prepare_condition, payload.text)
        self._state = None
        return AckPayload(message=f"STEVE-1 ready on CUDA device {device}, conditioned on {payload.text!r}")

    def _prepare_condition(self, text: str) -> Any:
        import torch

        with torch.inference_mode():
            return self._model.prepare_condition({"cond_scale": COND_SCALE, "text": text})

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        buttons, camera = await asyncio.to_thread(self._step, payload.obs)
        return ActionPayload(action_type="agent", buttons=[buttons], camera=[camera])

    def _step(self, obs: str) -> tuple[int, int]:
        import numpy as np
        import torch
        from PIL import Image

        frame = Image.open(io.BytesIO(base64.b64decode(obs))).convert("RGB").resize(FRAME_SIZE)
        image = torch.from_numpy(np.asarray(frame, dtype=np.uint8).copy()).to("cuda")[None, None]
        with torch.inference_mode():
            action, self._state = self._model.get_action(
                {"image": image, "condition": self._condition}, self._state, input_shape="BT*"
            )
        return int(action["buttons"].reshape(-1)[0].item()), int(action["camera"].reshape(-1)[0].item())

    async def close(self) -> None:
        self._state = None
