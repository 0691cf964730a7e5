"""The callback protocol of 1.1.6 (callbacks/callback.py): every hook returns what it was given by default."""

from __future__ import annotations

import os
from typing import Any

import yaml


class MinecraftCallback:
    def load_data_from_conf(source: Any) -> dict:  # called on the class, as in 1.1.6
        """A dict as it is, or the YAML file it names."""
        if isinstance(source, dict):
            return source
        assert os.path.exists(source), f"File {source} not exists."
        with open(source, encoding="utf-8") as handle:
            return yaml.safe_load(handle)

    def create_from_conf(yaml_file: Any) -> Any:  # overridden by subclasses, as in 1.1.6
        return None

    def before_step(self, sim, action):
        return action

    def before_reset(self, sim, reset_flag: bool) -> bool:  # True = do a hard env.reset()
        return reset_flag

    def after_reset(self, sim, obs, info):
        return obs, info

    def after_step(self, sim, obs, reward, terminated, truncated, info):
        return obs, reward, terminated, truncated, info

    def before_close(self, sim):
        pass

    def after_close(self, sim):
        return

    def before_render(self, sim, image):
        return image

    def after_render(self, sim, image):
        return image

    def __repr__(self):
        return f"{self.__class__.__name__}()"
