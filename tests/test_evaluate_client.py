"""The evaluation client and the scenario file, against a small fake green A2A server that streams like the real one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState
from cli_support import invoke, make_environment
from server_procs import HOST, free_port, running_app

from mcu_arms.a2a_client import message_payload
from mcu_arms.a2a_transport import Skill, build_app, build_card
from mcu_arms.client.evaluate import evaluate
from mcu_arms.client.scenario import load_scenario
from mcu_arms.contracts.catalog import CATEGORIES
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.wire import EvalRequest

RESULT = {
    "participants": {"agent": "http://127.0.0.1:1"},
    "results": [
        {"task_category": "crafting", "num_tasks": 1, "total_score": 7, "task_metrics": {"craft_furnace": {"score": 7}}}
    ],
}
SUMMARY = "MCU Evaluation Result\nCategory: crafting\nTotal Score: 7"


class FakeGreen(AgentExecutor):
    """Streams like the green agent; what it does depends on the first requested task name."""

    def __init__(self) -> None:
        self.requests: list[EvalRequest] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        request = EvalRequest.model_validate(message_payload(context.message))
        self.requests.append(request)
        behaviour = (request.config.tasks or ["ok"])[0]
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def say(text: str):
            return updater.new_agent_message(parts=[Part(text=text)])

        if behaviour == "reject":
            await updater.reject(say("Rejected: task 'reject' is not runnable on the embedded simulator"))
            return
        await updater.start_work(say("Starting MCU evaluation with 1 tasks from crafting"))
        await updater.update_status(TaskState.TASK_STATE_WORKING, say("Running task: craft_furnace"))
        if behaviour == "fail":
            await updater.failed(say("Evaluation failed: RuntimeError: the simulator died"))
            return
        if behaviour == "chunked":
            result_text = json.dumps(RESULT)
            middle = len(result_text) // 2
            await updater.add_artifact([Part(text=result_text[:middle])], artifact_id="r", name="Result")
            await updater.add_artifact([Part(text=result_text[middle:])], artifact_id="r", append=True, last_chunk=True)
        elif behaviour != "noresult":
            await updater.add_artifact([Part(text=SUMMARY), Part(text=json.dumps(RESULT))], name="Result")
        await updater.complete(say("Evaluation complete: total score 7.00"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing to cancel in a fake."""


@pytest.fixture
def fake_green():
    executor = FakeGreen()

    def make_app(url: str):
        card = build_card("fake green", "streams", url, [Skill("eval", "Eval", "evaluates")], streaming=True)
        return build_app(card, executor)

    with running_app(make_app) as url:
        yield url, executor


def write_scenario(path: Path, green_url: str, task: str = "ok", extra_config: str = "") -> Path:
    path.write_text(
        f"""[green_agent]
endpoint = "{green_url}"

[[participants]]
role = "agent"
endpoint = "http://127.0.0.1:9019"

[config]
task_category = "crafting"
tasks = ["{task}"]
simulator = "embedded"
max_steps = 20
{extra_config}"""
    )
    return path


def test_completed_evaluation_streams_timestamped_statuses_and_saves_the_result(tmp_path: Path, fake_green):
    url, executor = fake_green
    scenario = write_scenario(tmp_path / "scenario.toml", url)
    out = tmp_path / "episode" / "evaluation.json"
    outcome = invoke(tmp_path, {}, "evaluate", str(scenario), str(out))
    assert outcome.exit_code == 0, outcome.err
    assert json.loads(out.read_text()) == RESULT  # exactly the green's JSON, integers intact
    assert re.search(r"^2026-11-30T12:00:00Z \[Status: working\] Running task: craft_furnace$", outcome.out, re.M)
    assert "[Status: completed] Evaluation complete" in outcome.out
    assert "MCU Evaluation Result" in outcome.out and f"result written to {out}" in outcome.out
    sent = executor.requests[0]
    assert sent.participants == {"agent": "http://127.0.0.1:9019"}
    assert sent.config.simulator == "embedded" and sent.config.max_steps == 20
    assert not list(out.parent.glob(".*.tmp"))  # the temporary file is gone


