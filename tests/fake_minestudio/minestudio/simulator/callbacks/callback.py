"""The callback protocol of 1.1.6 (callbacks/callback.py): every hook returns what it was given by default."""

from __future__ import annotations

from typing import Any


class MinecraftCallback:
    def before_step(self, sim: Any, action: Any) -> Any:
        return action

    def before_reset(self, sim: Any, reset_flag: bool) -> bool:  # True = do a hard env.reset()
        return reset_flag

    def after_reset(self, sim: Any, obs: Any, info: dict) -> tuple[Any, dict]:
        return obs, info

    def after_step(self, sim: Any, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict):
        return obs, reward, terminated, truncated, info

    def before_close(self, sim: Any) -> None:
        return None

    def after_close(self, sim: Any) -> None:
        return None

    def before_render(self, sim: Any, image: Any) -> Any:
        return image

    def after_render(self, sim: Any, image: Any) -> Any:
        return image

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
