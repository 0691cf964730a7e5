"""What the green agent does when things break: a crash inside the evaluator becomes FAILED with the reason, a
simulator that dies mid-episode leaves that task unscored (never a silent 0) while the evaluation completes, and a
cancel ends the evaluation. The green runs in-process (real uvicorn, real A2A) so that a failure can be injected."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from purples import TABLE_SCRIPT, ScriptedPurple, build_test_purple
from server_procs import running_app
from test_green_server import evaluate, request_for

import mcu_arms.green.server as green_server
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator

pytestmark = pytest.mark.slow


class SimulatorThatDies(EmbeddedSimulator):
    """Crafter underneath, until the second step of the first task."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 2:
            raise OSError("simulated engine crash")
        return super().step(action)


def test_a_crash_in_the_evaluator_is_a_failed_status_with_the_reason(monkeypatch, tmp_path: Path):
    def explode(*args, **kwargs):
        raise RuntimeError("result assembly exploded")

    monkeypatch.setattr(green_server.CategoryResult, "of", explode)
    purple = ScriptedPurple(TABLE_SCRIPT)
    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        evaluation = evaluate(
            green_url,
            request_for(
                purple_url,
                tmp_path,
                task_category="crafting",
                tasks=["craft_the_crafting_table"],
                max_steps=2,
                save_frames=False,
            ),
        )
    assert evaluation.final_state == "failed"
    assert evaluation.final_message == "Evaluation failed: RuntimeError: result assembly exploded"
    assert not evaluation.artifacts


def test_a_simulator_crash_leaves_the_task_unscored_and_the_evaluation_completes(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(green_server, "make_simulator", lambda name, **_: SimulatorThatDies())
    purple = ScriptedPurple(TABLE_SCRIPT)
    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        evaluation = evaluate(
            green_url,
            request_for(
                purple_url,
                tmp_path,
                task_category="crafting",
                tasks=["craft_the_crafting_table", "craft_furnace"],
                max_steps=2,
                save_frames=False,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    category = evaluation.result["results"][0]
    broken = category["task_metrics"]["craft_the_crafting_table"]
    assert broken["error"] == "OSError: simulated engine crash" and broken["ended_by"] == "error"
    assert broken["score"] is None and broken["scored"] is False and broken["score_source"] == "unscored"
    assert broken["steps_run"] == 1  # the step that did run is logged and counted
    assert len((tmp_path / "craft_the_crafting_table" / "steps.jsonl").read_text().splitlines()) == 1
    assert category["unscored_tasks"] == ["craft_the_crafting_table"]
    assert category["scored_tasks"] == 1 and category["num_tasks"] == 2
    assert category["total_max_score"] == 10.0  # the unscored task adds neither score nor maximum
    assert "left out of the totals, not counted as 0" in category["note"]
    assert any("error: OSError: simulated engine crash" in line for line in evaluation.statuses)


def test_the_server_answers_during_an_episode_and_cancel_ends_it(tmp_path: Path):
    from a2a.types import CancelTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

    from mcu_arms.a2a_client import open_client

    purple = ScriptedPurple(["sleep"] * 1000, sleep_s=0.05)

    async def start_then_cancel(green_url: str, purple_url: str) -> list[str]:
        request = request_for(
            purple_url, tmp_path, task_category="crafting", tasks=["craft_furnace"], max_steps=1000, save_frames=False
        )
        message = Message(role=Role.ROLE_USER, parts=[Part(text=json.dumps(request))], message_id="m1")
        states: list[str] = []
        async with (
            open_client(green_url, None, streaming=True) as client,
            open_client(green_url, 10.0, streaming=False) as canceller,
        ):
            async for event in client.send_message(SendMessageRequest(message=message)):
                kind = event.WhichOneof("payload")
                if kind == "status_update":
                    states.append(TaskState.Name(event.status_update.status.state))
                    text = "".join(part.text for part in event.status_update.status.message.parts)
                    if text == "Running task: craft_furnace":
                        async with httpx.AsyncClient(timeout=5.0, trust_env=False) as http:  # responsive mid-episode
                            card = await http.get(f"{green_url}/.well-known/agent-card.json")
                        assert card.status_code == 200
                        await canceller.cancel_task(CancelTaskRequest(id=event.status_update.task_id))
        return states

    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        states = asyncio.run(asyncio.wait_for(start_then_cancel(green_url, purple_url), timeout=60))
    assert states[-1] == "TASK_STATE_CANCELED"
    assert len(purple.observations) < 1000