def test_existing_output_is_never_overwritten_and_nothing_is_sent(tmp_path: Path, fake_green):
    url, executor = fake_green
    scenario = write_scenario(tmp_path / "scenario.toml", url)
    out = tmp_path / "evaluation.json"
    out.write_text('{"earlier": "result"}')
    outcome = invoke(tmp_path, {}, "evaluate", str(scenario), str(out))
    assert outcome.exit_code == 2
    assert "refusing to overwrite" in outcome.err and str(out) in outcome.err
    assert json.loads(out.read_text()) == {"earlier": "result"}
    assert executor.requests == []


def test_rejected_evaluation_exits_1_with_the_reason(tmp_path: Path, fake_green):
    url, _ = fake_green
    out = tmp_path / "evaluation.json"
    outcome = invoke(tmp_path, {}, "evaluate", str(write_scenario(tmp_path / "s.toml", url, "reject")), str(out))
    assert outcome.exit_code == 1
    assert "evaluation rejected: Rejected: task 'reject' is not runnable" in outcome.err
    assert not out.exists()


def test_failed_evaluation_exits_1_with_the_reason(tmp_path: Path, fake_green):
    url, _ = fake_green
    outcome = invoke(tmp_path, {}, "evaluate", str(write_scenario(tmp_path / "s.toml", url, "fail")))
    assert outcome.exit_code == 1
    assert "[Status: failed] Evaluation failed: RuntimeError: the simulator died" in outcome.out
    assert "evaluation failed: Evaluation failed: RuntimeError" in outcome.err


def test_completion_without_a_json_result_is_a_failure(tmp_path: Path, fake_green):
    url, _ = fake_green
    out = tmp_path / "evaluation.json"
    outcome = invoke(tmp_path, {}, "evaluate", str(write_scenario(tmp_path / "s.toml", url, "noresult")), str(out))
    assert outcome.exit_code == 1
    assert "without a JSON result" in outcome.err
    assert not out.exists()


def test_result_sent_in_appended_chunks_is_reassembled(tmp_path: Path, fake_green):
    url, _ = fake_green
    environment, _, _ = make_environment(tmp_path, {})
    out = tmp_path / "evaluation.json"
    result = evaluate(write_scenario(tmp_path / "s.toml", url, "chunked"), out, environment)
    assert result.completed and result.state == "completed"
    assert result.result == RESULT and json.loads(out.read_text()) == RESULT
    assert [line.state for line in result.statuses] == ["submitted", "working", "working", "completed"]


def test_unreachable_green_fails_after_the_card_deadline(tmp_path: Path):
    scenario = write_scenario(tmp_path / "s.toml", f"http://{HOST}:{free_port()}")
    outcome = invoke(tmp_path, {}, "evaluate", str(scenario), "--card-timeout", "0.5")
    assert outcome.exit_code == 1
    assert "evaluation unreachable" in outcome.err and "not ready after 0.5 s" in outcome.err


# --- the scenario file ---------------------------------------------------------------------------------------------


def scenario_error(tmp_path: Path, text: str) -> UserError:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    with pytest.raises(UserError) as raised:
        load_scenario(path)
    assert raised.value.path == str(path)
    return raised.value


GOOD = """[green_agent]
endpoint = "http://127.0.0.1:9009"

[[participants]]
role = "agent"
endpoint = "http://127.0.0.1:9019"

[config]
task_category = "crafting"
"""


def test_a_good_scenario_becomes_an_eval_request(tmp_path: Path):
    path = tmp_path / "scenario.toml"
    path.write_text(GOOD.replace("[green_agent]\n", '[green_agent]\ncmd = "ignored launcher"\n'))
    scenario = load_scenario(path)
    request = scenario.eval_request()
    assert scenario.green_endpoint == "http://127.0.0.1:9009"
    assert request.participants == {"agent": "http://127.0.0.1:9019"}
    assert request.config.task_category == "crafting" and request.config.max_steps is None


