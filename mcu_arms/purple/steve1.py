"""`--agent steve1`: MineStudio's STEVE-1 (text-conditioned VPT) as a purple agent, on one CUDA device.

Needs the optional extra (`pip install 'mcu-arms[minestudio]'`), the STEVE-1 weights, the MineCLIP tokenizer
(`openai/clip-vit-base-patch16`, which MineStudio 1.1.6 fetches from the hub inside `prepare_condition`) and a
CUDA device. All four are checked when the policy is constructed, from files and module specs only, so a missing
piece is a clear UserError before torch or minestudio is imported and before the 1.6 GB model loads. The model is
loaded once per process and answers in MineStudio's compact agent format, which is what its action head emits.

Offline: once the weights and the tokenizer are found in the cache (at construction), the model and the tokenizer load
with HF_HUB_OFFLINE=1 (and TRANSFORMERS_OFFLINE=1), so a run never reaches the hub and never picks up a newer
revision than the one checked.

Determinism is per device: deterministic kernels are asked for (cuDNN deterministic, torch deterministic algorithms
with warn_only), so two runs with one seed on the same GPU model, driver and torch sample the same actions; another
device may sample differently. An op that has no deterministic kernel only warns in torch: every such warning is
caught and named (`Determinism`), so a run says whether its same-seed claim holds.

Randomness: the prior's sample in `prepare_condition` and the action sampling in `get_action` draw from torch's
global generators. Each episode seeds its own stream from the arm's seed before the condition is prepared and
swaps it in around each of its model calls (`RandomStreams`), so two runs with one seed sample the same actions
whatever else the process draws.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import os
import random
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, Field

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.preflight import HostCheck
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.simulators import MINESTUDIO
from mcu_arms.contracts.wire import AckPayload, ActionPayload, InitPayload, ObservationPayload
from mcu_arms.process.procs import log_line
from mcu_arms.purple.base import Policy

HF_REPO = "CraftJarvis/MineStudio_STEVE-1.official"
TOKENIZER_REPO = "openai/clip-vit-base-patch16"  # MineCLIP's text tokenizer (mineclip/tokenization.py)
WEIGHTS_ENV = "MCU_STEVE1_WEIGHTS"
COND_SCALE = 4.0  # classifier-free guidance scale STEVE-1 is usually run with
FRAME_SIZE = (128, 128)
# STEVE-1 runs on MineStudio's own stack (its policy and its MineCLIP), with torch
REQUIRED_MODULES = (*MINESTUDIO.python_modules, "torch")
NVIDIA_DEVICE_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia/version")
COMMIT_HASH = re.compile(r"[0-9a-f]{40}")
# Deterministic cuBLAS needs this before CUDA initialises (torch.use_deterministic_algorithms).
CUBLAS_WORKSPACE = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# Set once the weights and the tokenizer were found in the cache: nothing is fetched from the hub after that.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
MAX_NAMED_WARNINGS = 8

_models: dict[tuple[str, str], Any] = {}
_model_calls = threading.Lock()  # the generators are process-global: one episode's call at a time


def _module_available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _driver_present() -> bool:
    return any(Path(path).exists() for path in NVIDIA_DEVICE_FILES)


def hub_cache(environ: Mapping[str, str]) -> Path:
    """The HuggingFace hub cache as huggingface_hub finds it: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else
    HF_HOME/hub, with HF_HOME defaulting to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(name):
            return Path(os.path.expanduser(environ[name]))
    if environ.get("HF_HOME"):
        return Path(os.path.expanduser(environ["HF_HOME"])) / "hub"
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache")
    return Path(os.path.expanduser(cache)) / "huggingface" / "hub"


def cached_snapshot(environ: Mapping[str, str], repo: str, complete: Callable[[Path], bool]) -> Path | None:
    """The snapshot of `repo` that the hub loads by default: the commit `refs/main` names, if it is cached and
    `complete`."""
    folder = hub_cache(environ) / f"models--{repo.replace('/', '--')}"
    try:
        commit = (folder / "refs" / "main").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    snapshot = folder / "snapshots" / commit
    return snapshot if COMMIT_HASH.fullmatch(commit) and complete(snapshot) else None


