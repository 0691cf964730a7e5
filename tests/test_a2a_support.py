"""The shared A2A plumbing against real servers on loopback: payload encoding, timeouts, typed errors, busy ports."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role
from google.protobuf import struct_pb2
from server_procs import HOST, free_port, running_app

from mcu_arms.a2a_client import (
    AgentTimeout,
    AgentTransportError,
    client_timeout_for_step,
    message_payload,
    open_client,
    payload_to_message,
    send_and_collect,
)
from mcu_arms.a2a_transport import PortBusy, Skill, bind_socket, build_app, build_card, card_url_for
from mcu_arms.contracts.wire import ActionPayload, InitPayload, ObservationPayload


class EchoExecutor(AgentExecutor):
    """Answers after `delay_s` with the request text, as one message or as a task with an artifact."""

    def __init__(self, delay_s: float = 0.0, as_task: bool = False) -> None:
        self.delay_s = delay_s
        self.as_task = as_task

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await asyncio.sleep(self.delay_s)  # the agent's thinking time, not synchronisation
        text = context.get_user_input()
        if not self.as_task:
            await event_queue.enqueue_event(new_text_message("echo:" + text, context_id=context.context_id))
            return
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await updater.add_artifact([new_text_part("echo:" + text)])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing long-running to cancel."""


def echo_app(**kwargs: object):
    """An app factory for running_app: the card names the server's own URL."""
    return lambda url: build_app(
        build_card("echo", "echoes", url, [Skill("echo", "Echo", "repeats")], streaming=False), EchoExecutor(**kwargs)
    )


def test_payload_round_trip_keeps_integers_and_text():
    message = payload_to_message(ObservationPayload(step=42, obs="AAAA"), context_id="ctx")
    assert message.context_id == "ctx"
    assert message.role == Role.ROLE_USER
    decoded = message_payload(message)
    assert decoded == {"type": "obs", "step": 42, "obs": "AAAA"}
    assert isinstance(decoded["step"], int)


def test_message_payload_rejects_what_is_not_a_json_object():
    assert message_payload(new_text_message("not json")) is None
    assert message_payload(new_text_message("[1, 2]")) is None
    assert message_payload(Message(role=Role.ROLE_AGENT, message_id="m")) is None


def test_message_payload_reads_a_data_part_when_there_is_no_json_text():
    value = struct_pb2.Value()
    value.struct_value.update({"type": "ack", "success": True})
    message = Message(role=Role.ROLE_AGENT, message_id="m", parts=[Part(data=value)])
    assert message_payload(message) == {"type": "ack", "success": True}


def test_a_card_without_skills_still_lists_one():
    card = build_card("purple", "plays", "http://127.0.0.1:1/", streaming=False)
    assert [(skill.name, skill.description) for skill in card.skills] == [("purple", "plays")]


def test_card_advertises_the_url_the_protocol_and_streaming():
    card = build_card(
        "green", "evaluates", "http://10.0.0.5:9009/", [Skill("s", "S", "d", tags=("mcu",))], streaming=True
    )
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("http://10.0.0.5:9009/", "JSONRPC", "1.0"),
        ("http://10.0.0.5:9009/", "JSONRPC", "0.3"),  # the same route, so that 0.3 clients accept the card
    ]
    assert card.capabilities.streaming is True
    assert [skill.id for skill in card.skills] == ["s"]


def test_card_url_defaults_to_the_bound_address_and_honours_an_override():
    assert card_url_for("0.0.0.0", 9009, None) == "http://127.0.0.1:9009/"
    assert card_url_for("127.0.0.1", 9019, "http://host.docker.internal:9019") == "http://host.docker.internal:9019/"


def test_busy_port_is_a_clear_error_and_the_holder_keeps_it():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortBusy) as raised:
            bind_socket(HOST, port)
        assert f"{HOST}:{port}" in raised.value.render()
        assert raised.value.key == "--port"
        with socket.create_connection((HOST, port), timeout=5):
            pass  # the holder still accepts: nothing freed its port


def test_send_and_collect_returns_the_reply_text():
    async def scenario(url: str) -> list[str]:
        async with open_client(url, client_timeout_for_step(5)) as client:
            first = await send_and_collect(
                client, payload_to_message(InitPayload(prompt="p", text="t"), context_id="c"), 5
            )
            second = await send_and_collect(
                client, payload_to_message({"type": "obs", "step": 1, "obs": ""}, context_id="c"), 5
            )
            return [first, second]

    with running_app(echo_app()) as url:
        first, second = asyncio.run(scenario(url))
    assert json.loads(first.removeprefix("echo:")) == {"type": "init", "prompt": "p", "text": "t"}
    assert json.loads(second.removeprefix("echo:"))["step"] == 1


def test_send_and_collect_reads_a_task_reply():
    with running_app(echo_app(as_task=True)) as url:

        async def scenario() -> str:
            async with open_client(url, 10) as client:
                return await send_and_collect(client, payload_to_message(ActionPayload(), context_id="c"), 5)

        assert asyncio.run(scenario()).startswith("echo:{")


def test_slow_agent_is_an_agent_timeout_not_a_hang():
    with running_app(echo_app(delay_s=3.0)) as url:

        async def scenario() -> None:
            async with open_client(url, 10) as client:
                await send_and_collect(client, payload_to_message({"type": "obs"}, context_id="c"), 0.5)

        with pytest.raises(AgentTimeout):
            asyncio.run(scenario())


@pytest.mark.slow
def test_agent_slower_than_the_sdk_default_of_5_s_is_still_answered():
    with running_app(echo_app(delay_s=5.5)) as url:

        async def scenario() -> str:
            async with open_client(url, client_timeout_for_step(8)) as client:
                return await send_and_collect(client, payload_to_message({"type": "obs"}, context_id="c"), 8)

        assert asyncio.run(scenario()).startswith("echo:")


