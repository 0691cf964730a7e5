"""STEVE-1: each missing piece (extra, weights, MineCLIP tokenizer, CUDA) is a UserError naming the fix, in that
order and before anything loads; the HF cache is read as huggingface_hub reads it (refs/main); the condition text is
the arm's or the task's, and recorded; two runs with one seed sample the same actions (tiny stand-in policies on
CPU: one drawing from numpy, one from torch when torch is installed)."""

from __future__ import annotations

import asyncio
import base64
import io
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import InitPayload, ObservationPayload
from mcu_arms.purple import steve1
from mcu_arms.purple.steve1 import (
    HF_REPO,
    TOKENIZER_REPO,
    Steve1Episode,
    Steve1Policy,
    check_requirements,
    hub_cache,
    huggingface_snapshot,
    requirement_checks,
    resolve_tokenizer,
    resolve_weights,
)

AVAILABLE = {"module_available": lambda name: True, "driver_present": lambda: True}
COMMIT_A, COMMIT_B = "a" * 40, "f" * 40


def _cached(hub, repo: str, commit: str, files: tuple[str, ...], *, main: bool = True):
    folder = hub / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in files:
        (snapshot / name).write_text("{}")
    if main:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text(commit)
    return snapshot


def _ready(tmp_path) -> dict[str, str]:
    """An environment whose HF cache holds the STEVE-1 weights and the tokenizer."""
    hub = tmp_path / "hub"
    _cached(hub, HF_REPO, COMMIT_A, ("config.json",))
    _cached(hub, TOKENIZER_REPO, COMMIT_B, ("tokenizer_config.json", "tokenizer.json"))
    return {"HF_HUB_CACHE": str(hub)}


def test_missing_extra_is_refused_before_anything_else():
    with pytest.raises(UserError, match=r"pip install 'mcu-arms\[minestudio\]'") as error:
        check_requirements(
            PurpleOptions(),
            {"MCU_STEVE1_WEIGHTS": "/nonexistent"},
            module_available=lambda name: name != "minestudio",
            driver_present=lambda: False,
        )
    assert "minestudio not installed" in str(error.value) and error.value.key == "--agent"


def test_missing_weights_name_the_download_and_the_variable(tmp_path):
    with pytest.raises(UserError, match=f"huggingface-cli download {HF_REPO}"):
        check_requirements(PurpleOptions(), {"HOME": str(tmp_path)}, **AVAILABLE)
    with pytest.raises(UserError, match="no config.json"):
        check_requirements(PurpleOptions(), {"MCU_STEVE1_WEIGHTS": str(tmp_path)}, **AVAILABLE)


def test_a_missing_tokenizer_is_refused_before_the_model_loads(tmp_path):
    environ = _ready(tmp_path)
    folder = tmp_path / "hub" / f"models--{TOKENIZER_REPO.replace('/', '--')}"
    (folder / "snapshots" / COMMIT_B / "tokenizer.json").unlink()
    with pytest.raises(UserError, match=f"huggingface-cli download {TOKENIZER_REPO}") as error:
        check_requirements(PurpleOptions(), environ, **AVAILABLE)
    assert "MineCLIP tokenizer" in error.value.message and steve1._models == {}
    for name in ("vocab.json", "merges.txt"):  # the slow tokenizer's files do as well
        (folder / "snapshots" / COMMIT_B / name).write_text("{}")
    assert resolve_tokenizer(environ) == folder / "snapshots" / COMMIT_B


def test_missing_cuda_is_refused(tmp_path):
    environ = _ready(tmp_path)
    with pytest.raises(UserError, match="no NVIDIA driver") as error:
        check_requirements(PurpleOptions(cuda_device="0"), environ, lambda name: True, lambda: False)
    assert error.value.key == "--cuda-device"
    with pytest.raises(UserError, match="hides every GPU"):
        check_requirements(PurpleOptions(cuda_device="-1"), environ, lambda name: True, lambda: True)


def test_all_present_returns_the_weights_and_every_check_is_a_row(tmp_path):
    environ = _ready(tmp_path)
    weights = check_requirements(PurpleOptions(cuda_device="1"), environ, **AVAILABLE)
    assert weights == tmp_path / "hub" / f"models--{HF_REPO.replace('/', '--')}" / "snapshots" / COMMIT_A
    rows = requirement_checks(PurpleOptions(), {"HOME": str(tmp_path)}, lambda name: True, lambda: False)
    assert [(row.name, row.status) for row in rows] == [
        ("STEVE-1 extra", "ok"),
        ("STEVE-1 weights", "fail"),
        ("MineCLIP tokenizer", "fail"),
        ("STEVE-1 CUDA", "fail"),
    ]