def _has_tokenizer(snapshot: Path) -> bool:
    """What AutoTokenizer needs offline: its config, and a fast tokenizer or the vocabulary and merges."""
    files = {
        name
        for name in ("tokenizer_config.json", "tokenizer.json", "vocab.json", "merges.txt")
        if (snapshot / name).is_file()
    }
    return "tokenizer_config.json" in files and ("tokenizer.json" in files or {"vocab.json", "merges.txt"} <= files)


def huggingface_snapshot(environ: Mapping[str, str]) -> Path | None:
    """The cached snapshot of the STEVE-1 repository that refs/main names, if it was downloaded."""
    return cached_snapshot(environ, HF_REPO, lambda snapshot: (snapshot / "config.json").is_file())


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
            f"the STEVE-1 weights are not on this machine (no snapshot named by refs/main under {hub_cache(environ)}):"
            f" run `huggingface-cli download {HF_REPO}` or set {WEIGHTS_ENV} to a directory holding them",
            key=WEIGHTS_ENV,
        )
    return snapshot


def resolve_tokenizer(environ: Mapping[str, str]) -> Path:
    """The cached MineCLIP tokenizer; without it prepare_condition would fetch it from the hub after the model
    loaded."""
    snapshot = cached_snapshot(environ, TOKENIZER_REPO, _has_tokenizer)
    if snapshot is None:
        raise UserError(
            f"the MineCLIP tokenizer {TOKENIZER_REPO} is not in the HuggingFace cache ({hub_cache(environ)}; STEVE-1 "
            f"loads it when it reads its condition): run `huggingface-cli download {TOKENIZER_REPO}` once",
            key="HF_HUB_CACHE",
        )
    return snapshot


def _check_extra(module_available: Callable[[str], bool]) -> str:
    missing = [name for name in REQUIRED_MODULES if not module_available(name)]
    if missing:
        raise UserError(
            f"STEVE-1 needs the minestudio extra ({', '.join(missing)} not installed): "
            "pip install 'mcu-arms[minestudio]'",
            key="--agent",
        )
    return "minestudio and torch importable"


def _check_cuda(options: PurpleOptions, environ: Mapping[str, str], driver_present: Callable[[], bool]) -> str:
    device = options.cuda_device if options.cuda_device is not None else environ.get("CUDA_VISIBLE_DEVICES")
    if device is not None and device.strip() in ("", "-1"):
        raise UserError(f"CUDA_VISIBLE_DEVICES={device!r} hides every GPU; STEVE-1 needs one", key="--cuda-device")
    if not driver_present():
        raise UserError("STEVE-1 needs a CUDA device and no NVIDIA driver was found on this host", key="--cuda-device")
    return f"NVIDIA driver present; device {device if device is not None else 'any'}"


def _requirements(
    options: PurpleOptions,
    environ: Mapping[str, str],
    module_available: Callable[[str], bool],
    driver_present: Callable[[], bool],
) -> list[tuple[str, Callable[[], object]]]:
    """What STEVE-1 needs, in the order it is checked: each a name and a check that raises UserError."""
    return [
        ("STEVE-1 extra", lambda: _check_extra(module_available)),
        ("STEVE-1 weights", lambda: resolve_weights(environ)),
        ("MineCLIP tokenizer", lambda: resolve_tokenizer(environ)),
        ("STEVE-1 CUDA", lambda: _check_cuda(options, environ, driver_present)),
    ]


def check_requirements(
    options: PurpleOptions,
    environ: Mapping[str, str],
    module_available: Callable[[str], bool] = _module_available,
    driver_present: Callable[[], bool] = _driver_present,
) -> Path:
    """Extra, weights, tokenizer, CUDA: in that order, without importing anything heavy. Returns the weights
    directory; the first missing piece is a UserError."""
    found = {name: check() for name, check in _requirements(options, environ, module_available, driver_present)}
    return cast(Path, found["STEVE-1 weights"])  # the weights check answers the weights directory


def requirement_checks(
    options: PurpleOptions,
    environ: Mapping[str, str],
    module_available: Callable[[str], bool] = _module_available,
    driver_present: Callable[[], bool] = _driver_present,
) -> list[HostCheck]:
    """Every STEVE-1 requirement as a host check (for doctor and plan), each independent of the others."""
    checks = []
    for name, check in _requirements(options, environ, module_available, driver_present):
        try:
            checks.append(HostCheck(name=name, status="ok", detail=str(check())))
        except UserError as error:
            checks.append(HostCheck(name=name, status="fail", detail=error.message))
    return checks


