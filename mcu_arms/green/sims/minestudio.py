"""The MineStudio backend: real Minecraft through `minestudio.simulator.MinecraftSim` (optional extra).

Nothing here imports minestudio until a preflight has shown the host can run it: MinecraftSim without its engine
prompts on stdin and hangs a server, so `minestudio_preflight` checks the package, JDK 8, Xvfb, the engine jar and
a local MINESTUDIO_DIR first. Reset and step run in one worker thread under our own deadlines, because the first
reset launches Java with no timeout of its own. Scoring reads the cumulative counters in MineStudio's info
(mine_block, craft_item, pickup, ...) relative to their values right after reset; no RewardsCallback is used.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mcu_arms.contracts.camera import quantise_camera
from mcu_arms.contracts.support import TaskSupport, task_support
from mcu_arms.contracts.wire import BUTTON_KEYS, CAMERA_KEY
from mcu_arms.green.sims.base import SimStep, Simulator, SimulatorUnavailable
from mcu_arms.isolation.host import network_filesystem_reason

if TYPE_CHECKING:
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import EnvAction

T = TypeVar("T")

DEFAULT_MINESTUDIO_DIR = "/tmp/MineStudio"
ENGINE_JAR = Path("engine") / "build" / "libs" / "mcprec-6.13.jar"
COUNTER_EVENTS: tuple[str, ...] = (
    "mine_block", "craft_item", "pickup", "use_item", "break_item", "kill_entity", "damage_dealt", "custom",
)
QUANTISED_ENV = "MCU_CAMERA_QUANTISED"
INSTALL_HINTS = {
    "package": "pip install 'mcu-arms[minestudio]' (about 8 GB and 15 minutes)",
    "java": "install JDK 8, e.g. `apt-get install openjdk-8-jdk`, and put its java first on PATH",
    "xvfb": "install Xvfb, e.g. `apt-get install xvfb` (or set MINESTUDIO_GPU_RENDER=1 with VirtualGL's vglrun)",
    "engine": "download engine.zip from the HuggingFace repo CraftJarvis/SimulatorEngine and unzip it into "
    "MINESTUDIO_DIR (or run `python -m minestudio.simulator.entry -y` once)",
}


class SimulatorTimeout(SimulatorUnavailable):
    """MineStudio did not answer in time; the backend is unusable from here on."""


def minestudio_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("MINESTUDIO_DIR") or DEFAULT_MINESTUDIO_DIR)


def _java_major_version(java: str) -> int | None:
    """The major version `java -version` reports (8 for "1.8.0_392"), or None when it cannot be read."""
    try:
        completed = subprocess.run(
            [java, "-version"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', completed.stderr + completed.stdout)
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    return minor if major == 1 else major


def _minestudio_installed() -> bool:
    if "minestudio" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("minestudio") is not None
    except (ImportError, ValueError):
        return False


def minestudio_preflight(env: Mapping[str, str], *, partitions: Iterable[Any] | None = None) -> list[str]:
    """What stops MineStudio from running on this host, each with how to fix it; empty when it can run.

    Cheap: it never imports minestudio (700 MB) and never constructs MinecraftSim.
    """
    problems: list[str] = []
    if not _minestudio_installed():
        problems.append(f"the minestudio package is not installed: {INSTALL_HINTS['package']}")
    search_path = env.get("PATH", "")
    java = shutil.which("java", path=search_path)
    if java is None:
        problems.append(f"java is not on PATH: {INSTALL_HINTS['java']}")
    else:
        major = _java_major_version(java)
        if major != 8:
            found = f"version {major}" if major is not None else "an unreadable version"
            problems.append(f"java on PATH ({java}) is {found}, MineStudio needs 8: {INSTALL_HINTS['java']}")
    renderer = "vglrun" if env.get("MINESTUDIO_GPU_RENDER") == "1" else "xvfb-run"
    if shutil.which(renderer, path=search_path) is None:
        problems.append(f"{renderer} is not on PATH: {INSTALL_HINTS['xvfb']}")
    home = minestudio_dir(env)
    if not (home / ENGINE_JAR).is_file():
        problems.append(f"the simulator engine is missing ({home / ENGINE_JAR}): {INSTALL_HINTS['engine']}")
    network = network_filesystem_reason(home, partitions)
    if network:
        problems.append(f"MINESTUDIO_DIR: {network} (MineStudio's instance registry is sqlite)")
    return problems


def _counters_from_info(info: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    counters: dict[str, dict[str, int]] = {}
    for event in COUNTER_EVENTS:
        values = info.get(event)
        if isinstance(values, Mapping):
            counters[event] = {str(name): int(count) for name, count in values.items()}
    return counters


class MineStudioSimulator(Simulator):
    """Real Minecraft (MineStudio 1.1.6) in env action mode; `MCU_CAMERA_QUANTISED=1` snaps the camera to the
    11 mu-law bins per axis that MineStudio's agent action mode would apply (our quantiser), so an arm can compare
    both without changing the wire format.
    """

    name = "minestudio"

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        obs_size: tuple[int, int] = (128, 128),
        render_size: tuple[int, int] = (640, 360),
        record_dir: Path | None = None,
        fast_reset: bool = True,
        fast_reset_biomes: tuple[str, ...] = ("plains",),
        random_tp_range: int = 1000,
        reset_timeout_s: float = 900.0,
        step_timeout_s: float = 120.0,
        partitions: Iterable[Any] | None = None,
    ) -> None:
        self._env = dict(env if env is not None else os.environ)
        problems = minestudio_preflight(self._env, partitions=partitions)
        if problems:
            raise SimulatorUnavailable("MineStudio cannot run on this host:\n- " + "\n- ".join(problems))
        self.quantised = self._env.get(QUANTISED_ENV) == "1"
        self._obs_size = obs_size
        self._render_size = render_size
        self._record_dir = record_dir
        self._fast_reset = fast_reset
        self._fast_reset_biomes = list(fast_reset_biomes)
        self._random_tp_range = random_tp_range
        self._reset_timeout_s = reset_timeout_s
        self._step_timeout_s = step_timeout_s
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minestudio")
        self._started_at = time.time()
        self._sim: Any = None
        self._fast_reset_callback: Any = None
        self._record_callback: Any = None
        self._baseline: dict[str, dict[str, int]] = {}
        self._fallbacks: Counter[str] = Counter()
        self._broken: str | None = None
        self._lock = threading.Lock()

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("minestudio")
        except PackageNotFoundError:
            return "unknown"

    def label(self) -> str:
        camera = "camera quantised to agent-mode bins" if self.quantised else "camera in env mode (exact degrees)"
        return f"minestudio (MineStudio {self.version()}): MCU on Minecraft, {camera}"

    def supports(self, task: "TaskSpec") -> TaskSupport:
        return task_support(self.name, task)

    def agent_instructions(self) -> str:
        if self.quantised:
            return (
                "Camera: [pitch, yaw] in degrees per step, snapped to one of -10, -5.81, -3.22, -1.61, -0.62, 0, "
                "0.62, 1.61, 3.22, 5.81, 10 per axis (larger requests turn 10 degrees)."
            )
        return "Camera: [pitch, yaw] in degrees per step, applied as given (up to ±180)."

    def _call(self, fn: Callable[[], T], timeout_s: float, what: str) -> T:
        """Run `fn` on the worker thread; a deadline miss marks the backend broken rather than hanging the loop."""
        if self._broken:
            raise SimulatorTimeout(self._broken)
        future = self._worker.submit(fn)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            self._broken = f"MineStudio {what} did not finish within {timeout_s:.0f} s; the simulator is unusable"
            self._fallbacks[f"timeout.{what}"] += 1
            raise SimulatorTimeout(self._broken) from None

    def _make_sim(self, seed: int) -> Any:
        from minestudio.simulator import MinecraftSim
        from minestudio.simulator.callbacks import FastResetCallback, RecordCallback

        if self._fast_reset:
            self._fast_reset_callback = FastResetCallback(
                biomes=self._fast_reset_biomes, random_tp_range=self._random_tp_range
            )
        if self._record_dir is not None:
            self._record_dir.mkdir(parents=True, exist_ok=True)
            self._record_callback = RecordCallback(record_path=str(self._record_dir), fps=20)
        return MinecraftSim(
            action_type="env", obs_size=self._obs_size, render_size=self._render_size, seed=seed, callbacks=[]
        )

    def _reset_in_worker(self, task: "TaskSpec", seed: int) -> tuple[Any, dict[str, Any]]:
        from minestudio.simulator.callbacks import CommandsCallback

        if self._sim is None:
            self._sim = self._make_sim(seed)
        commands = CommandsCallback(list(task.init_commands)) if task.init_commands else None
        # Fast reset decides how to reset, then the task's commands run, then recording sees the result.
        self._sim.callbacks = [
            callback for callback in (self._fast_reset_callback, commands, self._record_callback) if callback
        ]
        self._sim.env.seed(seed)
        return self._sim.reset()

    def reset(self, task: "TaskSpec", seed: int) -> SimStep:
        obs, info = self._call(lambda: self._reset_in_worker(task, seed), self._reset_timeout_s, "reset")
        # Fast resets keep Minecraft's statistics, so counters count from here.
        self._baseline = _counters_from_info(info)
        return SimStep(frame=obs["image"], counters={}, info=self._visible_info(info))

    def _env_action(self, action: "EnvAction") -> dict[str, Any]:
        import numpy as np

        env_action = self._sim.env.action_space.no_op()
        for key in BUTTON_KEYS:
            env_action[key] = int(bool(action.get(key, 0)))
        pitch, yaw = action.get(CAMERA_KEY, (0.0, 0.0))
        if self.quantised:
            snapped = quantise_camera(pitch, yaw)
            if snapped != (float(pitch), float(yaw)):
                self._fallbacks["camera_quantised"] += 1
            pitch, yaw = snapped
        env_action[CAMERA_KEY] = np.array([pitch, yaw], dtype=np.float32)
        return env_action

    def step(self, action: "EnvAction") -> SimStep:
        if self._sim is None:
            raise RuntimeError("step() before reset()")
        env_action = self._env_action(action)
        obs, _reward, terminated, truncated, info = self._call(
            lambda: self._sim.step(env_action), self._step_timeout_s, "step"
        )
        return SimStep(
            frame=obs["image"],
            counters=self._relative_counters(_counters_from_info(info)),
            done=bool(terminated or truncated),
            info=self._visible_info(info),
        )

    def _relative_counters(self, counters: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        relative: dict[str, dict[str, int]] = {}
        for event, values in counters.items():
            before = self._baseline.get(event, {})
            grown = {name: count - before.get(name, 0) for name, count in values.items()}
            kept = {name: count for name, count in grown.items() if count > 0}
            if kept:
                relative[event] = kept
        return relative

    @staticmethod
    def _visible_info(info: Mapping[str, Any]) -> dict[str, Any]:
        """What a player sees in the HUD; positions, voxels and mob lists stay in the backend."""
        visible: dict[str, Any] = {}
        for key in ("health", "food_level", "is_gui_open"):
            if key in info:
                value = info[key]
                visible[key] = value.item() if hasattr(value, "item") else value
        return visible

    def fallback_counts(self) -> dict[str, int]:
        return dict(self._fallbacks)

    def close(self) -> None:
        with self._lock:
            if self._sim is not None and not self._broken:
                try:
                    self._call(self._sim.close, 120.0, "close")
                except SimulatorTimeout:
                    self._stop_own_engine_processes()
            elif self._broken:
                self._stop_own_engine_processes()
            self._sim = None
            self._worker.shutdown(wait=False, cancel_futures=True)

    def _stop_own_engine_processes(self) -> None:
        """Stop the engine: the children this process started since the simulator was built, each group by pid
        re-checked with its create time (never by name)."""
        import psutil

        from mcu_arms.procs import stop_process_group

        for child in psutil.Process().children():
            try:
                created = child.create_time()
            except psutil.NoSuchProcess:
                continue
            if created >= self._started_at:
                stop_process_group(child.pid, created, grace_s=5.0)
