"""Stand-in for 1.1.6's RecordCallback (callbacks/record.py): same arguments and the same episode bookkeeping.

As the real one: the episode in memory is written as `episode_{episode_id}.mp4` at before_reset (then the id goes up,
so the first file written is episode_1) and at before_close; frames are info['pov'] (the render) or obs['image'];
info['R'] toggles recording; an empty episode writes nothing. The real one encodes h264 with PyAV; the stand-in
writes mp4v with OpenCV (PyAV is not installed here); both decode to the RGB frames recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np

from minestudio.simulator.callbacks.callback import MinecraftCallback


class RecordCallback(MinecraftCallback):
    def __init__(
        self,
        record_path: str,
        fps: int = 20,
        frame_type: Literal["pov", "obs"] = "pov",
        recording: bool = True,
        show_actions=False,
        record_actions=False,
        record_infos=False,
        record_origin_observation=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.record_path = Path(record_path)
        self.record_path.mkdir(parents=True, exist_ok=True)
        self.recording = recording
        self.record_actions = record_actions
        self.show_actions = show_actions
        self.record_infos = record_infos
        self.record_origin_observation = record_origin_observation
        self.fps = fps
        self.frame_type = frame_type
        self.episode_id = 0
        self.frames: list[np.ndarray] = []
        self.infos: list[dict] = []
        self.actions: list[dict] = []

    def _frame(self, obs, info):
        if self.frame_type == "obs":
            return obs["image"]
        if self.frame_type == "pov":
            return info["pov"]
        raise ValueError(f"Invalid frame_type: {self.frame_type}")

    def before_reset(self, sim, reset_flag: bool) -> bool:
        if self.recording:
            self._save_episode()
            self.episode_id += 1
        return reset_flag

    def after_reset(self, sim, obs, info):
        sim.callback_messages.add("Press 'R' to start/stop recording.")
        if self.recording:
            self.frames.append(self._frame(obs, info))
            if self.record_actions or self.show_actions:
                self.actions.append({})
        return obs, info

    def before_step(self, sim, action):
        if self.recording and (self.record_actions or self.show_actions):
            self.actions.append(action)
        return action

    def after_step(self, sim, obs, reward, terminated, truncated, info):
        if self.recording and not info.get("R", True):
            self.recording = False
            self._save_episode()
            self.episode_id += 1
        if not self.recording and info.get("R", False):
            self.recording = True
        if self.recording:
            self.frames.append(self._frame(obs, info))
        return obs, reward, terminated, truncated, info

    def before_close(self, sim):
        if self.recording:
            self._save_episode()

    def _save_episode(self):
        if len(self.frames) == 0:
            return
        import cv2

        output_path = self.record_path / f"episode_{self.episode_id}.mp4"
        height, width = self.frames[0].shape[:2]
        writer = cv2.VideoWriter(str(output_path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps, (width, height))
        for frame in self.frames:
            writer.write(cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR))
        writer.release()
        if self.record_origin_observation:
            np.save(self.record_path / f"episode_{self.episode_id}.npy", np.array(self.frames))
        self.frames = []
        if self.record_actions:
            with open(self.record_path / f"episode_{self.episode_id}_action.json", "w", encoding="utf-8") as file:
                json.dump(
                    [{key: np.asarray(value).tolist() for key, value in action.items()} for action in self.actions],
                    file,
                )
            self.actions = []
