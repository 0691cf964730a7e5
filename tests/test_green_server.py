"""The green agent end to end: the real server as a subprocess (`mcu-arms serve green`), real purple A2A servers, the
embedded simulator, real files. Covers scoring (reward and milestone tasks, video blending), every noop cause,
init refusal, rejections, the result file (never overwritten), a 0.3 client, and the `mcu-arms evaluate` client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from model_service import FakeModelService
from purples import SCRIPT, TABLE_SCRIPT, ScriptedPurple, build_test_purple
from server_procs import HOST, ServerProcess, free_port, running_app, wait_until

from mcu_arms.contracts.wire import BUTTON_KEYS
from mcu_arms.green.scoring import CRITERIA
from mcu_arms.green.sims.minestudio import minestudio_preflight

pytestmark = pytest.mark.slow


@dataclass
class Evaluation:
    """What one evaluation streamed back."""

    states: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    artifacts: list[list[tuple[str, str]]] = field(default_factory=list)  # per artifact: (media_type, text)
    artifact_data: list[list[dict[str, Any]]] = field(default_factory=list)  # per artifact: its data parts

    @property
    def final_state(self) -> str:
        return self.states[-1]

    @property
    def final_message(self) -> str:
        return self.statuses[-1]

    @property
    def result(self) -> dict[str, Any]:
        """Our whole result, read back from the artifact's one DataPart (upstream's shape, ours under mcu_arms)."""
        from mcu_arms.contracts.evaluation import evaluation_from_artifact

        (data_parts,) = self.artifact_data
        (data,) = data_parts
        return evaluation_from_artifact(data).model_dump(mode="json")

    @property
    def upstream_view(self) -> dict[str, Any]:
        """The artifact's DataPart as it came: what an AgentBeats client stores as results[0]."""
        ((data,),) = self.artifact_data
        return data

    def task(self, name: str) -> dict[str, Any]:
        return self.result["results"][0]["task_metrics"][name]


async def _evaluate(green_url: str, request: dict[str, Any] | str) -> Evaluation:
    from a2a.helpers import get_data_parts
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    from mcu_arms.a2a_client import open_client

    text = request if isinstance(request, str) else json.dumps(request)
    message = Message(role=Role.ROLE_USER, parts=[Part(text=text)], message_id="m1")
    collected = Evaluation()
    async with open_client(green_url, None, streaming=True) as client:
        async for event in client.send_message(SendMessageRequest(message=message)):
            kind = event.WhichOneof("payload")
            if kind == "status_update":
                status = event.status_update.status
                collected.states.append(TaskState.Name(status.state).removeprefix("TASK_STATE_").lower())
                collected.statuses.append("".join(part.text for part in status.message.parts))
            elif kind == "artifact_update":
                parts = event.artifact_update.artifact.parts
                collected.artifacts.append([(part.media_type, part.text) for part in parts if part.text])
                collected.artifact_data.append(get_data_parts(parts))
    return collected


def evaluate(green_url: str, request: dict[str, Any] | str) -> Evaluation:
    return asyncio.run(asyncio.wait_for(_evaluate(green_url, request), timeout=180))


def request_for(purple_url: str, output_dir: Path, **config: Any) -> dict[str, Any]:
    return {
        "participants": {"agent": purple_url},
        "config": {"simulator": "embedded", "output_dir": str(output_dir), "step_timeout": 5.0, **config},
    }


@pytest.fixture(scope="module")
def green(tmp_path_factory: pytest.TempPathFactory) -> str:
    port = free_port()
    log = tmp_path_factory.mktemp("green") / "green.log"
    # Each test's output_dir is a tmp_path: all of them lie under pytest's base temp dir.
    root = tmp_path_factory.getbasetemp()
    server = ServerProcess(
        ["serve", "green", "--host", HOST, "--port", str(port), "--output-root", str(root)], log, port
    )
    try:
        server.wait_ready()
        yield server.url
    finally:
        server.stop()