def test_the_snapshot_is_the_one_refs_main_names(tmp_path):
    hub = tmp_path / "hub"
    named = _cached(hub, HF_REPO, COMMIT_A, ("config.json",))
    _cached(hub, HF_REPO, COMMIT_B, ("config.json",), main=False)  # alphabetically last, not the default revision
    assert resolve_weights({"HF_HUB_CACHE": str(hub)}) == named
    refs = hub / f"models--{HF_REPO.replace('/', '--')}" / "refs" / "main"
    refs.write_text("../../elsewhere")
    assert huggingface_snapshot({"HF_HUB_CACHE": str(hub)}) is None, "refs/main must name a commit"
    refs.unlink()
    assert huggingface_snapshot({"HF_HUB_CACHE": str(hub)}) is None


def test_the_hub_cache_is_found_as_huggingface_hub_finds_it():
    assert hub_cache({"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c"}) == Path("/a")
    assert hub_cache({"HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c"}) == Path("/b")
    assert hub_cache({"HF_HOME": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c/hub")
    assert hub_cache({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/huggingface/hub")
    assert hub_cache({"HOME": "/h"}) == Path("/h/.cache/huggingface/hub")


@pytest.mark.skipif(
    "minestudio" in sys.modules or __import__("importlib").util.find_spec("minestudio") is not None,
    reason="minestudio is installed here",
)
def test_registry_refuses_steve1_without_the_extra_and_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from mcu_arms.contracts.errors import UserError\n"
        "from mcu_arms.contracts.settings import PurpleOptions\n"
        "from mcu_arms.purple.registry import policy_factory\n"
        "try:\n    policy_factory('steve1')(PurpleOptions(cuda_device='0'))\n"
        "except UserError as error:\n    print(error.message)\n"
        "print(sorted(m for m in ('torch', 'minestudio', 'numpy') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    refusal, loaded = done.stdout.strip().splitlines()
    assert "minestudio extra" in refusal and loaded == "[]"


# --- randomness and conditioning ------------------------------------------------------------------------------------


class NumpySteve:
    """A tiny STEVE-1-shaped policy drawing from numpy's global generator, as STEVE-1 draws from torch's: a prior
    sample in prepare_condition, a categorical sample per get_action."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def prepare_condition(self, instruction: dict) -> dict:
        self.texts.append(instruction["text"])
        return {"cond_scale": instruction["cond_scale"], "embed": np.random.normal(size=8)}

    def get_action(self, inputs: dict, state, input_shape: str):
        assert input_shape == "BT*"
        logits = inputs["condition"]["embed"] * (1.0 + float(np.mean(inputs["image"])) / 255.0) + (state or 0.0)
        weights = np.exp(logits - logits.max())
        button = np.random.choice(len(weights), p=weights / weights.sum())
        return {"buttons": np.array([[button * 1000]]), "camera": np.array([[np.random.randint(121)]])}, button


class TorchSteve:
    """The same, drawing from torch's global generator (torch.randn for the prior, multinomial for the action)."""

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def prepare_condition(self, instruction: dict) -> dict:
        return {"embed": self.torch.randn(8)}

    def get_action(self, inputs: dict, state, input_shape: str):
        torch = self.torch
        logits = inputs["condition"]["embed"] * (1.0 + inputs["image"].float().mean() / 255.0)
        button = torch.multinomial(torch.softmax(logits, 0), 1)
        camera = torch.randint(121, (1, 1))
        return {"buttons": button.reshape(1, 1), "camera": camera}, None


FRAMES = [np.full((8, 8, 3), value, dtype=np.uint8) for value in range(0, 250, 10)]


def _interleaved(model_factory, to_input, seeds: tuple[int, ...], pollute) -> list[list[tuple[int, int]]]:
    """Run one episode per seed side by side, step by step, drawing from the global generators between calls."""
    episodes = [Steve1Episode(model_factory(), seed, to_input) for seed in seeds]
    for episode in episodes:
        pollute()
        episode.prepare("mine a block")
    actions: list[list[tuple[int, int]]] = [[] for _ in seeds]
    for frame in FRAMES:
        for index, episode in enumerate(episodes):
            pollute()
            actions[index].append(episode.act(frame))
    return actions


def test_two_runs_with_one_seed_sample_the_same_actions_without_torch():
    def pollute() -> None:
        np.random.random(3)
        random.random()

    same_a, same_b, other = _interleaved(NumpySteve, lambda frame: frame, (7, 7, 8), pollute)
    assert same_a == same_b
    assert same_a != other
    assert len(set(same_a)) > 5, "the actions are really sampled"
    np.random.seed(0)
    fresh = _interleaved(NumpySteve, lambda frame: frame, (7,), lambda: None)[0]
    assert fresh == same_a, "what else the process drew, before or between, does not matter"


def test_two_runs_with_one_seed_sample_the_same_actions_with_torch_on_cpu():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 for the CPU build)")

    def pollute() -> None:
        torch.rand(5)

    same_a, same_b, other = _interleaved(TorchSteve, torch.from_numpy, (3, 3, 4), pollute)
    assert same_a == same_b and same_a != other and len(set(same_a)) > 5
    torch.manual_seed(1234)
    assert _interleaved(TorchSteve, torch.from_numpy, (3,), lambda: None)[0] == same_a


def _png(frame: np.ndarray) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


@pytest.mark.parametrize(("condition", "expected"), [("chop a tree", "chop a tree"), (None, "Mine a block of dirt.")])
def test_the_condition_is_the_arms_text_or_the_tasks_and_the_ack_records_it(
    tmp_path, monkeypatch: pytest.MonkeyPatch, condition: str | None, expected: str
):
    model = NumpySteve()
    monkeypatch.setattr(steve1, "check_requirements", lambda options, environ: tmp_path)
    monkeypatch.setattr(steve1, "_load_model", lambda weights, device: model)
    monkeypatch.setattr(steve1, "_cuda_input", lambda frame: frame)
    monkeypatch.setattr(steve1, "_inference_mode", lambda: __import__("contextlib").nullcontext())
    monkeypatch.setattr(steve1, "device_description", lambda: "Test GPU (torch 0, CUDA 0, cuDNN 0)")

    async def episode() -> tuple[str, list]:
        policy = Steve1Policy(PurpleOptions(seed=5, steve1_condition=condition), environ={})
        ack = await policy.init(InitPayload(prompt="p", text="Mine a block of dirt."))
        actions = [await policy.act(ObservationPayload(step=i, obs=_png(frame))) for i, frame in enumerate(FRAMES[:4])]
        return ack.message, actions

    message, actions = asyncio.run(episode())
    assert model.texts == [expected]
    assert f"conditioned on {expected!r}" in message and "seed 5" in message
    assert "same-seed actions reproducible on Test GPU (torch 0, CUDA 0, cuDNN 0)" in message
    assert all(action.action_type == "agent" and len(action.buttons) == 1 for action in actions)


def test_a_jpeg_bgr_frame_reaches_steve1_in_rgb_order():
    """Plans refuse jpeg_bgr for steve1 arms; a green configured by hand may still send it, and the channels are
    put back."""
    from PIL import Image

    frame = np.zeros((128, 128, 3), dtype=np.uint8)
    frame[..., 0] = 200  # red
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1])).save(buffer, format="JPEG", quality=95)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    decoded = steve1._decode_frame(encoded, bgr=True)
    assert decoded[..., 0].mean() > 150 and decoded[..., 2].mean() < 50


def test_steve1_goes_offline_once_checked_and_names_what_breaks_same_seed_determinism(monkeypatch):
    import types
    import warnings

    environ: dict[str, str] = {}
    fake_constants = types.SimpleNamespace(HF_HUB_OFFLINE=False)
    monkeypatch.setitem(sys.modules, "huggingface_hub.constants", fake_constants)
    steve1.go_offline(environ)
    assert environ == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"} and fake_constants.HF_HUB_OFFLINE is True

    class Warns(NumpySteve):
        def get_action(self, inputs, state, input_shape):
            warnings.warn(
                "scatter_add_cuda_kernel does not have a deterministic implementation", UserWarning, stacklevel=2
            )
            return super().get_action(inputs, state, input_shape)

    episode = Steve1Episode(Warns(), 3, lambda frame: frame)
    episode.prepare("chop a tree")
    episode.act(FRAMES[0])
    episode.act(FRAMES[1])
    assert episode.nondeterministic_ops == ["scatter_add_cuda_kernel does not have a deterministic implementation"]
    statement = steve1.Determinism(device="GPU X", nondeterministic_ops=episode.nondeterministic_ops).statement()
    assert statement.startswith("same-seed actions NOT guaranteed on GPU X") and "scatter_add" in statement
