"""An arm's servers answer only to the arm: real `serve green` / `serve purple` processes with their tokens, and a
third process (this test) without them. Also: output_dir confined to the green's output root, a result that
appeared meanwhile left as found, one evaluation per output_dir, the request size cap, open servers on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from run_helpers import wait_for
from server_procs import HOST, ServerProcess, free_port

from mcu_arms.contracts.access import CALL_TOKEN_ENV, SERVE_TOKEN_ENV

pytestmark = pytest.mark.slow

GREEN_TOKEN = "green-" + uuid.uuid4().hex
PURPLE_TOKEN = "purple-" + uuid.uuid4().hex
JSONRPC_CALLS = [
    ("SendMessage", {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "{}"}]}}),
    ("GetTask", {"id": "any"}),
    ("ListTasks", {}),
    ("CancelTask", {"id": "any"}),
]
LEGACY_CALLS = [
    ("message/send", {"message": {"messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "{}"}]}}),
    ("tasks/get", {"id": "any"}),
    ("tasks/cancel", {"id": "any"}),
]


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A green and a purple as `mcu-arms run` starts them: each requires its token; the green calls with the
    purple's."""
    base = tmp_path_factory.mktemp("access")
    root = base / "episode"
    root.mkdir()
    purple_port, green_port = free_port(), free_port()
    purple = ServerProcess(
        ["serve", "purple", "--agent", "random", "--host", HOST, "--port", str(purple_port)],
        base / "purple.log",
        purple_port,
        env={SERVE_TOKEN_ENV: PURPLE_TOKEN},
    )
    green = ServerProcess(
        ["serve", "green", "--host", HOST, "--port", str(green_port), "--output-root", str(root)],
        base / "green.log",
        green_port,
        env={SERVE_TOKEN_ENV: GREEN_TOKEN, CALL_TOKEN_ENV: PURPLE_TOKEN},
    )
    try:
        purple.wait_ready()
        green.wait_ready()
        yield {"green": green, "purple": purple, "root": root, "base": base}
    finally:
        green.stop()
        purple.stop()