def test_card_advertises_a_streaming_evaluator(green: str):
    card = httpx.get(f"{green}/.well-known/agent-card.json", timeout=5, trust_env=False).json()
    assert card["capabilities"]["streaming"] is True
    assert card["skills"][0]["id"] == "mcu_evaluation"


def test_reward_task_is_scored_and_its_files_written(green: str, tmp_path: Path):
    purple = ScriptedPurple(TABLE_SCRIPT)
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url, tmp_path, task_category="crafting", tasks=["craft_the_crafting_table"], max_steps=4
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    assert "Running task: craft_the_crafting_table" in evaluation.statuses
    assert any("reward craft_crafting_table reached" in line for line in evaluation.statuses)
    assert any("finished: score 10.00 / 10 [sim]" in line for line in evaluation.statuses)
    assert purple.observations == [0, 1, 2, 3] and len(purple.contexts) == 1  # init and steps share one context

    result = evaluation.result
    assert result == json.loads((tmp_path / "evaluation.json").read_text())
    assert result["simulator"] == {
        "name": "embedded",
        "version": "1.8.3",
        "label": "embedded (Crafter 1.8.3): a Crafter analogue of MCU, not MCU scores",
        "reset_mode": "hard",
        "action_mode": None,
    }  # action_mode: minestudio's only
    assert (result["seed"], result["max_steps"], result["config"]["step_timeout"]) == (0, 4, 5.0)
    category = result["results"][0]
    assert (category["num_tasks"], category["scored_tasks"], category["total_score"]) == (1, 1, 10.0)
    metrics = evaluation.task("craft_the_crafting_table")
    assert (metrics["max_score"], metrics["normalised_sim_score"], metrics["score"]) == (10.0, 10.0, 10.0)
    assert metrics["sim_score"] == 1.0  # upstream's meaning: the raw reward sum
    upstream = evaluation.upstream_view  # an AgentBeats client's results[0]
    assert (upstream["task_category"], upstream["total_score"], upstream["total_max_score"]) == ("crafting", 10.0, 10.0)
    assert upstream["task_metrics"]["craft_the_crafting_table"]["score"] == 10.0
    assert metrics["milestones"] == [{"identity": "craft_crafting_table", "step": 1, "available": True}]
    assert metrics["steps_run"] == 4 and metrics["noop_total"] == 0
    assert metrics["init"]["ok"] is True
    assert metrics["video"]["status"] == "skipped_perfect"
    assert 0 < metrics["duration_s"] <= result["duration_s"] and metrics["agent_latency"]["count"] == 4
    summary = next(text for media, text in evaluation.artifacts[0] if media == "text/plain")
    assert summary.startswith("MCU Evaluation Result") and "Task 'craft_the_crafting_table': 10.00 / 10" in summary

    task_dir = tmp_path / "craft_the_crafting_table"
    lines = [json.loads(line) for line in (task_dir / "steps.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2, 3]
    assert lines[1]["applied"]["use"] == 1 and lines[1]["events"][0]["identity"] == "craft_crafting_table"
    assert lines[1]["reward"] == 1.0 and lines[0]["reward"] == 0.0
    assert all(line["agent_ms"] > 0 and line["sim_ms"] > 0 for line in lines)
    stamps = [line["t"] for line in lines]
    assert stamps == sorted(stamps) and abs(stamps[-1] - time.time()) < 120  # wall-clock seconds, in step order
    frames = sorted(path.name for path in (task_dir / "frames").iterdir())
    assert frames == [f"{step:06d}.png" for step in range(5)]  # one per observation, plus the view after the last
    assert (task_dir / "frames" / "000000.png").read_bytes().startswith(b"\x89PNG")

    again = evaluate(
        green, request_for(purple_url, tmp_path, task_category="crafting", tasks=["craft_the_crafting_table"])
    )
    assert again.final_state == "rejected" and "already holds the results" in again.final_message
    assert json.loads((tmp_path / "evaluation.json").read_text()) == result  # a result is never overwritten


def test_a_skill_sent_to_a_simulator_that_takes_env_actions_is_an_invalid_action(green: str, tmp_path: Path):
    skill = json.dumps(
        {"type": "action", "action_type": "skill", "skill": {"kind": "collect", "args": {"block": "oak_log"}}}
    )
    purple = ScriptedPurple([skill])
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url,
                tmp_path,
                task_category="crafting",
                tasks=["craft_the_crafting_table"],
                max_steps=2,
                save_frames=False,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    first = json.loads((tmp_path / "craft_the_crafting_table" / "steps.jsonl").read_text().splitlines()[0])
    assert first["noop_cause"] == "invalid_action" and "takes env actions only" in first["reason"]
    assert first["skill"] is None and "last_skill" not in purple.payloads[1], "upstream's observation shape kept"


@pytest.mark.parametrize(
    ("observe", "frame", "state"), [("frame", True, False), ("state", False, True), ("frame+state", True, True)]
)
def test_the_observation_carries_what_the_arm_observes(green: str, tmp_path: Path, observe, frame, state):
    purple = ScriptedPurple(TABLE_SCRIPT)
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url,
                tmp_path,
                task_category="crafting",
                tasks=["craft_the_crafting_table"],
                max_steps=3,
                observe=observe,
                save_frames=False,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    assert evaluation.task("craft_the_crafting_table")["score"] == 10.0, "the table still gets placed"
    first, _, after = purple.payloads
    assert bool(first["obs"]) is frame
    assert ("state" in first) is state, "a frame-only observation keeps upstream's exact shape"
    if state:
        assert (
            first["state"]["vitals"]["health"]["value"] == 9 and first["state"]["capabilities"]["keymap"] == "crafter"
        )
        assert "table" in after["state"]["stations_in_reach"], "the state after placing shows the table in reach"


def test_a_03_client_gets_the_streamed_evaluation(green: str, tmp_path: Path):
    """The AgentBeats scenario runner and MCU tools speak a2a 0.3: no version header, `message/stream`, 0.3 names."""
    card = httpx.get(f"{green}/.well-known/agent-card.json", timeout=5, trust_env=False).json()
    assert card["protocolVersion"] == "0.3" and card["url"].startswith(green)
    purple = ScriptedPurple(TABLE_SCRIPT)
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        request = request_for(
            purple_url,
            tmp_path,
            task_category="crafting",
            tasks=["craft_the_crafting_table"],
            max_steps=2,
            save_frames=False,
        )
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/stream",
            "params": {
                "message": {
                    "kind": "message",
                    "messageId": "m03",
                    "role": "user",
                    "parts": [{"kind": "text", "text": json.dumps(request)}],
                }
            },
        }
        with httpx.stream("POST", f"{green}/", json=body, timeout=120, trust_env=False) as response:
            assert response.status_code == 200
            events = [json.loads(line[5:])["result"] for line in response.iter_lines() if line.startswith("data:")]
    kinds = [event["kind"] for event in events]
    assert kinds[0] == "task" and kinds[-1] == "status-update" and "artifact-update" in kinds
    assert events[-1]["status"]["state"] == "completed" and events[-1]["final"] is True
    (artifact,) = [event["artifact"] for event in events if event["kind"] == "artifact-update"]
    assert artifact["parts"][0]["kind"] == "text" and artifact["parts"][1]["kind"] == "data"
    category = artifact["parts"][1]["data"]  # upstream's shape: what an AgentBeats client stores as results[0]
    assert category["total_score"] == 10.0
    assert category["task_metrics"]["craft_the_crafting_table"]["score"] == 10.0


def test_milestone_task_records_the_step_each_milestone_landed(green: str, tmp_path: Path):
    from mcu_arms.contracts.settings import PurpleOptions
    from mcu_arms.purple.server import build_purple_app

    with running_app(lambda url: build_purple_app("random", PurpleOptions(seed=1), url)[0]) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url,
                tmp_path,
                task_category="mine_diamond_from_scratch",
                max_steps=400,
                seed=1,
                progress_every=100,
                save_frames=False,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    metrics = evaluation.task("mine_diamond_from_scratch")
    assert metrics["scoring_kind"] == "milestones" and metrics["max_score"] == 100.0
    milestones = {m["identity"]: m for m in metrics["milestones"]}
    assert len(milestones) == metrics["milestones_total"] == 10
    assert milestones["iron_ingot"]["available"] is False and metrics["milestones_available"] == 9
    reached = {name: m["step"] for name, m in milestones.items() if m["step"] is not None}
    assert "mine_log" in reached, "the seeded random baseline chops a tree within 400 steps"
    assert metrics["score"] == pytest.approx(100.0 * len(reached) / 10)
    assert metrics["score_source"] == "milestones" and metrics["video"]["status"] == "disabled"

    lines = [json.loads(line) for line in (tmp_path / "mine_diamond_from_scratch" / "steps.jsonl").open()]
    logged = {event["identity"]: line["step"] for line in lines for event in line["events"]}
    assert logged == reached
    assert not (tmp_path / "mine_diamond_from_scratch" / "frames").exists()
    progress = [line for line in evaluation.statuses if line.startswith("mine_diamond_from_scratch: step ")]
    assert any("step 100/400" in line for line in progress) and any("step 300/400" in line for line in progress)
    assert any(f"step {reached['mine_log']} milestone mine_log reached" in line for line in progress)


def test_every_noop_cause_is_counted_and_the_episode_goes_on(green: str, tmp_path: Path):
    step_timeout = 1.0
    purple = ScriptedPurple(SCRIPT, sleep_s=step_timeout + 1.0)
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url,
                tmp_path,
                task_category="crafting",
                tasks=["craft_furnace"],
                max_steps=12,
                step_timeout=step_timeout,
                save_frames=False,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    metrics = evaluation.task("craft_furnace")
    assert metrics["steps_run"] == 12
    noops = metrics["noops"]
    assert {cause: stats["count"] for cause, stats in noops.items()} == {
        "timeout": 1,
        "unparseable": 1,
        "invalid_action": 2,
        "transport_error": 1,
    }
    assert metrics["noop_total"] == 5
    assert noops["timeout"]["first_reasons"] == ["step 1: no answer within 1 s"]
    assert noops["unparseable"]["first_reasons"][0].startswith("step 2: not JSON")
    assert "camera pitch must be a finite number" in noops["invalid_action"]["first_reasons"][0]
    assert "confused by this observation" in noops["invalid_action"]["first_reasons"][1]
    assert noops["transport_error"]["first_reasons"][0].startswith("step 7: ")
    assert metrics["agent_reported_noops"]["first_reasons"] == ["step 9: model call failed, sent a noop"]
    assert metrics["dropped_keys"] == {"chat": 1}
    assert metrics["action_formats"] == {"compact": 1, "env": 5, "expanded": 1}  # steps 0, 3, 9, 10, 11

    lines = [json.loads(line) for line in (tmp_path / "craft_furnace" / "steps.jsonl").open()]
    chat_step = lines[3]
    assert chat_step["dropped_keys"] == ["chat"] and chat_step["applied"]["forward"] == 1
    assert "chat" in chat_step["received"]
    assert all(set(line["applied"]) == set(BUTTON_KEYS) | {"camera"} for line in lines)
    assert [line["noop_cause"] for line in lines[:9]] == [
        None,
        "timeout",
        "unparseable",
        None,
        "invalid_action",
        None,
        None,
        "transport_error",
        "invalid_action",
    ]
    assert lines[1]["received"] is None and lines[5]["applied"]["forward"] == lines[5]["applied"]["attack"] == 1
    assert lines[6]["applied"]["jump"] == 1 and lines[6]["applied"]["camera"] == [0.0, 2.5]
    summary = next(text for media, text in evaluation.artifacts[0] if media == "text/plain")
    assert "noops 5 (" in summary and "dropped chat x1" in summary


def test_video_evaluation_blends_into_a_partial_score_with_the_configured_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_service: str
):
    """video_eval on, a reward task below its maximum: score = (sim_score + Task Progress) / 2, graded by the model
    the request names (the model service is a stand-in; the green runs in-process so it sees the test's env)."""
    import mcu_arms.green.server as green_server

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_service)
    FakeModelService.answer = json.dumps({"scores": {name: 3 for name in CRITERIA} | {"task_progress": 6}})
    purple = ScriptedPurple([])
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
                tasks=["craft_furnace"],
                max_steps=3,
                video_eval=True,
                video_model="vision-test-model",
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    metrics = evaluation.task("craft_furnace")
    assert (metrics["sim_score"], metrics["score"], metrics["score_source"]) == (0.0, 3.0, "sim+video")
    graded = metrics["video"].pop("graded_frames")
    assert metrics["video"] == {
        "status": "ok",
        "reason": "",
        "task_progress": 6.0,
        "model": "vision-test-model",
        "rubric": "mcu_arms",
        "recording_problem": None,
    }
    # the embedded simulator records nothing: the observation frames the step log saved are graded, and said so
    assert graded == {
        "source": "observation_frames",
        "path": str(tmp_path / "craft_furnace" / "frames"),
        "width": 128,
        "height": 128,
        "frames_in_episode": 4,
        "frames_sent": 4,
    }
    assert evaluation.result["video_rubric"] == "mcu_arms"
    assert metrics["action_control"] == 3.0 and evaluation.result["results"][0]["avg_action_control"] == 3.0
    (request,) = FakeModelService.requests
    assert request["model"] == "vision-test-model"
    assert any("video evaluation on (vision-test-model, mcu_arms rubric)" in line for line in evaluation.statuses)