def test_an_agentbeats_scenario_with_ids_and_foreign_config_keys_is_accepted_and_the_keys_named(tmp_path: Path):
    """AgentBeats scenarios carry `agentbeats_id` and config keys for other greens (upstream ignores unknown keys)."""
    path = tmp_path / "scenario.toml"
    green = 'endpoint = "http://127.0.0.1:9009"\n'
    text = GOOD.replace(green, green + 'agentbeats_id = "g-1"\n')
    path.write_text(
        text.replace('role = "agent"\n', 'role = "agent"\nagentbeats_id = "p-7"\n') + 'difficulty = "hard"\n'
    )
    scenario = load_scenario(path)
    assert scenario.green_agentbeats_id == "g-1" and scenario.participants[0].agentbeats_id == "p-7"
    assert scenario.config.ignored_keys() == ["difficulty"]
    (warning,) = scenario.warnings()
    assert "config.difficulty is not a key the mcu-arms green knows" in warning and "max_steps" in warning
    request = json.loads(scenario.eval_request().model_dump_json())
    assert request["config"]["difficulty"] == "hard"  # sent on: another green may use it
    assert request["participants"] == {"agent": "http://127.0.0.1:9019"}

    error = scenario_error(tmp_path, GOOD.replace('role = "agent"\n', 'role = "agent"\nagentbeats_id = ""\n'))
    assert (error.line, error.key) == (6, "participants[0].agentbeats_id")


def test_scenario_errors_name_file_line_and_key(tmp_path: Path):
    error = scenario_error(tmp_path, GOOD.replace('"http://127.0.0.1:9009"', '"127.0.0.1:9009"'))
    assert (error.line, error.key) == (2, "green_agent.endpoint") and "http://HOST:PORT" in error.render()

    error = scenario_error(tmp_path, GOOD.replace('"crafting"', '"crafts"'))
    assert (error.line, error.key) == (9, "config.task_category")
    assert all(category in error.render() for category in CATEGORIES)

    error = scenario_error(tmp_path, GOOD + "max_steps = -5\n")
    assert (error.line, error.key) == (10, "config.max_steps") and "greater than 0" in error.message

    error = scenario_error(tmp_path, GOOD + 'simulator = "minecraft"\n')
    assert (error.line, error.key) == (10, "config.simulator") and "embedded" in error.render()

    error = scenario_error(tmp_path, GOOD + '[[participants]]\nrole = "agent"\nendpoint = "http://127.0.0.1:9020"\n')
    assert (error.line, error.key) == (11, "participants[1].role") and "twice" in error.message

    error = scenario_error(tmp_path, GOOD.replace('role = "agent"\n', 'role = "agent"\nport = 3\n'))
    assert (error.line, error.key) == (6, "participants.port")

    error = scenario_error(tmp_path, GOOD.replace("[config]", "[configuration]"))
    assert (error.line, error.key) == (8, "configuration")

    error = scenario_error(tmp_path, GOOD.replace('task_category = "crafting"', "task_category = "))
    assert error.line == 9 and "not valid TOML" in error.message


def test_scenario_missing_pieces_are_named(tmp_path: Path):
    assert (
        scenario_error(tmp_path, GOOD.split("[[participants]]")[0] + '[config]\ntask_category = "crafting"\n').key
        == "participants"
    )
    assert scenario_error(tmp_path, GOOD.split("[config]")[0]).key == "config"
    assert scenario_error(tmp_path, GOOD.replace('task_category = "crafting"', "")).key == "config.task_category"
    assert (
        scenario_error(tmp_path, GOOD.replace('endpoint = "http://127.0.0.1:9009"', "")).key == "green_agent.endpoint"
    )


def test_missing_scenario_file_is_a_user_error_via_the_cli(tmp_path: Path):
    outcome = invoke(tmp_path, {}, "evaluate", str(tmp_path / "nope.toml"))
    assert outcome.exit_code == 2 and "scenario file not found" in outcome.err
