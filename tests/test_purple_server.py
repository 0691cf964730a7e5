"""The purple A2A server as a real subprocess (the CLI) and, for lifecycle details, in a thread."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import json
import signal
import socket
from pathlib import Path

import pytest
from cli_support import invoke
from PIL import Image
from server_procs import HOST, ServerProcess, free_port, running_app, running_cli_server

from mcu_arms.a2a_client import AgentTimeout, client_timeout_for_step, open_client, payload_to_message, send_and_collect
from mcu_arms.a2a_transport import Skill, build_app, build_card
from mcu_arms.contracts.catalog import AGENT_KINDS
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import BUTTON_KEYS, AckPayload, ActionPayload, InitPayload, ObservationPayload
from mcu_arms.purple.base import Policy
from mcu_arms.purple.baselines import RANDOM_REPERTOIRE
from mcu_arms.purple.server import MAX_LIVE_CONTEXTS, PurpleExecutor

STEP_TIMEOUT = 10.0


def frame_png_b64() -> str:
    image = Image.new("RGB", (128, 128), (40, 120, 40))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


FRAME = frame_png_b64()


def purple_args(kind: str, port: int, *extra: str) -> list[str]:
    return ["serve", "purple", "--agent", kind, "--host", HOST, "--port", str(port), *extra]


async def play(url: str, steps: int, context_id: str) -> tuple[dict, list[dict]]:
    """One episode: init, then `steps` observations, all in one context over one client."""
    async with open_client(url, client_timeout_for_step(STEP_TIMEOUT)) as client:
        init = InitPayload(prompt="You are an agent", text="mine a log")
        ack = json.loads(await send_and_collect(client, payload_to_message(init, context_id=context_id), STEP_TIMEOUT))
        actions = []
        for step in range(steps):
            observation = ObservationPayload(step=step, obs=FRAME)
            reply = await send_and_collect(client, payload_to_message(observation, context_id=context_id), STEP_TIMEOUT)
            actions.append(json.loads(reply))
        return ack, actions


async def send_raw(url: str, payload: dict | str, context_id: str) -> dict:
    """Send a payload, or raw text when given a string, and decode the JSON answer."""
    message = payload_to_message(payload if isinstance(payload, dict) else {}, context_id=context_id)
    if isinstance(payload, str):
        message.parts[0].text = payload
    async with open_client(url, client_timeout_for_step(STEP_TIMEOUT)) as client:
        return json.loads(await send_and_collect(client, message, STEP_TIMEOUT))


def test_noop_server_acks_and_presses_nothing(tmp_path: Path):
    port = free_port()
    with running_cli_server(purple_args("noop", port), tmp_path / "purple.log", port) as server:
        ack, actions = asyncio.run(play(server.url, 3, "episode-1"))
    assert AckPayload.model_validate(ack).success is True
    for action in actions:
        parsed = ActionPayload.model_validate(action)
        assert parsed.action_type == "env"
        assert all(parsed.action[key] == 0 for key in BUTTON_KEYS)
        assert parsed.action["camera"] == [0.0, 0.0]
    assert "init context=episode-1 agent=noop" in server.log()


@pytest.mark.slow
def test_random_is_deterministic_per_seed_and_per_episode(tmp_path: Path):
    ports = [free_port() for _ in range(2)]
    first = ServerProcess(purple_args("random", ports[0], "--seed", "7"), tmp_path / "a.log", ports[0])
    second = ServerProcess(purple_args("random", ports[1], "--seed", "8"), tmp_path / "b.log", ports[1])
    try:
        first.wait_ready()
        second.wait_ready()

        async def episodes() -> tuple[list, list, list]:
            _, seed7 = await play(first.url, 30, "e1")
            _, seed7_again = await play(first.url, 30, "e2")  # a new episode on the same server starts over
            _, seed8 = await play(second.url, 30, "e1")
            return seed7, seed7_again, seed8

        seed7, seed7_again, seed8 = asyncio.run(episodes())
    finally:
        first.stop()
        second.stop()
    assert seed7 == seed7_again
    assert seed7 != seed8
    repertoire = [json.loads(json.dumps(action)) for action in RANDOM_REPERTOIRE]
    assert all(action["action"] in repertoire for action in seed7)
    assert len({json.dumps(action["action"], sort_keys=True) for action in seed7}) > 5  # it does vary


def test_scripted_server_answers_init_and_observations_and_reports_at_shutdown(tmp_path: Path):
    port = free_port()
    args = purple_args("scripted", port, "--seed", "1", "--output-dir", str(tmp_path / "purple"))
    with running_cli_server(args, tmp_path / "purple.log", port) as server:
        ack, actions = asyncio.run(play(server.url, 3, "episode"))
    assert ack["type"] == "ack" and ack["success"] is True
    assert [action["type"] for action in actions] == ["action"] * 3
    assert "internal error" not in server.log()
    report = json.loads((tmp_path / "purple" / "scripted_report.json").read_text())
    assert report["kind"] == "scripted" and report["seed"] == 1 and report["episodes"][0]["observations"] == 3


def test_bad_payloads_get_a_reasoned_answer_without_hanging(tmp_path: Path):
    port = free_port()
    with running_cli_server(purple_args("noop", port), tmp_path / "purple.log", port) as server:

        async def exchanges() -> dict[str, dict]:
            answers = {
                "garbage": await send_raw(server.url, "this is not json", "c1"),
                "unknown_type": await send_raw(server.url, {"type": "dance"}, "c1"),
                "obs_before_init": await send_raw(server.url, {"type": "obs", "step": 0, "obs": FRAME}, "fresh"),
                "bad_init": await send_raw(server.url, {"type": "init", "text": "no prompt"}, "c2"),
            }
            await send_raw(server.url, {"type": "init", "prompt": "p", "text": "t"}, "c3")
            answers["bad_obs"] = await send_raw(server.url, {"type": "obs", "obs": FRAME}, "c3")
            return answers

        answers = asyncio.run(exchanges())
    log = server.log()  # after the stop: the final summary holds the counts
    assert answers["garbage"]["success"] is False and "no JSON object" in answers["garbage"]["message"]
    assert answers["unknown_type"]["success"] is False and "'dance'" in answers["unknown_type"]["message"]
    assert answers["obs_before_init"]["type"] == "action" and "no init" in answers["obs_before_init"]["reason"]
    assert answers["bad_init"]["success"] is False and "prompt" in answers["bad_init"]["message"]
    assert answers["bad_obs"]["type"] == "action" and "step" in answers["bad_obs"]["reason"]
    assert "bad_payload=2" in log and "obs_without_init=1" in log and "bad_init=1" in log and "bad_obs=1" in log


def test_sigterm_closes_open_episodes_and_logs_a_final_summary(tmp_path: Path):
    port = free_port()
    server = ServerProcess(purple_args("random", port, "--seed", "3"), tmp_path / "purple.log", port)
    try:
        server.wait_ready()
        asyncio.run(play(server.url, 4, "episode-9"))
    finally:
        returncode = server.stop(signal.SIGTERM)
    log = server.log()
    assert returncode == 0, log
    assert "closed context=episode-9 after 4 observations (server shutdown)" in log
    assert "summary (final) agent=random" in log and "obs=4" in log


def test_busy_port_aborts_and_leaves_the_holder_alone(tmp_path: Path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = ServerProcess(purple_args("noop", port), tmp_path / "purple.log", port)
        returncode = server.process.wait(timeout=60)
        server.stop()
        assert returncode == 2
        assert f"cannot listen on {HOST}:{port}" in server.log()
        with socket.create_connection((HOST, port), timeout=5):
            pass


def test_unknown_agent_kind_is_a_user_error_listing_the_kinds(tmp_path: Path):
    outcome = invoke(tmp_path, {}, "serve", "purple", "--agent", "genius", "--port", str(free_port()))
    assert outcome.exit_code == 2
    assert "unknown agent kind 'genius'" in outcome.err
    assert all(kind in outcome.err for kind in AGENT_KINDS)


STUCK_STEP = 100


class RecordingPolicy(Policy):
    """Records its lifecycle in a shared journal; fails to act on a negative step and hangs on STUCK_STEP."""

    def __init__(self, journal: list[str], name: str) -> None:
        self.journal = journal
        self.name = name

    async def init(self, payload: InitPayload) -> AckPayload:
        self.journal.append(f"init {self.name} {payload.text}")
        return AckPayload(message=self.name)

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        if payload.step < 0:
            raise RuntimeError("negative step")
        if payload.step == STUCK_STEP:
            try:
                await asyncio.Event().wait()  # never set: this action never comes unless cancelled
            except asyncio.CancelledError:
                self.journal.append(f"cancelled {payload.step}")
                raise
        return ActionPayload(action_type="env", action={"forward": 1})

    async def close(self) -> None:
        self.journal.append(f"close {self.name}")


def recording_app(journal: list[str]):
    created = iter(range(1000))

    def factory(options: PurpleOptions) -> Policy:
        return RecordingPolicy(journal, f"p{next(created)}")

    executor = PurpleExecutor("scripted", PurpleOptions(), factory)

    def card(url: str):  # an a2a AgentCard
        return build_card("rec", "records", url, [Skill("s", "S", "d")], streaming=False)

    return executor, (lambda url: build_app(card(url), executor))


def test_reinit_closes_the_old_policy_and_old_contexts_are_evicted_beyond_the_limit():
    journal: list[str] = []
    executor, make_app = recording_app(journal)
    init = {"type": "init", "prompt": "p", "text": "t"}
    with running_app(make_app) as url:

        async def exchanges() -> None:
            await send_raw(url, init, "same")
            await send_raw(url, init, "same")  # a new episode in the same context replaces the policy
            for index in range(MAX_LIVE_CONTEXTS):
                await send_raw(url, init, f"other-{index}")

        asyncio.run(exchanges())
        assert journal[:3] == ["init p0 t", "close p0", "init p1 t"]
        # one context too many: the least recently used ("same", policy p1) was closed
        assert "close p1" in journal
        asyncio.run(executor.close_all())
    assert sorted(entry for entry in journal if entry.startswith("close")) == sorted(
        ["close p0", "close p1"] + [f"close p{index}" for index in range(2, 2 + MAX_LIVE_CONTEXTS)]
    )


def test_a_policy_that_raises_gets_a_noop_with_the_reason():
    journal: list[str] = []
    executor, make_app = recording_app(journal)
    with running_app(make_app) as url:

        async def exchanges() -> tuple[dict, dict]:
            await send_raw(url, {"type": "init", "prompt": "p", "text": "t"}, "c")
            good = await send_raw(url, {"type": "obs", "step": 1, "obs": ""}, "c")
            bad = await send_raw(url, {"type": "obs", "step": -1, "obs": ""}, "c")
            return good, bad

        good, bad = asyncio.run(exchanges())
    assert good["action"] == {"forward": 1}
    assert bad["type"] == "action" and "RuntimeError: negative step" in bad["reason"]
    assert all(value in (0, [0.0, 0.0]) for value in bad["action"].values())
    assert executor.counts["act_failed"] == 1 and executor.counts["obs"] == 1


def test_a_newer_observation_supersedes_a_stuck_one_instead_of_queueing_behind_it():
    journal: list[str] = []
    executor, make_app = recording_app(journal)
    with running_app(make_app) as url:

        async def exchanges() -> dict:
            await send_raw(url, {"type": "init", "prompt": "p", "text": "t"}, "c")
            async with open_client(url, 30) as client:
                stuck = payload_to_message({"type": "obs", "step": STUCK_STEP, "obs": ""}, context_id="c")
                with pytest.raises(AgentTimeout):
                    await send_and_collect(client, stuck, 0.5)  # the green gives up on this step
            return await send_raw(url, {"type": "obs", "step": STUCK_STEP + 1, "obs": ""}, "c")

        answer = asyncio.run(exchanges())
    assert answer["action"] == {"forward": 1}
    assert f"cancelled {STUCK_STEP}" in journal
    assert executor.counts["superseded"] == 1 and executor.counts["obs"] == 1


def test_periodic_summary_reports_the_counts(monkeypatch, capsys):
    import mcu_arms.purple.server as purple_server

    monkeypatch.setattr(purple_server, "SUMMARY_INTERVAL_S", 0.0)
    journal: list[str] = []
    _, make_app = recording_app(journal)
    with running_app(make_app) as url:

        async def exchanges() -> None:
            await send_raw(url, {"type": "init", "prompt": "p", "text": "t"}, "c")
            await send_raw(url, {"type": "obs", "step": 1, "obs": ""}, "c")

        asyncio.run(exchanges())
    out = capsys.readouterr().out
    assert "summary (periodic) agent=scripted live_contexts=1 init=1 obs=1" in out


@pytest.mark.skipif(importlib.util.find_spec("minestudio") is not None, reason="the minestudio extra is installed here")
def test_steve1_without_its_extra_fails_at_start_with_the_fix(tmp_path: Path):
    outcome = invoke(tmp_path, {}, "serve", "purple", "--agent", "steve1", "--port", str(free_port()))
    assert outcome.exit_code == 2
    assert "minestudio extra" in outcome.err and "pip install" in outcome.err
