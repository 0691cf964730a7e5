"""Stand-ins for the planned agent's model services (no model can be reached here), served on loopback by the tests.

They speak the real interfaces: an OpenAI-compatible chat endpoint (`GET /v1/models`, `POST /v1/chat/completions`)
for the planner or a chat policy, and a Kev-style decision service (`GET /v1/models`, `POST /v1/systemone`). Their
answers are scripted, including the bad ones: unparseable and invalid plans, unknown items, re-plans that change the
accepted steps or arrive late, decisions whose probabilities do not sum, choices that are not candidates, and
answers that come after the agent's timeout.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PLANNER_MODEL = "stub-planner"
POLICY_MODEL = "stub/kev-4b"
POLICY_REVISION = "0123abcd"
RELEASE_DEADLINE_S = 90.0

# A plan the embedded simulator can carry out: wood, a table, a wooden pickaxe, then stone.
GOOD_PLAN = {
    "goal": "a wooden pickaxe, then stone",
    "steps": [
        {"subgoal": "gather wood", "method": "collect", "item": "oak_log", "count": 4},
        {"subgoal": "put down a crafting table", "method": "place", "item": "crafting_table", "count": 1},
        {"subgoal": "make a wooden pickaxe", "method": "craft", "item": "wooden_pickaxe", "count": 1},
        {"subgoal": "mine stone", "method": "collect", "item": "stone", "count": 2},
    ],
}
UNKNOWN_ITEM_PLAN = {
    "goal": "a hoe",
    "steps": [{"subgoal": "make a hoe", "method": "craft", "item": "diamond_hoe", "count": 1}],
}


def reworded(plan: dict[str, Any], contract: list[dict[str, Any]], *, change_count: bool = False) -> dict[str, Any]:
    """The accepted steps with new wording (and, to be rejected, one count changed)."""
    steps = [{**step, "subgoal": f"now: {step['subgoal']}"} for step in contract]
    if change_count:
        steps[-1] = {**steps[-1], "count": steps[-1]["count"] + 1}
    return {"goal": plan["goal"], "steps": steps}


class _Handler(BaseHTTPRequestHandler):
    service: StubService

    def do_GET(self) -> None:  # http.server's naming
        self._reply(*self.service.get(self.path))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self._reply(*self.service.post(self.path, body))

    def _reply(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the agent gave up on a late answer: as a real server sees it
            pass

    def log_message(self, *args: object) -> None:
        return


class StubService:
    """One HTTP service in a thread; subclasses answer GET and POST."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def get(self, path: str) -> tuple[int, Any]:
        return 404, {"error": f"no {path}"}

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 404, {"error": f"no {path}"}

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        handler = type("Handler", (_Handler,), {"service": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class StubChatEndpoint(StubService):
    """An OpenAI-compatible endpoint serving one model name."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model

    def get(self, path: str) -> tuple[int, Any]:
        if path.rstrip("/").endswith("/models"):
            return 200, {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "stub"}],
            }
        return super().get(path)


class StubPlanner(StubChatEndpoint):
    """The planner: opening answers in order (then `next_plan`), and re-plans by `replan(index, contract)`.

    `hold_replan(index)` returns a callable that is true once re-plan `index` may be answered: until then its answer
    waits (a late re-plan), with a deadline so that a test never hangs.
    """

    def __init__(
        self,
        opening: list[str | dict[str, Any]],
        replan: Callable[[int, list[dict[str, Any]]], dict[str, Any]] | None = None,
        hold_replan: Callable[[int], Callable[[], bool] | None] | None = None,
        model: str = PLANNER_MODEL,
        next_plan: dict[str, Any] = GOOD_PLAN,
    ) -> None:
        super().__init__(model)
        self.opening = list(opening)
        self.next_plan = next_plan  # the answer once the plan is done (or the opening answers are used up)
        self.replan = replan or (lambda index, contract: reworded(GOOD_PLAN, contract))
        self.hold_replan = hold_replan or (lambda index: None)
        self.replans_answered: list[int] = []
        self.released_late: list[int] = []  # held re-plans answered once their condition held (not at the deadline)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        question = json.loads(body["messages"][1]["content"])
        context = question.get("context", {})
        with self.lock:
            self.requests.append(body)
            if "accepted_steps" in context:
                index = len(self.replans_answered)
                self.replans_answered.append(index)
                answer: str | dict[str, Any] = self.replan(index, context["accepted_steps"])
                release = self.hold_replan(index)
            else:
                answer = self.opening.pop(0) if self.opening and "completed_steps" not in context else self.next_plan
                release = None
        if release is not None:
            deadline = time.monotonic() + RELEASE_DEADLINE_S
            while not release() and time.monotonic() < deadline:
                time.sleep(0.02)
            if release():
                self.released_late.append(index)
        content = answer if isinstance(answer, str) else json.dumps(answer)
        return 200, _completion(self.model, content)


def choose_first(criteria: list[str], weight: float = 0.8) -> dict[str, Any]:
    """A valid decision: the first candidate, the rest sharing what is left."""
    rest = (1 - weight) / (len(criteria) - 1)
    return {"choice": criteria[0], "probabilities": {c: weight if i == 0 else rest for i, c in enumerate(criteria)}}


def home_first(criteria: list[str]) -> dict[str, Any]:
    """A valid decision that goes home whenever that is offered (else the first candidate)."""
    return choose_first(sorted(criteria, key=lambda c: c != "go_home"))


def bad_sum(criteria: list[str]) -> dict[str, Any]:
    return {"choice": criteria[0], "probabilities": {c: 0.9 for c in criteria}}


def not_a_candidate(criteria: list[str]) -> dict[str, Any]:
    return {"choice": "teleport_home", "probabilities": {c: 1 / len(criteria) for c in criteria}}


def missing_one(criteria: list[str]) -> dict[str, Any]:
    return {"choice": criteria[0], "probabilities": {criteria[0]: 1.0}}


LATE = "late"  # answer after the agent's timeout
INVALID_ANSWERS = (bad_sum, not_a_candidate, missing_one)


class StubDecisionService(StubService):
    """A Kev-style service: `script[i]` answers the i-th decision (a function of the candidate ids, or LATE); then
    `choose_first`. It counts what it gave: every invalid answer and every late one must show in the agent's report."""

    def __init__(
        self,
        script: list[Any],
        late_s: float,
        model: str = POLICY_MODEL,
        revision: str = POLICY_REVISION,
        then: Callable[[list[str]], dict[str, Any]] = choose_first,
    ) -> None:
        super().__init__()
        self.script = list(script)
        self.then = then
        self.late_s = late_s
        self.run = f"{model}@{revision}"
        self.invalid_given = 0
        self.late_given = 0

    def get(self, path: str) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, {"models": [{"run": self.run, "device": "cpu", "dtype": "bf16"}]}
        return super().get(path)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path != "/v1/systemone":
            return super().post(path, body)
        criteria = list(body["questions"]["action"]["criteria"])
        with self.lock:
            self.requests.append(body)
            answer = self.script.pop(0) if self.script else self.then
            if answer is LATE:
                self.late_given += 1
            elif answer in INVALID_ANSWERS:
                self.invalid_given += 1
        if answer is LATE:
            time.sleep(self.late_s)
            answer = choose_first
        return 200, {"answers": {"action": answer(criteria)}, "usage": {"input_tokens": 10}, "latency_ms": 1}


class StubChatPolicy(StubChatEndpoint):
    """An OpenAI-compatible chat model used as the policy: `script[i]` gives the i-th answer's text."""

    def __init__(self, script: list[Callable[[list[str]], str]], model: str = POLICY_MODEL) -> None:
        super().__init__(model)
        self.script = list(script)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        question = json.loads(body["messages"][1]["content"])
        criteria = list(question["allowed_actions"])
        with self.lock:
            self.requests.append(body)
            answer = self.script.pop(0) if self.script else (lambda ids: json.dumps(choose_first(ids)))
        return 200, _completion(self.model, answer(criteria))