def rpc(
    url: str, method: str, params: dict[str, Any], token: str | None = None, legacy: bool = False
) -> httpx.Response:
    headers = {} if legacy else {"A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers=headers, timeout=30, trust_env=False)


def request_for(purple_url: str, output_dir: str | Path, **config: Any) -> dict[str, Any]:
    return {
        "participants": {"agent": purple_url},
        "config": {
            "simulator": "embedded",
            "task_category": "crafting",
            "tasks": ["craft_the_crafting_table"],
            "output_dir": str(output_dir),
            "step_timeout": 5.0,
            "save_frames": False,
            **config,
        },
    }


async def _stream(green_url: str, request: dict[str, Any], token: str | None, on_status=None) -> tuple[str, list[str]]:
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    from mcu_arms.a2a_client import open_client

    message = Message(role=Role.ROLE_USER, parts=[Part(text=json.dumps(request))], message_id=uuid.uuid4().hex)
    texts: list[str] = []
    state = ""
    async with open_client(green_url, None, streaming=True, token=token) as client:
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.WhichOneof("payload") == "status_update":
                update = event.status_update
                state = TaskState.Name(update.status.state).removeprefix("TASK_STATE_").lower()
                text = "".join(part.text for part in update.status.message.parts)
                texts.append(text)
                if on_status is not None:
                    await on_status(update.task_id, text)
    return state, texts


def evaluate(green_url: str, request: dict[str, Any], token: str | None = GREEN_TOKEN, on_status=None):
    return asyncio.run(asyncio.wait_for(_stream(green_url, request, token, on_status), timeout=180))


def test_the_card_is_public_and_advertises_the_bearer_scheme(arm):
    for role in ("green", "purple"):
        card = httpx.get(arm[role].url + "/.well-known/agent-card.json", timeout=10, trust_env=False)
        assert card.status_code == 200
        data = card.json()
        assert data["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        assert data["securityRequirements"] == [{"schemes": {"bearer": {}}}]


@pytest.mark.parametrize("role", ["green", "purple"])
def test_a_process_without_the_token_can_neither_send_nor_get_list_or_cancel(arm, role):
    url = arm[role].url
    for token in (None, "wrong-" + uuid.uuid4().hex, GREEN_TOKEN if role == "purple" else PURPLE_TOKEN):
        for method, params in JSONRPC_CALLS:
            answer = rpc(url, method, params, token)
            assert answer.status_code == 401, (role, method, token, answer.text)
            assert answer.headers["www-authenticate"].startswith("Bearer")
        for method, params in LEGACY_CALLS:
            assert rpc(url, method, params, token, legacy=True).status_code == 401, (role, method)
    wait_for(lambda: "refused POST / from 127.0.0.1" in arm[role].log(), f"the {role} to log the refusals", timeout=10)


def test_the_arm_evaluates_with_its_tokens_and_outsiders_cannot_cancel_it(arm):
    """The client's token reaches the green; the green's call token reaches the purple (a secured purple answers
    it); an outsider's cancel and get are refused mid-evaluation and the evaluation runs on."""
    output = arm["root"] / "guarded"
    refused: list[int] = []

    async def outsider(task_id: str, text: str) -> None:
        if text.startswith("Running task") and not refused:
            for method in ("CancelTask", "GetTask"):
                answer = await asyncio.to_thread(rpc, arm["green"].url, method, {"id": task_id})
                refused.append(answer.status_code)

    state, texts = evaluate(arm["green"].url, request_for(arm["purple"].url, output, max_steps=15), on_status=outsider)
    assert refused == [401, 401]
    assert state == "completed", texts
    result = json.loads((output / "evaluation.json").read_text())
    metrics = result["results"][0]["task_metrics"]["craft_the_crafting_table"]
    assert metrics["steps_run"] == 15 and metrics["noop_total"] == 0  # every step reached the secured purple
    assert metrics["init"]["ok"] is True


def test_the_arms_own_caller_can_cancel(arm):
    output = arm["root"] / "cancelled"
    done: list[int] = []

    async def owner(task_id: str, text: str) -> None:
        if text.startswith("Running task") and not done:
            answer = await asyncio.to_thread(rpc, arm["green"].url, "CancelTask", {"id": task_id}, GREEN_TOKEN)
            done.append(answer.status_code)

    state, texts = evaluate(arm["green"].url, request_for(arm["purple"].url, output, max_steps=5000), on_status=owner)
    assert done == [200] and state == "canceled"
    assert "tasks/cancel request from a caller holding this arm's token" in texts[-1]


@pytest.mark.parametrize(
    ("output_dir", "said"),
    [
        ("/etc/mcu-arms-injected", "outside this green's output root"),
        ("../escaped", "contains '..'"),
        ("{root}/../sibling", "contains '..'"),
        ("{root}/linked/inside", "outside this green's output root"),
    ],
)
def test_an_output_dir_outside_the_root_is_refused_and_nothing_is_created(arm, output_dir, said):
    outside = arm["base"] / "outside"
    outside.mkdir(exist_ok=True)
    link = arm["root"] / "linked"
    if not link.is_symlink():
        link.symlink_to(outside)
    before = sorted(os.listdir(arm["base"]))
    state, texts = evaluate(arm["green"].url, request_for(arm["purple"].url, output_dir.format(root=arm["root"])))
    assert state == "rejected" and said in texts[-1], texts
    assert sorted(os.listdir(arm["base"])) == before and list(outside.iterdir()) == []
    assert not Path("/etc/mcu-arms-injected").exists()


def test_a_result_that_appeared_meanwhile_is_not_replaced(arm):
    output = arm["root"] / "planted"
    planted = b'{"planted": "by someone else"}\n'

    async def plant(task_id: str, text: str) -> None:
        if text.startswith("Running task") and not (output / "evaluation.json").exists():
            (output / "evaluation.json").write_bytes(planted)

    state, texts = evaluate(arm["green"].url, request_for(arm["purple"].url, output, max_steps=10), on_status=plant)
    assert state == "failed" and "appeared while this evaluation ran and was left as found" in texts[-1], texts
    assert (output / "evaluation.json").read_bytes() == planted
    (kept,) = output.glob("evaluation.*.json")
    assert json.loads(kept.read_text())["results"][0]["task_metrics"]["craft_the_crafting_table"]["steps_run"] == 10


def test_a_second_evaluation_into_a_running_ones_output_dir_is_refused(arm):
    output = arm["root"] / "busy"
    second: list[tuple[str, list[str]]] = []

    async def intrude(task_id: str, text: str) -> None:
        if text.startswith("Running task") and not second:
            second.append(await _stream(arm["green"].url, request_for(arm["purple"].url, output), GREEN_TOKEN))
            answer = await asyncio.to_thread(rpc, arm["green"].url, "CancelTask", {"id": task_id}, GREEN_TOKEN)
            assert answer.status_code == 200

    evaluate(arm["green"].url, request_for(arm["purple"].url, output, max_steps=5000), on_status=intrude)
    ((state, texts),) = second
    assert state == "rejected" and "is being written by a running evaluation" in texts[-1]


def test_the_request_size_cap_stops_a_huge_body_unread(arm):
    green = psutil.Process(arm["green"].process.pid)
    before = green.memory_info().rss
    declared = httpx.post(
        arm["green"].url + "/",
        content=b"x" * (100 * 1024 * 1024),
        headers={"Authorization": f"Bearer {GREEN_TOKEN}"},
        timeout=60,
        trust_env=False,
    )
    assert declared.status_code == 413

    def chunks():
        for _ in range(100):
            yield b"x" * (1024 * 1024)

    try:
        streamed = httpx.post(
            arm["green"].url + "/",
            content=chunks(),
            timeout=60,
            trust_env=False,
            headers={"Authorization": f"Bearer {GREEN_TOKEN}", "A2A-Version": "1.0"},
        )
        assert streamed.status_code in (200, 413) and "too large" in streamed.text.lower()
    except httpx.HTTPError:
        pass  # the server may close the connection as soon as it has answered
    assert green.memory_info().rss - before < 100 * 1024 * 1024
    assert arm["green"].process.poll() is None


def test_an_open_server_stays_on_loopback_and_says_so(tmp_path: Path):
    port = free_port()
    refused = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "serve", "green", "--host", "0.0.0.0", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_without_tokens(),
    )
    assert refused.returncode == 2 and "not a loopback address" in refused.stderr and "--expose" in refused.stderr
    for bad in ("", "localhost"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mcu_arms",
                "serve",
                "purple",
                "--agent",
                "noop",
                "--host",
                bad,
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=_without_tokens(),
        )
        assert done.returncode == 2 and "flag '--host'" in done.stderr and "Traceback" not in done.stderr
    server = ServerProcess(
        ["serve", "green", "--host", "::1", "--port", str(port), "--output-root", str(tmp_path)],
        tmp_path / "green.log",
        port,
        host="::1",
        env=_without_tokens(),
    )
    try:
        server.wait_ready()
        assert "access: open, no token configured (loopback only" in server.log()
        assert rpc(server.url, "ListTasks", {}).status_code == 200
    finally:
        server.stop()


def _without_tokens() -> dict[str, str]:
    return {SERVE_TOKEN_ENV: "", CALL_TOKEN_ENV: ""}