class RandomStreams:
    """One episode's own state of the process-global generators a policy draws from: torch's (CPU, and CUDA once
    it is initialised), numpy's and Python's, each only if already imported. Seeded once; `active()` swaps the
    episode's state in around a call and keeps where it left off, and puts the process's state back."""

    def __init__(self, seed: int) -> None:
        with _model_calls:
            saved = self._capture()
            random.seed(seed)
            if "numpy" in sys.modules:
                sys.modules["numpy"].random.seed(seed % 2**32)
            if "torch" in sys.modules:
                sys.modules["torch"].manual_seed(seed)
            self._state = self._capture()
            self._restore(saved)

    @staticmethod
    def _capture() -> dict[str, Any]:
        state: dict[str, Any] = {"random": random.getstate()}
        if "numpy" in sys.modules:
            state["numpy"] = sys.modules["numpy"].random.get_state()
        torch = sys.modules.get("torch")
        if torch is not None:
            state["torch"] = torch.get_rng_state()
            if torch.cuda.is_initialized():
                state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    @staticmethod
    def _restore(state: dict[str, Any]) -> None:
        random.setstate(state["random"])
        if "numpy" in state:
            sys.modules["numpy"].random.set_state(state["numpy"])
        if "torch" in state:
            sys.modules["torch"].set_rng_state(state["torch"])
        if "cuda" in state:
            sys.modules["torch"].cuda.set_rng_state_all(state["cuda"])

    @contextmanager
    def active(self) -> Iterator[None]:
        with _model_calls:
            saved = self._capture()
            self._restore(self._state)
            try:
                yield
            finally:
                self._state = self._capture()
                self._restore(saved)


class Determinism(BaseModel):
    """Whether same-seed runs of STEVE-1 sample the same actions, and where: on `device` only."""

    device: str  # e.g. "NVIDIA H200 (torch 2.8.0, CUDA 12.8, cuDNN 91002)"
    deterministic_kernels_requested: bool = True
    nondeterministic_ops: list[str] = Field(default_factory=list)  # torch's warnings, the first MAX_NAMED_WARNINGS

    def statement(self) -> str:
        if self.nondeterministic_ops:
            return (
                f"same-seed actions NOT guaranteed on {self.device}: ops without a deterministic kernel ran "
                f"({'; '.join(self.nondeterministic_ops)})"
            )
        return (
            f"same-seed actions reproducible on {self.device} (deterministic kernels; a different GPU model, driver "
            "or torch may sample differently)"
        )


def go_offline(environ: Any = os.environ) -> None:
    """From now on nothing is fetched from the HuggingFace hub (the cache was checked): the variables for libraries
    imported later, and huggingface_hub's constant if it is already imported."""
    environ.update(OFFLINE_ENV)
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]  # the module is only a ModuleType here


class Steve1Episode:
    """One episode of a STEVE-1-shaped model (`prepare_condition`, `get_action`): its condition, recurrent state and
    random stream. `to_input` turns an HxWx3 uint8 frame into what the model reads; `no_grad` wraps every call."""

    def __init__(
        self,
        model: Any,
        seed: int,
        to_input: Callable[[Any], Any],
        no_grad: Callable[[], Any] = nullcontext,
    ) -> None:
        self._model = model
        self._to_input = to_input
        self._no_grad = no_grad
        self._streams = RandomStreams(seed)
        self._condition: Any = None
        self._state: Any = None
        self.nondeterministic_ops: list[str] = []

    @contextmanager
    def _noting_nondeterminism(self) -> Iterator[None]:
        """torch warns (warn_only) when an op has no deterministic kernel: keep what it names."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        for warning in caught:
            text = str(warning.message)
            if "determinist" in text and text not in self.nondeterministic_ops:
                if len(self.nondeterministic_ops) < MAX_NAMED_WARNINGS:
                    self.nondeterministic_ops.append(" ".join(text.split())[:300])

    def prepare(self, text: str) -> None:
        """Condition on `text`: the prior samples from the episode's stream, so it is drawn after seeding."""
        with self._streams.active(), self._no_grad(), self._noting_nondeterminism():
            self._condition = self._model.prepare_condition({"cond_scale": COND_SCALE, "text": text})

    def act(self, frame: Any) -> tuple[int, int]:
        """The compact action (button index, camera index) for one frame."""
        with self._streams.active(), self._no_grad(), self._noting_nondeterminism():
            action, self._state = self._model.get_action(
                {"image": self._to_input(frame), "condition": self._condition}, self._state, input_shape="BT*"
            )
        return int(action["buttons"].reshape(-1)[0].item()), int(action["camera"].reshape(-1)[0].item())