def test_nothing_listening_is_a_transport_error():
    port = free_port()

    async def scenario() -> None:
        async with open_client(f"http://{HOST}:{port}", 5):
            pass

    with pytest.raises(AgentTransportError) as raised:
        asyncio.run(scenario())
    assert str(port) in str(raised.value)


def test_running_app_helper_serves_a_built_app():
    with running_app(echo_app()) as url:

        async def scenario() -> str:
            import httpx

            async with httpx.AsyncClient(trust_env=False) as http:
                response = await http.get(url + "/.well-known/agent-card.json")
                return response.json()["name"]

        assert asyncio.run(scenario()) == "echo"


def malformed_agent(body: object, status: int = 200):
    """A card that looks right in front of a JSON-RPC route that answers `body` (with HTTP `status`)."""
    from a2a.server.routes import create_agent_card_routes
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def answer(request):
        return JSONResponse(body, status_code=status)

    return lambda url: Starlette(
        routes=create_agent_card_routes(build_card("bad", "bad", url, streaming=False))
        + [Route("/", answer, methods=["POST"])],
    )


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"jsonrpc": "2.0", "id": "1", "result": {"message": {"parts": "not a list"}}}, 200),
        ({"jsonrpc": "2.0", "id": "1", "error": {"code": -32603, "message": "boom"}}, 200),
        (["not", "an", "object"], 200),
        ({"detail": "server error"}, 500),
    ],
    ids=["unparseable-result", "jsonrpc-error", "not-an-object", "http-500"],
)
def test_malformed_answers_are_transport_errors(body, status):
    with running_app(malformed_agent(body, status)) as url:

        async def scenario() -> None:
            async with open_client(url, 10) as client:
                await send_and_collect(client, payload_to_message({"type": "obs"}, context_id="c"), 5)

        with pytest.raises(AgentTransportError):
            asyncio.run(scenario())


def test_the_card_is_negotiated_by_protocol_version_and_cached_by_etag():
    """A 1.0 caller (A2A-Version: 1.0, as every a2a-sdk 1.x client sends) gets the strict 1.0 card: parsed against the
    protocol's own 1.0 definition (a2a.proto's AgentCard) with unknown fields refused, it passes, where today's
    compatible card fails on its 0.3 fields. A 0.3 caller (no header) still gets those fields. Both carry an ETag and
    Cache-Control, and a matching If-None-Match is a 304 with no body."""
    import httpx
    from a2a.types import AgentCard
    from google.protobuf import json_format

    with running_app(echo_app()) as url:
        with httpx.Client(trust_env=False, timeout=5) as http:
            strict = http.get(url + "/.well-known/agent-card.json", headers={"A2A-Version": "1.0"})
            compatible = http.get(url + "/.well-known/agent-card.json")
            again = http.get(
                url + "/.well-known/agent-card.json",
                headers={"If-None-Match": strict.headers["etag"], "A2A-Version": "1.0"},
            )
            stale = http.get(url + "/.well-known/agent-card.json", headers={"If-None-Match": '"other"'})
    json_format.ParseDict(strict.json(), AgentCard(), ignore_unknown_fields=False)
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict(compatible.json(), AgentCard(), ignore_unknown_fields=False)
    assert "url" not in strict.json() and compatible.json()["protocolVersion"].startswith("0.3")
    assert strict.json()["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    for response in (strict, compatible):
        assert response.headers["cache-control"] == "no-cache" and response.headers["etag"].startswith('"')
    assert strict.headers["etag"] != compatible.headers["etag"]
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == strict.headers["etag"]
    assert stale.status_code == 200 and stale.json() == compatible.json()


SLOW_ROUTE_SERVER = """
import socket
import sys
from pathlib import Path
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from mcu_arms.a2a_transport import serve_app

port, entered = int(sys.argv[1]), Path(sys.argv[2])

def listening():
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return False
    return True

async def slow(request):
    # Answers only once the server has begun to shut down (its listener closed): the request is in flight then.
    import asyncio
    entered.touch()
    while listening():
        await asyncio.sleep(0.01)
    return PlainTextResponse("answered")

async def card(request):
    return PlainTextResponse("{}")

async def closed():
    print("on_shutdown ran", flush=True)

serve_app(Starlette(routes=[Route("/slow", slow), Route("/.well-known/agent-card.json", card)]), "127.0.0.1", port,
          on_shutdown=closed)
"""


def test_a_stop_signal_still_lets_an_open_request_finish(tmp_path):
    """Servers stop as soon as they are told, but a request in flight when SIGTERM comes is still answered whole
    (uvicorn's graceful shutdown), and on_shutdown runs after it."""
    import signal
    import sys
    import threading

    import httpx
    from server_procs import ServerProcess, wait_until

    port = free_port()
    entered = tmp_path / "entered"
    server = ServerProcess(
        [],
        tmp_path / "server.log",
        port,
        command=[sys.executable, "-c", SLOW_ROUTE_SERVER, str(port), str(entered)],
    )
    answers: list[httpx.Response] = []
    try:
        server.wait_ready()
        asking = threading.Thread(
            target=lambda: answers.append(httpx.get(f"{server.url}/slow", timeout=30, trust_env=False))
        )
        asking.start()
        wait_until(entered.exists, 30, "the request to reach the route")
        server.process.send_signal(signal.SIGTERM)
        asking.join(timeout=30)
    finally:
        code = server.stop()
    assert [(answer.status_code, answer.text) for answer in answers] == [(200, "answered")]
    assert code == 0
    assert "on_shutdown ran" in server.log()
