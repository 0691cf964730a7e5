"""Stand-in for minestudio/simulator/entry.py (1.1.6): MinecraftSim with the same signature, reset/step/close control
flow, agent and env action modes, spaces, converters and render. tests/test_minestudio_wheel.py compares its
signatures with the real wheel's."""

from __future__ import annotations

import itertools
import math
from typing import Any, Literal

import cv2
import numpy as np

from minestudio.simulator.control import control
from minestudio.simulator.world import FakeEnv

# VPT's joint action space as 1.1.6's CameraHierarchicalMapping builds it (groups in product order, then the camera
# meta action; one extra "inventory alone" entry), and its camera: 11 mu-law bins (binsize 2, max 10 degrees, mu 10).
BUTTON_ORDER = (
    "attack",
    "back",
    "forward",
    "jump",
    "left",
    "right",
    "sneak",
    "sprint",
    "use",
    "drop",
    "inventory",
    *(f"hotbar.{i}" for i in range(1, 10)),
)
GROUPS = (
    (None, *(f"hotbar.{i}" for i in range(1, 10))),
    (None, "forward", "back"),
    (None, "left", "right"),
    (None, "sprint", "sneak"),
    (None, "use"),
    (None, "drop"),
    (None, "attack"),
    (None, "jump"),
    (None, "camera"),
)
COMBINATIONS = [*itertools.product(*GROUPS), "inventory"]
CAMERA_BINS, CAMERA_MAX, CAMERA_MU = 11, 10.0, 10.0
NULL_BIN = CAMERA_BINS // 2


def _camera_bin(degrees: float) -> int:
    value = max(-CAMERA_MAX, min(CAMERA_MAX, float(degrees))) / CAMERA_MAX
    encoded = math.copysign(math.log1p(CAMERA_MU * abs(value)) / math.log1p(CAMERA_MU), value)
    return int(np.round((encoded * CAMERA_MAX + CAMERA_MAX) / 2))


def _camera_degrees(index: int) -> float:
    value = (index * 2 - CAMERA_MAX) / CAMERA_MAX
    return math.copysign(((1 + CAMERA_MU) ** abs(value) - 1) / CAMERA_MU, value) * CAMERA_MAX


def check_engine(skip_confirmation=False) -> None:
    """As in 1.1.6 (entry.py:75-88): without the jar it asks on stdin (unless told to skip the question), then
    exit(0) unless the answer is y/Y. The stand-in never downloads; `control.engine_present` says whether the jar
    'exists'."""
    if control.engine_present:
        return
    question = "Detecting missing simulator engine, do you want to download it from huggingface (Y/N)?\n"
    if skip_confirmation or input(question) in ("Y", "y"):
        raise RuntimeError("stand-in: would download engine.zip from CraftJarvis/SimulatorEngine")
    raise SystemExit(0)