def _load_model(weights: Path, device: str) -> Any:
    """Load (once per process, offline) and move to the GPU, with deterministic kernels. Called in a worker thread:
    it takes tens of seconds."""
    key = (str(weights), device)
    if key not in _models:
        os.environ.setdefault(*CUBLAS_WORKSPACE)
        go_offline()
        import torch
        from minestudio.models import SteveOnePolicy

        if not torch.cuda.is_available():
            raise UserError(
                f"torch sees no CUDA device (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})",
                key="--cuda-device",
            )
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
        model = SteveOnePolicy.from_pretrained(str(weights)).to("cuda")
        model.eval()
        _models[key] = model
    return _models[key]


def device_description() -> str:
    """The GPU model and the software that decide which kernels run (what same-seed determinism is relative to)."""
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return (
        f"{torch.cuda.get_device_name(torch.cuda.current_device())} (torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, cuDNN {cudnn})"
    )


def _cuda_input(frame: Any) -> Any:
    import torch

    return torch.from_numpy(frame.copy()).to("cuda")[None, None]


def _inference_mode() -> Any:
    import torch

    return torch.inference_mode()


class Steve1Policy(Policy):
    """One episode of STEVE-1: conditioned on the arm's steve1_condition or else the task's text, seeded from the
    arm's seed, its recurrent state carried across the episode."""

    def __init__(self, options: PurpleOptions, environ: Mapping[str, str] | None = None) -> None:
        self.options = options
        self.environ = os.environ if environ is None else environ
        self.weights = check_requirements(options, self.environ)
        self._episode: Steve1Episode | None = None
        self.determinism: Determinism | None = None

    async def init(self, payload: InitPayload) -> AckPayload:
        if self.options.cuda_device is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = self.options.cuda_device  # before torch initialises CUDA
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
        model = await asyncio.to_thread(_load_model, self.weights, device)
        self.determinism = Determinism(device=await asyncio.to_thread(device_description))
        text = self.options.steve1_condition or payload.text
        self._episode = Steve1Episode(model, self.options.seed, _cuda_input, _inference_mode)
        await asyncio.to_thread(self._episode.prepare, text)
        return AckPayload(
            message=f"STEVE-1 ready on CUDA device {device}, conditioned on {text!r}, seed {self.options.seed}; "
            f"{self.determinism.statement()}"
        )

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        assert self._episode is not None, "act before init"
        frame = _decode_frame(payload.obs, bgr=payload.encoding == "jpeg_bgr")
        buttons, camera = await asyncio.to_thread(self._episode.act, frame)
        return ActionPayload(action_type="agent", buttons=[buttons], camera=[camera])

    async def close(self) -> None:
        if self._episode is not None and self._episode.nondeterministic_ops and self.determinism is not None:
            self.determinism.nondeterministic_ops = list(self._episode.nondeterministic_ops)
            log_line(f"steve1: {self.determinism.statement()}")
        self._episode = None


def _decode_frame(obs: str, *, bgr: bool = False) -> Any:
    """The frame as STEVE-1 reads it: RGB, 128x128 (a jpeg_bgr frame's channels are put back in RGB order; plans
    refuse jpeg_bgr for steve1 arms, a green configured by hand may still send it)."""
    import numpy as np
    from PIL import Image

    frame = np.asarray(Image.open(io.BytesIO(base64.b64decode(obs))).convert("RGB").resize(FRAME_SIZE), dtype=np.uint8)
    return np.ascontiguousarray(frame[:, :, ::-1]) if bgr else frame


def make_policy(options: PurpleOptions) -> Policy:
    return Steve1Policy(options)
