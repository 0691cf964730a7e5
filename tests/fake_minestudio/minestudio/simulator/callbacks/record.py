from __future__ import annotations

from pathlib import Path

from minestudio.simulator.callbacks.callback import MinecraftCallback


class RecordCallback(MinecraftCallback):
    """Accepts the 1.1.6 arguments and writes nothing; it counts frames per episode (the real one writes
    episode_{id}.mp4 under record_path on reset/close)."""

    def __init__(self, record_path: str, fps: int = 20, frame_type: str = "pov", recording: bool = True, **kwargs):
        self.record_path = Path(record_path)
        self.fps = fps
        self.frame_type = frame_type
        self.recording = recording
        self.episode_id = 0
        self.frames = 0
        self.episodes: list[int] = []

    def after_reset(self, sim, obs, info):
        if self.frames:
            self.episodes.append(self.frames)
            self.episode_id += 1
        self.frames = 1
        return obs, info

    def after_step(self, sim, obs, reward, terminated, truncated, info):
        self.frames += 1
        return obs, reward, terminated, truncated, info

    def before_close(self, sim):
        if self.frames:
            self.episodes.append(self.frames)
            self.frames = 0