def test_mcu_auto_eval_dir_switches_the_rubric_and_every_result_names_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_service: str
):
    """MCU_AUTO_EVAL_DIR on the green's host: MCU's prompt + the task's criteria file grade, and the result says so
    (the prompt and criteria here are our own test files in MCU's layout)."""
    import mcu_arms.green.server as green_server

    auto_eval = tmp_path / "auto_eval"
    (auto_eval / "prompt").mkdir(parents=True)
    (auto_eval / "prompt" / "single_rating_prompt.txt").write_text("TEST RATING PROMPT")
    (auto_eval / "criteria_files").mkdir()
    (auto_eval / "criteria_files" / "craft_furnace.txt").write_text("**Task Progress:** furnace crafted?\n")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_service)
    monkeypatch.setenv("MCU_AUTO_EVAL_DIR", str(auto_eval))
    FakeModelService.answer = "Task Progress:\n- evidence: walked about\n- Task Progress: 4\n- Action Control: 5\n"
    purple = ScriptedPurple([])
    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        evaluation = evaluate(
            green_url,
            request_for(
                purple_url,
                tmp_path / "out",
                task_category="crafting",
                tasks=["craft_furnace"],
                max_steps=3,
                video_eval=True,
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    metrics = evaluation.task("craft_furnace")
    assert metrics["video"]["rubric"] == "mcu" and evaluation.result["video_rubric"] == "mcu"
    assert (metrics["score"], metrics["action_control"], metrics["score_source"]) == (2.0, 5.0, "sim+video")
    (request,) = FakeModelService.requests
    assert request["messages"][0] == {"role": "system", "content": "TEST RATING PROMPT"}
    assert any("mcu rubric" in line for line in evaluation.statuses)
    summary = next(text for media, text in evaluation.artifacts[0] if media == "text/plain")
    assert "video graded by the mcu rubric" in summary


def test_unknown_config_keys_are_accepted_recorded_and_said(green: str, tmp_path: Path):
    """Upstream's green ignores config keys it does not use; ours does too, and names them in the stream and result."""
    purple = ScriptedPurple(TABLE_SCRIPT)
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url,
                tmp_path,
                task_category="crafting",
                tasks=["craft_the_crafting_table"],
                max_steps=2,
                save_frames=False,
                difficulty="hard",
                api_token="s3cret-value",
            ),
        )
    assert evaluation.final_state == "completed", evaluation.statuses
    assert "Ignoring config keys this green does not use: api_token, difficulty" in evaluation.statuses
    result = json.loads((tmp_path / "evaluation.json").read_text())
    assert result["ignored_config_keys"] == ["api_token", "difficulty"]
    assert "difficulty" not in result["config"] and "s3cret-value" not in json.dumps(result)  # names, never values
    assert evaluation.result == result


