"""A hostile purple cannot blow up the record or reach the terminal: 60,000 invented keys per step, terminal escapes
in its key names, reasons and messages, `chat` beside its action. Real `serve green` and `mcu-arms evaluate`
processes; the purple runs in the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from a2a.helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from purples import NOOP, ScriptedPurple, build_test_purple
from server_procs import HOST, ServerProcess, free_port, running_app

from mcu_arms.a2a_client import message_payload
from mcu_arms.contracts.evaluation import COUNTS_KEPT, OTHER_CAUSES, TaskMetrics

pytestmark = pytest.mark.slow

KEYS_PER_STEP = 60_000
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\u202e"


class HostilePurple(AgentExecutor):
    """Refuses init with a huge escape-laden message; then answers each step with a new set of 60,000 keys."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        payload = message_payload(context.message) or {}
        if payload.get("type") == "init":
            reply = {"type": "ack", "success": False, "message": ESCAPES + "m" * 200_000}
        else:
            step = payload.get("step", 0)
            action = {f"s{step}k{index}": 1 for index in range(KEYS_PER_STEP)} | {"forward": 1, ESCAPES: 1}
            reply = {
                "type": "action",
                "action_type": "env",
                "action": action,
                "chat": "/op me",
                "commands": ["/give @s diamond"],
                "reason": ESCAPES + "r" * 20_000,
            }
        await event_queue.enqueue_event(new_text_message(json.dumps(reply), context_id=context.context_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing to cancel."""


SCENARIO = """[green_agent]
endpoint = "{green}"

[[participants]]
role = "agent"
endpoint = "{purple}"

[config]
task_category = "crafting"
tasks = ["craft_the_crafting_table"]
simulator = "embedded"
max_steps = {steps}
step_timeout = 20.0
save_frames = false
output_dir = "{output}"
"""


def test_the_record_stays_small_and_no_escape_reaches_a_log_or_the_terminal(tmp_path: Path):
    port = free_port()
    green = ServerProcess(
        ["serve", "green", "--host", HOST, "--port", str(port), "--output-root", str(tmp_path)],
        tmp_path / "green.log",
        port,
    )
    sizes: dict[int, int] = {}
    try:
        green.wait_ready()
        with running_app(lambda url: build_test_purple(HostilePurple(), url)) as purple_url:
            for steps in (4, 16):
                output = tmp_path / f"steps_{steps}"
                scenario = tmp_path / f"scenario_{steps}.toml"
                scenario.write_text(SCENARIO.format(green=green.url, purple=purple_url, steps=steps, output=output))
                client = subprocess.run(
                    [sys.executable, "-m", "mcu_arms", "evaluate", str(scenario)],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert client.returncode == 0, client.stdout[-3000:] + client.stderr[-3000:]
                for stream in (client.stdout, client.stderr):
                    assert "\x1b" not in stream and "\u202e" not in stream
                    assert max((len(line) for line in stream.splitlines()), default=0) < 12_000
                assert "\\x1b]0;pwned" in client.stdout  # shown, as a visible escape
                evaluation = output / "evaluation.json"
                sizes[steps] = evaluation.stat().st_size
                metrics = TaskMetrics.model_validate(
                    json.loads(evaluation.read_text())["results"][0]["task_metrics"]["craft_the_crafting_table"]
                )
                assert metrics.steps_run == steps and metrics.noop_total == 0
                assert len(metrics.dropped_keys) <= COUNTS_KEPT + 1 and OTHER_CAUSES in metrics.dropped_keys
                assert sum(metrics.dropped_keys.values()) == steps * (KEYS_PER_STEP + 3)  # + escape key, chat, commands
                assert metrics.dropped_keys["chat"] == steps and metrics.dropped_keys["commands"] == steps
                assert len(metrics.init.message) < 3000 and "\x1b" not in metrics.init.message
                assert all(
                    "\x1b" not in reason and len(reason) < 700 for reason in metrics.agent_reported_noops.first_reasons
                )
                for line in (output / "craft_the_crafting_table" / "steps.jsonl").read_text().splitlines():
                    record = json.loads(line)
                    assert len(line) < 12_000 and len(record["dropped_keys"]) == 16
                    assert record["dropped_unnamed"] == KEYS_PER_STEP + 3 - 16
        rss = psutil.Process(green.process.pid).memory_info().rss
    finally:
        green.stop()
    assert sizes[16] - sizes[4] < 4_000, sizes  # the record does not grow with what the purple invents
    assert rss < 600 * 1024 * 1024, f"green RSS {rss / 1e6:.0f} MB"
    log = green.log()
    assert "\x1b" not in log and "\u202e" not in log
    assert max(len(line) for line in log.splitlines()) < 12_000


def test_a_result_keeps_the_top_counts_and_the_total():
    metrics = {"dropped_keys": {f"k{index}": index % 7 + 1 for index in range(5000)}}
    total = sum(metrics["dropped_keys"].values())
    bounded = TaskMetrics.model_validate(
        {
            "max_score": 1,
            "sim_score": 0,
            "score": 0,
            "category": "crafting",
            "scoring_kind": "milestones",
            "scored": True,
            "score_source": "milestones",
            "video": {"status": "skipped"},
            **metrics,
        }
    )
    assert len(bounded.dropped_keys) == COUNTS_KEPT + 1 and sum(bounded.dropped_keys.values()) == total
    assert all(count == 7 for key, count in bounded.dropped_keys.items() if key != OTHER_CAUSES)


MB = 1024 * 1024
# Step 0 is answered with a 100 MB JSON-RPC answer that says how long it is; step 1 with 1 GB sent in chunks, with no
# length given, so that only reading it incrementally can stop it.
DECLARED_ANSWER_BYTES = 100 * MB
STREAMED_ANSWER_BYTES = 1024 * MB
PEAK_RSS_ALLOWED = 300 * MB


class Inflating:
    """ASGI middleware in front of a real test purple: init is passed through (acked); each observation is answered
    with a huge body instead, one per step in turn."""

    def __init__(self, app) -> None:  # an ASGI app
        self.app = app
        self.answered = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if _is_init(body):
            replayed = [{"type": "http.request", "body": body, "more_body": False}]
            await self.app(scope, lambda: _next(replayed, receive), send)
            return
        declared = self.answered == 0
        self.answered += 1
        head = b'{"jsonrpc": "2.0", "id": 1, "result": {"message": {"role": "ROLE_AGENT", "parts": [{"text": "'
        if declared:
            size = DECLARED_ANSWER_BYTES
            headers = [(b"content-type", b"application/json"), (b"content-length", str(size).encode())]
        else:
            size = STREAMED_ANSWER_BYTES
            headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        chunk = b"x" * MB
        sent = len(head)
        await send({"type": "http.response.body", "body": head, "more_body": True})
        while sent + len(chunk) < size:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            sent += len(chunk)
        await send({"type": "http.response.body", "body": b"x" * (size - sent), "more_body": False})


def _is_init(body: bytes) -> bool:
    text = json.loads(body)["params"]["message"]["parts"][0]["text"]
    return json.loads(text).get("type") == "init"


async def _next(replayed: list, receive):
    return replayed.pop(0) if replayed else await receive()


def _peak_rss(pid: int) -> int:
    """The process's peak resident set so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_a_purple_that_answers_a_gigabyte_costs_the_green_no_more_than_the_cap(tmp_path: Path):
    """100 MB declared and 1 GB streamed: each abandoned at the cap, counted as response_too_large, the connection
    closed; the green's peak RSS stays under 300 MB."""
    port = free_port()
    green = ServerProcess(
        ["serve", "green", "--host", HOST, "--port", str(port), "--output-root", str(tmp_path)],
        tmp_path / "green.log",
        port,
    )
    inflating: list[Inflating] = []

    def make(url: str) -> Inflating:
        inflating.append(Inflating(build_test_purple(ScriptedPurple([NOOP]), url)))
        return inflating[0]

    try:
        green.wait_ready()
        with running_app(make) as purple_url:
            output = tmp_path / "out"
            scenario = tmp_path / "scenario.toml"
            scenario.write_text(SCENARIO.format(green=green.url, purple=purple_url, steps=3, output=output))
            client = subprocess.run(
                [sys.executable, "-m", "mcu_arms", "evaluate", str(scenario)],
                capture_output=True,
                text=True,
                timeout=600,
            )
        peak = _peak_rss(green.process.pid)
    finally:
        green.stop()
    assert client.returncode == 0, client.stdout[-3000:] + client.stderr[-3000:]
    metrics = TaskMetrics.model_validate(
        json.loads((output / "evaluation.json").read_text())["results"][0]["task_metrics"]["craft_the_crafting_table"]
    )
    assert metrics.init.ok and metrics.steps_run == 3
    assert metrics.noops["response_too_large"].count == 3, metrics.noops
    assert "cap" in metrics.noops["response_too_large"].first_reasons[0]
    assert metrics.infrastructure_noops == 3
    print(f"green peak RSS {peak / MB:.0f} MB")
    assert peak < PEAK_RSS_ALLOWED, f"green peak RSS {peak / MB:.0f} MB"
