"""The green agent on the MineStudio backend, end to end over the stand-in of MineStudio 1.1.6 (the engine cannot run
here): a real A2A evaluation whose first task's engine crashes mid-task. The result records the reset mode, leaves
the crashed task unscored, runs the next task on a fresh instance and counts the restart there, and names the
reward entries that can never pay on MineStudio with the reason."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from purples import TABLE_SCRIPT, ScriptedPurple, build_test_purple
from server_procs import running_app
from test_green_server import evaluate, request_for

import mcu_arms.green.server as green_server
from mcu_arms.green.sims.minestudio import MineStudioSimulator

pytestmark = pytest.mark.slow

Partition = namedtuple("Partition", "device mountpoint fstype opts")


def test_a_crash_mid_task_is_recovered_and_every_dead_entry_is_named(
    minestudio_host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    control = minestudio_host["control"]
    control.spawn_engine_process = True
    # empty frames, the start (5 commands, then 20 settling frames), the task's 3 commands, its 3rd step
    control.crash_at_env_step = 20 + 5 + 20 + 3 + 3
    built: list[MineStudioSimulator] = []

    def make(
        name: str,
        obs_size: tuple[int, int],
        reset_mode: str | None,
        table: object = None,
        action_mode: str | None = None,
    ) -> MineStudioSimulator:
        built.append(
            MineStudioSimulator(
                minestudio_host["env"],
                reset_mode=reset_mode or "hard",
                obs_size=obs_size,
                partitions=[Partition("/dev/sda1", "/", "ext4", "rw")],
            )
        )
        return built[-1]

    monkeypatch.setattr(green_server, "make_simulator", make)
    purple = ScriptedPurple(TABLE_SCRIPT)
    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        evaluation = evaluate(
            green_url,
            request_for(
                purple_url,
                tmp_path / "out",
                simulator="minestudio",
                task_category="explore",
                tasks=["explore_boat", "explore_chest"],
                max_steps=5,
                save_frames=False,
                obs_size=[32, 32],
                reset_mode="seeded_fast",
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    result = evaluation.result
    assert result["simulator"]["reset_mode"] == "seeded_fast" and result["config"]["reset_mode"] == "seeded_fast"
    crashed, after = evaluation.task("explore_boat"), evaluation.task("explore_chest")
    assert crashed["ended_by"] == "error" and crashed["scored"] is False and crashed["steps_run"] == 2
    assert crashed["error"].startswith("SimulatorCrashed: the Minecraft engine failed during step (TypeError")
    assert crashed["unavailable_entries"] == ["craft_boat", "use_boat"]
    assert "'boat' is no Minecraft 1.16 statistic" in crashed["unavailable_reasons"]["craft_boat"]
    assert "oak_boat" in crashed["unavailable_reasons"]["use_boat"]
    [restart] = after["sim_restarts"]
    assert (restart["cause"], restart["failed_task"], restart["failed_during"], restart["failed_step"]) == (
        "crash",
        "explore_boat",
        "step",
        2,
    )
    assert after["ended_by"] == "max_steps" and after["steps_run"] == 5 and after["scored"] is True
    assert after["sim_restarts"] and crashed["sim_restarts"] == []
    assert any(
        line.startswith("simulator restarted before explore_chest: crash in explore_boat")
        for line in evaluation.statuses
    )
    summary = next(text for media, text in evaluation.artifacts[0] if media == "text/plain")
    assert "SIMULATOR RESTARTED first (crash in explore_boat at step 2)" in summary
    assert len(control.envs) == 2 and control.envs[0].is_closed() and control.envs[1].is_closed()


def test_video_grades_the_render_recorded_per_task_and_actions_go_through_agent_mode(
    minestudio_host: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_service: str
) -> None:
    """At MCU's defaults: the agent sees 32x32, the grader sees MineStudio's recording of the 640x360 render
    (RecordCallback's episode_1.mp4 in each task's folder), and an env action is applied as upstream's green applies
    it, through agent mode (camera quantised, forward+back cancelled), counted as adjustments."""
    import json

    from model_service import FakeModelService
    from purples import env_reply
    from test_green_server import evaluate, request_for

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_service)
    FakeModelService.answer = json.dumps(
        {
            "scores": {
                name: 4
                for name in (
                    "task_progress",
                    "action_control",
                    "error_recognition_and_correction",
                    "creative_attempts",
                    "task_completion_efficiency",
                    "material_selection_and_usage",
                )
            }
        }
    )

    def make(
        name: str,
        obs_size: tuple[int, int],
        reset_mode: str | None,
        table: object = None,
        action_mode: str | None = None,
    ) -> MineStudioSimulator:
        return MineStudioSimulator(
            minestudio_host["env"],
            obs_size=obs_size,
            action_mode=action_mode or "agent",
            partitions=[Partition("/dev/sda1", "/", "ext4", "rw")],
        )

    monkeypatch.setattr(green_server, "make_simulator", make)
    purple = ScriptedPurple([env_reply(camera=(4.32, 0.0), forward=1, back=1), env_reply(attack=1)])
    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        evaluation = evaluate(
            green_url,
            request_for(
                purple_url,
                tmp_path / "out",
                simulator="minestudio",
                task_category="explore",
                tasks=["explore_boat", "explore_chest"],
                max_steps=3,
                obs_size=[32, 32],
                video_eval=True,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    simulator = evaluation.result["simulator"]
    assert simulator["action_mode"] == "agent" and "agent mode as MCU's green applies them" in simulator["label"]
    for name in ("explore_boat", "explore_chest"):
        graded = evaluation.task(name)["video"]["graded_frames"]
        assert graded["source"] == "render_recording" and (graded["width"], graded["height"]) == (640, 360)
        assert graded["frames_in_episode"] == 4 and graded["frames_sent"] == 4  # the start and 3 steps
        assert Path(graded["path"]) == tmp_path / "out" / name / "recording" / "episode_1.mp4"
    assert (
        len({evaluation.task(name)["video"]["graded_frames"]["path"] for name in ("explore_boat", "explore_chest")})
        == 2
    )
    import base64
    import io

    from PIL import Image

    images = [
        part["image_url"]["url"]
        for part in FakeModelService.requests[0]["messages"][0]["content"]
        if part["type"] == "image_url"
    ]
    assert Image.open(io.BytesIO(base64.b64decode(images[0].split(",", 1)[1]))).size == (640, 360)
    metrics = evaluation.task("explore_boat")
    assert metrics["action_adjustments"] == {"camera_quantised": 1, "opposite_keys_cancelled": 1}
    first = json.loads(Path(metrics["steps_log"]).read_text().splitlines()[0])
    assert first["applied"]["camera"] == [pytest.approx(3.2153691), 0.0]
    assert first["applied"]["forward"] == first["applied"]["back"] == 0
