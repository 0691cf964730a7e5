"""Stand-in for minestudio/simulator/entry.py (1.1.6): MinecraftSim with the same reset/step/close control flow, in
env action mode (the only one mcu-arms uses)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from minestudio.simulator.control import control
from minestudio.simulator.world import FakeEnv


def check_engine() -> None:
    """As in 1.1.6 (entry.py:75-88): without the jar it asks on stdin, then exit(0) unless the answer is y/Y.
    The stand-in never downloads; `control.engine_present` says whether the jar 'exists'."""
    if control.engine_present:
        return
    if input("Detecting missing simulator engine, do you want to download it from huggingface (Y/N)?\n") in ("Y", "y"):
        raise RuntimeError("stand-in: would download engine.zip from CraftJarvis/SimulatorEngine")
    raise SystemExit(0)


class MinecraftSim:
    """Mimics MinecraftSim (entry.py:104-270): `env` is seeded once at construction; reset() lets callbacks veto
    the hard reset, runs num_empty_frames no-op env steps, then after_reset callbacks; step() runs before_step,
    env.step, after_step; terminated == truncated == the engine's done."""

    def __init__(
        self,
        action_type: Literal["env", "agent"] = "agent",
        obs_size: tuple[int, int] = (224, 224),
        render_size: tuple[int, int] = (640, 360),
        seed: int = 0,
        num_empty_frames: int = 20,
        callbacks: list | None = None,
        **kwargs: Any,  # swallowed silently, as in the real class
    ) -> None:
        if action_type != "env":
            raise NotImplementedError("the stand-in models env action mode only")
        check_engine()
        self.obs_size = obs_size
        self.action_type = action_type
        self.render_size = render_size
        self.seed = seed
        self.num_empty_frames = num_empty_frames
        self.callbacks = callbacks if callbacks is not None else []
        self.env = FakeEnv(render_size)
        self.env.seed(seed)
        self.already_reset = False
        self.obs: dict[str, Any] | None = None
        self.info: dict[str, Any] | None = None

    @property
    def fake(self) -> FakeEnv:
        """Test handle (not in the real API): crash(), finish_episode(), hang_steps(), position(), commands..."""
        return self.env

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        for callback in self.callbacks:
            action = callback.before_step(self, action)
        obs, reward, done, info = self.env.step(action.copy())
        terminated, truncated = done, done
        obs, info = self._wrap_obs_info(obs, info)
        for callback in self.callbacks:
            obs, reward, terminated, truncated, info = callback.after_step(self, obs, reward, terminated, truncated, info)
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
            obs, info = callback.after_reset(self, obs, info)
            self.obs, self.info = obs, info
        return obs, info

    def _wrap_obs_info(self, obs: dict[str, Any], info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """info = engine info + raw obs, merged into a dict that keeps keys from earlier steps (as the real one);
        obs = {'image': pov resized to obs_size, read as cv2's dsize=(width, height)}."""
        merged = dict(info)
        merged.update(obs)
        pov = obs["pov"]
        width, height = self.obs_size
        rows = (np.arange(height) * pov.shape[0]) // height
        cols = (np.arange(width) * pov.shape[1]) // width
        wrapped = {"image": pov[rows][:, cols]}
        if self.info is None:
            self.info = {}
        self.info.update(merged)
        return wrapped, dict(self.info)

    def noop_action(self) -> dict[str, Any]:
        return self.env.action_space.no_op()

    def close(self) -> None:
        for callback in self.callbacks:
            callback.before_close(self)
        status = self.env.close()
        for callback in self.callbacks:
            callback.after_close(self)
        return status
