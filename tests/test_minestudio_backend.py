"""The MineStudio backend without MineStudio: quantiser numbers, preflight reporting, and the adapter's behaviour
against a stand-in for the engine (which cannot run here)."""

from __future__ import annotations

import sys
import threading
import types
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcu_arms.contracts.camera import (
    NULL_CAMERA_INDEX,
    SURVIVING_DEGREES,
    camera_bins,
    camera_index,
    camera_index_degrees,
    degrees_to_camera_index,
    quantise_degrees,
)
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.wire import noop_action
from mcu_arms.green.sims.base import SimulatorUnavailable
from mcu_arms.green.sims.minestudio import (
    ENGINE_JAR,
    MineStudioSimulator,
    SimulatorTimeout,
    minestudio_preflight,
)

Partition = namedtuple("Partition", "device mountpoint fstype opts")
LOCAL_DISK = [Partition("/dev/sda1", "/", "ext4", "rw")]


def test_quantiser_matches_minestudio_agent_mode() -> None:
    assert quantise_degrees(4.32) == pytest.approx(3.2154, abs=1e-4)
    assert quantise_degrees(-4.32) == pytest.approx(-3.2154, abs=1e-4)
    assert quantise_degrees(0.25) == 0.0
    assert quantise_degrees(20) == 10.0 and quantise_degrees(90) == 10.0 and quantise_degrees(-90) == -10.0
    expected = (-10, -5.8095, -3.2154, -1.6095, -0.6154, 0, 0.6154, 1.6095, 3.2154, 5.8095, 10)
    assert SURVIVING_DEGREES == pytest.approx(expected, abs=1e-4)
    assert all(quantise_degrees(value) == pytest.approx(value) for value in SURVIVING_DEGREES)


def test_compact_camera_index() -> None:
    assert NULL_CAMERA_INDEX == 60 and camera_bins(60) == (5, 5) and camera_index_degrees(60) == (0.0, 0.0)
    assert [camera_index(*camera_bins(i)) for i in range(121)] == list(range(121))
    assert camera_bins(0) == (0, 0) and camera_bins(120) == (10, 10) and camera_bins(61) == (5, 6)
    pitch, yaw = camera_index_degrees(degrees_to_camera_index(-4.32, 20))
    assert (pitch, yaw) == pytest.approx((-3.2154, 10.0), abs=1e-4)
    with pytest.raises(ValueError):
        camera_bins(121)


def _script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A host that passes every check: java 8 and xvfb-run on PATH, the engine jar, and an importable
    `minestudio` whose MinecraftSim is a stand-in recording what it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir, "java", "echo 'openjdk version \"1.8.0_392\"' >&2")
    _script(bin_dir, "xvfb-run", "exit 0")
    home = tmp_path / "MineStudio"
    (home / ENGINE_JAR).parent.mkdir(parents=True)
    (home / ENGINE_JAR).write_bytes(b"jar")
    calls: dict[str, Any] = {"constructed": 0, "seeds": [], "actions": [], "commands": []}
    monkeypatch.setitem(sys.modules, "minestudio", types.ModuleType("minestudio"))
    simulator_module = types.ModuleType("minestudio.simulator")
    callbacks_module = types.ModuleType("minestudio.simulator.callbacks")
    simulator_module.MinecraftSim = _fake_sim_class(calls)
    callbacks_module.CommandsCallback = lambda commands: ("commands", commands)
    callbacks_module.FastResetCallback = lambda **kwargs: ("fast_reset", kwargs)
    callbacks_module.RecordCallback = lambda **kwargs: ("record", kwargs)
    monkeypatch.setitem(sys.modules, "minestudio.simulator", simulator_module)
    monkeypatch.setitem(sys.modules, "minestudio.simulator.callbacks", callbacks_module)
    env = {"PATH": str(bin_dir), "MINESTUDIO_DIR": str(home)}
    return {"env": env, "calls": calls, "bin": bin_dir, "home": home}