def test_a_refused_init_is_recorded_loudly_and_the_episode_still_runs(green: str, tmp_path: Path):
    purple = ScriptedPurple([], refuse_init=True)
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        evaluation = evaluate(
            green,
            request_for(
                purple_url, tmp_path, task_category="crafting", tasks=["craft_furnace"], max_steps=3, save_frames=False
            ),
        )
    assert evaluation.final_state == "completed"
    metrics = evaluation.task("craft_furnace")
    assert metrics["init"] == {
        "ok": False,
        "cause": "refused",
        "message": "refusing on purpose",
        "round_trip_ms": metrics["init"]["round_trip_ms"],
    }
    assert metrics["steps_run"] == 3
    assert any("agent init failed (refused: refusing on purpose)" in line for line in evaluation.statuses)
    summary = next(text for media, text in evaluation.artifacts[0] if media == "text/plain")
    assert "INIT FAILED (refused: refusing on purpose)" in summary


@pytest.mark.parametrize(
    ("config", "participants", "expected"),
    [
        ({"task_category": "cooking"}, None, "unknown task_category 'cooking' (valid: building, combat"),
        (
            {"task_category": "crafting", "tasks": ["craft_ladder"]},
            None,
            "needs minestudio: task 'craft_ladder' has no Crafter analogue",
        ),
        ({"task_category": "motion"}, None, "needs minestudio: category 'motion' has no Crafter analogue"),
        ({"task_category": "crafting", "tasks": ["craft_nothing"]}, None, "unknown task 'craft_nothing'"),
        ({"task_category": "crafting", "max_steps": 0}, None, "config.max_steps: Input should be greater than 0"),
        (
            {"task_category": "crafting", "auto_eval_dir": "/nonexistent/auto_eval"},
            None,
            "config auto_eval_dir: /nonexistent/auto_eval is not a directory",
        ),
        ({"task_category": "crafting", "obs_encoding": "gif"}, None, "config.obs_encoding: Input should be 'png'"),
        (
            {"task_category": "crafting", "reset_mode": "seeded_fast"},
            None,
            "reset_mode 'seeded_fast' is for minestudio: the embedded simulator starts each task its own way",
        ),
        ({"task_category": "crafting", "reset_mode": "fast"}, None, "config.reset_mode: Input should be 'hard' or"),
        ({"task_category": "crafting"}, {"judge": "http://127.0.0.1:1"}, "must name the role 'agent'"),
        ({"task_category": "crafting"}, {"agent": "http://127.0.0.1:1"}, "participant 'agent' at http://127.0.0.1:1"),
        (
            {"task_category": "crafting", "simulator": "minestudio", "observe": "state"},
            None,
            "observe 'state' needs structured state, which the minestudio simulator cannot provide",
        ),
        (
            {
                "task_category": "crafting",
                "simulator": "mineflayer",
                "observe": "state",
                "mineflayer": {"port": free_port()},
            },
            None,
            "simulator 'mineflayer' cannot run here",
        ),
        (
            {"task_category": "crafting", "simulator": "mineflayer"},
            None,
            "observe 'frame' needs frames, and the mineflayer simulator serves none",
        ),
        pytest.param(
            {"task_category": "crafting", "simulator": "minestudio"},
            None,
            "simulator 'minestudio' cannot run here: MineStudio cannot run on this host",
            marks=pytest.mark.skipif(not minestudio_preflight(os.environ), reason="MineStudio can run here"),
        ),
    ],
)
def test_invalid_requests_are_rejected_saying_what_is_wrong(green, tmp_path, config, participants, expected):
    request = {
        "participants": participants or {"agent": "http://127.0.0.1:1"},
        "config": {"simulator": "embedded", "output_dir": str(tmp_path), **config},
    }
    evaluation = evaluate(green, request)
    assert evaluation.final_state == "rejected"
    assert expected in evaluation.final_message
    assert not (tmp_path / "evaluation.json").exists()