class MinecraftSim:
    """Mimics MinecraftSim (entry.py:104-325): `env` is seeded once at construction; reset() lets callbacks veto
    the hard reset, runs num_empty_frames no-op env steps, then after_reset callbacks (printing each, as 1.1.6
    does); step() converts an agent action, runs before_step, env.step, after_step; terminated == truncated == the
    engine's done; the observation is the render resized with cv2 INTER_LINEAR."""

    def __init__(
        self,
        action_type: Literal["env", "agent"] = "agent",
        obs_size: tuple[int, int] = (224, 224),
        render_size: tuple[int, int] = (640, 360),
        seed: int = 0,
        inventory: dict = {},  # noqa: B006 - a shared mutable default, as in 1.1.6
        preferred_spawn_biome: str | None = None,
        num_empty_frames: int = 20,
        callbacks: list = [],  # noqa: B006 - a shared mutable default, as in 1.1.6
        camera_config: Any = None,
        **kwargs: Any,  # swallowed silently, as in the real class
    ) -> None:
        check_engine()
        self.obs_size = obs_size
        self.action_type = action_type
        self.render_size = render_size
        self.seed = seed
        self.num_empty_frames = num_empty_frames
        self.callbacks = callbacks
        self.callback_messages: set[str] = set()
        self.env = FakeEnv(render_size, inventory=inventory, preferred_spawn_biome=preferred_spawn_biome)
        self.env.seed(seed)
        self.already_reset = False

    def agent_action_to_env_action(self, action: dict[str, Any]) -> dict[str, Any]:
        """A (batched) compact action as the env action 1.1.6 makes of it: the buttons of its combination; the camera
        by its index when the combination has the camera meta action on (inventory alone always has it)."""
        if isinstance(action, tuple):
            action = {"buttons": action[0], "camera": action[1]}
        buttons = np.asarray(action["buttons"]).reshape(-1)
        cameras = np.asarray(action["camera"]).reshape(-1)
        env_buttons = np.zeros((len(buttons), len(BUTTON_ORDER)), dtype=int)
        env_camera = np.zeros((len(buttons), 2))
        for row, (button, camera) in enumerate(zip(buttons, cameras, strict=True)):
            combination = COMBINATIONS[int(button)]
            camera_on = combination == "inventory" or combination[-1] == "camera"
            pressed = ("inventory",) if combination == "inventory" else combination[:-1]
            for key in pressed:
                if key is not None:
                    env_buttons[row, BUTTON_ORDER.index(key)] = 1
            if camera_on:
                pitch_bin, yaw_bin = divmod(int(camera), CAMERA_BINS)
                env_camera[row] = (_camera_degrees(pitch_bin), _camera_degrees(yaw_bin))
        converted: dict[str, Any] = {key: env_buttons[:, i] for i, key in enumerate(BUTTON_ORDER)}
        converted["camera"] = env_camera
        return converted

    def env_action_to_agent_action(self, action: dict[str, Any]) -> dict[str, Any]:
        """A batched env action as the compact one (from_factored): forward+back and left+right cancel, the later
        key of a group wins, inventory is alone and keeps the camera still."""
        cameras = np.asarray(action["camera"], dtype=float)
        assert cameras.ndim == 2, f"bad camera label, {action['camera']}"  # 1.1.6 needs a batch dimension
        buttons_out, camera_out = [], []
        for row in range(cameras.shape[0]):
            pressed = {key for key in BUTTON_ORDER if np.asarray(action.get(key, np.zeros(len(cameras))))[row]}
            bins = (_camera_bin(cameras[row][0]), _camera_bin(cameras[row][1]))
            if "inventory" in pressed:
                buttons_out.append(len(COMBINATIONS) - 1)
                camera_out.append(NULL_BIN * CAMERA_BINS + NULL_BIN)
                continue
            choice = []
            for group in GROUPS[:-1]:
                chosen = [key for key in group[1:] if key in pressed]
                if len(group) == 3 and len(chosen) == 2 and group[1] in ("forward", "left"):
                    chosen = []
                choice.append(chosen[-1] if chosen else None)
            choice.append(None if bins == (NULL_BIN, NULL_BIN) else "camera")
            buttons_out.append(COMBINATIONS.index(tuple(choice)))
            camera_out.append(bins[0] * CAMERA_BINS + bins[1])
        return {"buttons": np.array(buttons_out)[:, None], "camera": np.array(camera_out)[:, None]}

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self.action_type == "agent":
            env_action = self.agent_action_to_env_action(action)
            action.pop("buttons")
            action.pop("camera")
            action.update({key: value[0] for key, value in env_action.items()})
        for callback in self.callbacks:
            action = callback.before_step(self, action)
        obs, reward, done, info = self.env.step(action.copy())
        terminated, truncated = done, done
        obs, info = self._wrap_obs_info(obs, info)
        for callback in self.callbacks:
            obs, reward, terminated, truncated, info = callback.after_step(
                self, obs, reward, terminated, truncated, info
            )
            self.obs, self.info = obs, info
        return obs, reward, terminated, truncated, info

    def reset(self) -> tuple[dict[str, Any], dict[str, Any]]:
        reset_flag = True
        for callback in self.callbacks:
            reset_flag = callback.before_reset(self, reset_flag)
        if reset_flag:
            self.env.reset()
            self.already_reset = True
        obs: dict[str, Any] = {}
        info: dict[str, Any] = {}
        for _ in range(self.num_empty_frames):
            obs, _reward, _done, info = self.env.step(self.env.action_space.no_op())
        obs, info = self._wrap_obs_info(obs, info)
        for callback in self.callbacks:
            print(callback)
            obs, info = callback.after_reset(self, obs, info)
            self.obs, self.info = obs, info
        return obs, info

    def _wrap_obs_info(self, obs: dict[str, Any], info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """info = engine info + raw obs, merged into a dict that keeps keys from earlier steps (as the real one);
        obs = {'image': pov resized to obs_size with cv2 INTER_LINEAR, dsize=(width, height)}."""
        merged = dict(info)
        merged.update(obs)
        wrapped = {"image": cv2.resize(obs["pov"], dsize=self.obs_size, interpolation=cv2.INTER_LINEAR)}
        if getattr(self, "info", None) is None:
            self.info = {}
        self.info.update(merged)
        return wrapped, dict(self.info)

    def noop_action(self) -> dict[str, Any]:
        if self.action_type == "agent":
            return {"buttons": np.array([0]), "camera": np.array([60])}
        return self.env.action_space.no_op()

    def close(self) -> None:
        for callback in self.callbacks:
            callback.before_close(self)
        status = self.env.close()
        for callback in self.callbacks:
            callback.after_close(self)
        return status

    def render(self) -> Any:
        image = self.obs["image"]
        for callback in self.callbacks:
            image = callback.before_render(self, image)
        for callback in self.callbacks:
            image = callback.after_render(self, image)
        return image

    @property
    def action_space(self) -> dict[str, Any]:
        """The spaces as (kind, size) pairs: the real ones are gymnasium spaces, and gymnasium is not installed here."""
        if self.action_type == "agent":
            return {"buttons": ("MultiDiscrete", [len(COMBINATIONS)]), "camera": ("MultiDiscrete", [CAMERA_BINS**2])}
        if self.action_type == "env":
            keys = [key for key in BUTTON_ORDER if key != "drop"]
            return {**{key: ("Discrete", 2) for key in keys}, "camera": ("Box", (-180, 180, (2,)))}
        raise ValueError(f"Unknown action type: {self.action_type}")

    @property
    def observation_space(self) -> dict[str, Any]:
        height, width = self.obs_size
        return {"image": ("Box", (0, 255, (height, width, 3)))}