def _fake_sim_class(calls: dict[str, Any]) -> type:
    class FakeActionSpace:
        def no_op(self) -> dict[str, Any]:
            return {"chat": "", "attack": 0, "camera": np.zeros(2, dtype=np.float32)}

    class FakeEnv:
        action_space = FakeActionSpace()

        def seed(self, seed: int) -> None:
            calls["seeds"].append(seed)

    class FakeMinecraftSim:
        """Stand-in for the engine: counters carry over resets, as Minecraft statistics do under fast reset."""

        def __init__(self, **kwargs: Any) -> None:
            calls["constructed"] += 1
            calls["kwargs"] = kwargs
            self.env = FakeEnv()
            self.callbacks: list[Any] = []
            self.mined = 4
            self.block_step = threading.Event()
            self.block_step.set()

        def _obs(self) -> tuple[dict[str, Any], dict[str, Any]]:
            info = {"mine_block": {"oak_log": self.mined}, "health": np.float32(20.0), "location_stats": {"x": 1}}
            return {"image": np.zeros((128, 128, 3), dtype=np.uint8)}, info

        def reset(self) -> tuple[dict[str, Any], dict[str, Any]]:
            calls["commands"].append([c for c in self.callbacks if c[0] == "commands"])
            return self._obs()

        def step(self, action: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            self.block_step.wait()
            calls["actions"].append(action)
            if action["attack"]:
                self.mined += 1
            obs, info = self._obs()
            return obs, 0.0, False, False, info

        def close(self) -> None:
            calls["closed"] = True

    return FakeMinecraftSim


def test_preflight_passes_on_a_ready_host(host: dict[str, Any]) -> None:
    assert minestudio_preflight(host["env"], partitions=LOCAL_DISK) == []


def test_preflight_reports_each_missing_piece_with_how_to_get_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = minestudio_preflight(
        {"PATH": str(empty), "MINESTUDIO_DIR": str(tmp_path / "nowhere")}, partitions=LOCAL_DISK
    )
    text = "\n".join(problems)
    assert len(problems) == 4
    assert "pip install 'mcu-arms[minestudio]'" in text
    assert "java is not on PATH" in text and "openjdk-8" in text
    assert "xvfb-run is not on PATH" in text
    assert "mcprec-6.13.jar" in text and "CraftJarvis/SimulatorEngine" in text


def test_preflight_rejects_java_17_and_a_network_minestudio_dir(host: dict[str, Any]) -> None:
    _script(host["bin"], "java", "echo 'openjdk version \"17.0.9\" 2023-10-17' >&2")
    nfs = [*LOCAL_DISK, Partition("server:/export", str(host["home"].parent), "nfs4", "rw")]
    problems = minestudio_preflight(host["env"], partitions=nfs)
    assert len(problems) == 2
    assert "version 17" in problems[0] and "needs 8" in problems[0]
    assert "nfs4 filesystem" in problems[1] and "sqlite" in problems[1]


def test_gpu_render_needs_vglrun_instead_of_xvfb(host: dict[str, Any]) -> None:
    problems = minestudio_preflight({**host["env"], "MINESTUDIO_GPU_RENDER": "1"}, partitions=LOCAL_DISK)
    assert len(problems) == 1 and "vglrun is not on PATH" in problems[0]


def test_missing_engine_raises_and_never_constructs_minecraftsim(host: dict[str, Any]) -> None:
    (host["home"] / ENGINE_JAR).unlink()
    with pytest.raises(SimulatorUnavailable, match="simulator engine is missing"):
        MineStudioSimulator(host["env"], partitions=LOCAL_DISK)
    assert host["calls"]["constructed"] == 0


def test_module_imports_without_minestudio() -> None:
    import subprocess

    code = (
        "import sys, mcu_arms.green.sims.minestudio as m; "
        "assert 'minestudio' not in sys.modules and 'numpy' not in sys.modules; print('ok')"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.stdout.strip() == "ok", completed.stderr


def test_reset_and_step_through_the_stand_in(host: dict[str, Any]) -> None:
    simulator = MineStudioSimulator({**host["env"], "MCU_CAMERA_QUANTISED": "1"}, partitions=LOCAL_DISK)
    assert host["calls"]["constructed"] == 0  # the engine starts on first reset, in the worker
    task = TaskSpec(name="t", category="crafting", text="t", init_commands=("/give @s minecraft:stone 3",))
    first = simulator.reset(task, seed=7)
    assert first.counters == {} and first.info == {"health": 20.0}  # positions never leave the backend
    assert host["calls"]["kwargs"]["action_type"] == "env" and host["calls"]["kwargs"]["obs_size"] == (128, 128)
    action = noop_action() | {"attack": 1, "camera": (4.32, 0.0)}
    stepped = simulator.step(action)
    assert stepped.counters == {"mine_block": {"oak_log": 1}}  # relative to the reset, not Minecraft's total
    sent = host["calls"]["actions"][-1]
    assert sent["chat"] == "" and sent["attack"] == 1
    assert sent["camera"].tolist() == pytest.approx([3.2154, 0.0], abs=1e-4)
    assert simulator.fallback_counts() == {"camera_quantised": 1}
    simulator.reset(task, seed=8)
    assert simulator.step(noop_action()).counters == {}  # a second (fast) reset restarts the counters
    assert host["calls"]["seeds"] == [7, 8]
    assert host["calls"]["commands"][0] == [("commands", ["/give @s minecraft:stone 3"])]
    simulator.close()
    assert host["calls"].get("closed") is True


def test_a_hung_step_times_out_and_leaves_the_backend_unusable(host: dict[str, Any]) -> None:
    simulator = MineStudioSimulator(host["env"], partitions=LOCAL_DISK, step_timeout_s=0.2)
    simulator.reset(TaskSpec(name="t", category="crafting", text="t"), seed=0)
    simulator._sim.block_step.clear()
    try:
        with pytest.raises(SimulatorTimeout, match="step did not finish"):
            simulator.step(noop_action())
        with pytest.raises(SimulatorTimeout):
            simulator.step(noop_action())
        assert simulator.fallback_counts() == {"timeout.step": 1}
    finally:
        simulator._sim.block_step.set()
        simulator.close()


def test_env_mode_passes_exact_degrees(host: dict[str, Any]) -> None:
    simulator = MineStudioSimulator(host["env"], partitions=LOCAL_DISK)
    simulator.reset(TaskSpec(name="t", category="crafting", text="t"), seed=0)
    simulator.step(noop_action() | {"camera": (4.32, -90.0)})
    assert host["calls"]["actions"][-1]["camera"].tolist() == pytest.approx([4.32, -90.0], abs=1e-5)
    assert simulator.fallback_counts() == {}
    simulator.close()


def test_the_green_asks_minestudio_to_render_the_observation_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's green builds MinecraftSim(obs_size=(640, 360)); ours passes the request's obs_size the same way, so
    a 640x360 frame is rendered, not resized from 128x128."""
    import mcu_arms.green.sims.minestudio as backend
    from mcu_arms.green.task_run import make_simulator

    built: dict[str, Any] = {}
    monkeypatch.setattr(backend, "MineStudioSimulator", lambda **kwargs: built.update(kwargs) or "minestudio")
    assert make_simulator("minestudio", obs_size=(640, 360)) == "minestudio"
    assert built == {"obs_size": (640, 360)}
