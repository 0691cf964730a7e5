"""The stand-in's behaviour where 1.1.6's differs from what a signature shows (the wheel test compares signatures):
reset prints every callback; the observation is the render resized with cv2 INTER_LINEAR; a dead engine's first
reconnect raises ConnectionRefusedError and the next AttributeError; health and food_level only when the engine
sends them; RecordCallback writes episode_1 first, at the next reset or close, from the render."""

from __future__ import annotations

from typing import Any

import numpy as np


def test_reset_prints_each_callback_and_resizes_with_inter_linear(fake_minestudio: Any, capsys: Any) -> None:
    import cv2
    from minestudio.simulator import MinecraftSim
    from minestudio.simulator.callbacks import CommandsCallback

    sim = MinecraftSim(action_type="env", obs_size=(64, 48), seed=1, callbacks=[CommandsCallback(["/time set 0"])])
    obs, info = sim.reset()
    assert "CommandsCallback(commands=['/time set 0'])" in capsys.readouterr().out
    expected = cv2.resize(info["pov"], dsize=(64, 48), interpolation=cv2.INTER_LINEAR)
    assert obs["image"].shape == (48, 64, 3) and np.array_equal(obs["image"], expected)
    sim.close()


def test_a_dead_engine_refuses_then_breaks_and_vitals_come_only_when_sent(fake_minestudio: Any) -> None:
    import pytest
    from minestudio.simulator import MinecraftSim

    fake_minestudio.send_vitals = False
    sim = MinecraftSim(action_type="env", seed=2)
    _obs, info = sim.reset()
    assert "health" not in info and "food_level" not in info and "is_gui_open" in info
    sim.env.crash()
    with pytest.raises(ConnectionRefusedError):
        sim.env.reset()
    with pytest.raises(AttributeError, match="instance"):
        sim.env.reset()
    sim.close()


def test_record_callback_writes_episode_1_from_the_render_at_the_next_reset(fake_minestudio: Any, tmp_path) -> None:
    import cv2
    from minestudio.simulator import MinecraftSim
    from minestudio.simulator.callbacks import RecordCallback

    record = RecordCallback(record_path=str(tmp_path), fps=20, frame_type="pov")
    sim = MinecraftSim(action_type="env", obs_size=(32, 32), seed=3, callbacks=[record])
    sim.reset()
    for _ in range(4):
        sim.step(sim.noop_action())
    assert list(tmp_path.iterdir()) == []  # nothing written until the next reset or close
    sim.reset()
    capture = cv2.VideoCapture(str(tmp_path / "episode_1.mp4"))
    frames = []
    while (read := capture.read())[0]:
        frames.append(read[1])
    assert len(frames) == 5 and frames[0].shape == (360, 640, 3)
    sim.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["episode_1.mp4", "episode_2.mp4"]