@pytest.mark.parametrize(("text", "expected"), [("not json", "invalid evaluation request"), ("{}", "participants")])
def test_a_request_that_is_not_an_eval_request_is_rejected(green: str, text: str, expected: str):
    evaluation = evaluate(green, text)
    assert evaluation.final_state == "rejected" and expected in evaluation.final_message


def test_the_evaluate_cli_saves_the_green_result(green: str, tmp_path: Path):
    purple = ScriptedPurple(TABLE_SCRIPT)
    output_dir = tmp_path / "green"
    scenario = tmp_path / "scenario.toml"
    with running_app(lambda url: build_test_purple(purple, url)) as purple_url:
        scenario.write_text(
            f'[green_agent]\nendpoint = "{green}"\n\n[[participants]]\nrole = "agent"\nagentbeats_id = "purple-1"\n'
            f'endpoint = "{purple_url}"\n\n[config]\ntask_category = "crafting"\n'
            'tasks = ["craft_the_crafting_table"]\nsimulator = "embedded"\n'
            f'max_steps = 3\nstep_timeout = 5.0\noutput_dir = "{output_dir}"\nsave_frames = false\n'
            'difficulty = "hard"\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "mcu_arms", "evaluate", str(scenario), str(tmp_path / "evaluation.json")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "Running task: craft_the_crafting_table" in done.stdout
    assert "warning:" in done.stderr and "config.difficulty" in done.stderr
    assert "Ignoring config keys this green does not use: difficulty" in done.stdout
    saved = json.loads((tmp_path / "evaluation.json").read_text())
    assert saved == json.loads((output_dir / "evaluation.json").read_text())
    assert saved["results"][0]["task_metrics"]["craft_the_crafting_table"]["score"] == 10.0
    assert isinstance(saved["results"][0]["num_tasks"], int)  # the DataPart's floats read back as the model's ints
    assert saved["ignored_config_keys"] == ["difficulty"]


def test_a_green_told_its_simulator_warms_it_up_before_the_first_request(tmp_path: Path):
    """`run` starts its green with `--warm-up SIMULATOR`: the backend's imports and first calls are paid while it
    waits, and the log says how long they took; an unknown name is refused before anything listens."""
    port = free_port()
    server = ServerProcess(
        [
            "serve",
            "green",
            "--host",
            HOST,
            "--port",
            str(port),
            "--output-root",
            str(tmp_path),
            "--warm-up",
            "embedded",
        ],
        tmp_path / "green.log",
        port,
    )
    try:
        server.wait_ready()
        wait_until(lambda: "simulator 'embedded' warmed up in" in server.log(), 60, "the warm-up's log line")
    finally:
        server.stop()
    refused = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "serve", "green", "--port", str(free_port()), "--warm-up", "nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    assert "--warm-up" in refused.stderr and "unknown simulator 'nosuch'" in refused.stderr
    assert "embedded" in refused.stderr and "Traceback" not in refused.stderr
