"""A scripted stand-in for the OpenAI Responses API, enough to drive the REAL codex CLI (codex-cli 0.171) on loopback.

Stdlib only, served from a thread of the test process. It answers `POST <base>/responses` (`"stream": true`) with
the SSE codex reads (codex-rs/codex-api/src/sse/responses.rs, every step checked against the binary):

    response.created            {"type", "response": {"id", ...}}            codex needs the response object
    response.output_item.added  {"type", "output_index", "item"}             per output item
    response.output_text.delta  {"type", "item_id", "output_index", "content_index", "delta"}   messages only
    response.output_item.done   {"type", "output_index", "item"}             what codex keeps
    response.completed          {"type", "response": {"id", "output", "usage"}}

`usage` must carry input_tokens, output_tokens and total_tokens; codex compares total_tokens with its compaction
limit. Every request is recorded: method, path, headers, body size, the JSON body, and from codex's
`x-codex-turn-metadata` header (JSON) its request_kind ("turn" | "compaction") and history_initialization.

A script is a list of steps, each answering the next request(s) of a kind ("user": the last input item is a user
message; "tool_output": a tool's output; "compaction"; "any"):

    {"when": "user", "write_file": {"path": "actions.json", "content": [...]}, "usage": {...}, "repeat": 2}
    {"when": "tool_output", "text": "Done.", "usage": {"total_tokens": 50000}}
    {"status": 400, "body": {...}}                   fail with this HTTP status (codex does not retry a 400)
    {"failed": {"code": "context_length_exceeded", "message": "..."}}    stream response.failed

`write_file` answers with an `exec_command` function call whose command writes the file in the turn's directory
(codex runs it and sends its output back: the "tool_output" request). Unmatched requests get a message "Done.";
compaction requests get a summary.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TEXT = "Done."
COMPACTION_SUMMARY = "Summary so far: the agent planned its actions and wrote actions.json."


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def turn_metadata(headers: dict[str, str]) -> dict[str, Any]:
    """codex-cli 0.171 puts request_kind, history_initialization, turn_id ... in this header's JSON."""
    try:
        metadata = json.loads(headers.get("x-codex-turn-metadata") or "{}")
    except json.JSONDecodeError:
        return {}
    return metadata if isinstance(metadata, dict) else {}


def request_class(metadata: dict[str, Any], body: Any) -> str:
    if metadata.get("request_kind") == "compaction":
        return "compaction"
    items = body.get("input") if isinstance(body, dict) else None
    last = items[-1] if isinstance(items, list) and items else {}
    if isinstance(last, dict) and last.get("type") in ("function_call_output", "custom_tool_call_output"):
        return "tool_output"
    return "user"


def usage_block(spec: dict[str, int] | None) -> dict[str, Any]:
    spec = spec or {}
    input_tokens = int(spec.get("input_tokens", 100))
    output_tokens = int(spec.get("output_tokens", 10))
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": int(spec.get("cached_tokens", 0))},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(spec.get("total_tokens", input_tokens + output_tokens)),
    }


def output_items(step: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if "write_file" in step:
        spec = step["write_file"]
        content = spec["content"] if isinstance(spec["content"], str) else json.dumps(spec["content"])
        command = f"printf %s {shlex.quote(content)} > {shlex.quote(spec.get('path', 'actions.json'))}"
        items.append(
            {
                "type": "function_call",
                "id": _id("fc"),
                "status": "completed",
                "name": "exec_command",
                "call_id": _id("call"),
                "arguments": json.dumps({"cmd": command}),
            }
        )
    text = step.get("text", DEFAULT_TEXT if not items and "failed" not in step else None)
    if text is not None:
        items.append(
            {
                "type": "message",
                "id": _id("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    return items


class MockResponses:
    """`with MockResponses(steps) as mock:` serves on 127.0.0.1; `.url` is the provider base_url codex wants."""

    def __init__(self, steps: list[dict[str, Any]] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self._steps: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.set_script(steps or [])
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                mock._handle(self)

            do_GET = do_POST

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def set_script(self, steps: list[dict[str, Any]]) -> None:
        """New behaviour from the next request on."""
        with self._lock:
            self._steps = [{**step, "_left": int(step.get("repeat", 1))} for step in steps]

    def responses(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["path"].split("?")[0].endswith("/responses")]

    def _pick(self, kind: str) -> dict[str, Any]:
        with self._lock:
            for step in self._steps:
                when = step.get("when", "any")
                if step["_left"] > 0 and (when == kind or (when == "any" and kind != "compaction")):
                    step["_left"] -= 1
                    return step
        return {"text": COMPACTION_SUMMARY} if kind == "compaction" else {"text": DEFAULT_TEXT}

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        headers = {key.lower(): value for key, value in handler.headers.items()}
        metadata = turn_metadata(headers)
        kind = request_class(metadata, body)
        with self._lock:
            self.requests.append(
                {
                    "path": handler.path,
                    "headers": headers,
                    "body_bytes": len(raw),
                    "json": body,
                    "kind": kind,
                    "request_kind": metadata.get("request_kind"),
                    "turn_id": metadata.get("turn_id"),
                    "history_initialization": metadata.get("history_initialization"),
                    "thread_id": headers.get("thread-id"),
                }
            )
        if handler.command != "POST" or not handler.path.split("?")[0].endswith("/responses"):
            self._send_json(handler, 404, {"error": {"message": f"mock: no route {handler.command} {handler.path}"}})
            return
        step = self._pick(kind)
        if "status" in step:
            self._send_json(handler, int(step["status"]), step.get("body", {"error": {"message": "mock failure"}}))
            return
        self._stream(handler, step, body if isinstance(body, dict) else {})

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _stream(handler: BaseHTTPRequestHandler, step: dict[str, Any], body: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def event(payload: dict[str, Any]) -> None:
            chunk = f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.flush()

        base = {
            "id": _id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model", "mock-model"),
        }
        event({"type": "response.created", "response": {**base, "status": "in_progress", "output": []}})
        items = output_items(step)
        for index, item in enumerate(items):
            event({"type": "response.output_item.added", "output_index": index, "item": item})
            if item["type"] == "message":
                event(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": item["content"][0]["text"],
                    }
                )
            event({"type": "response.output_item.done", "output_index": index, "item": item})
        if "failed" in step:
            event({"type": "response.failed", "response": {**base, "status": "failed", "error": step["failed"]}})
        else:
            event(
                {
                    "type": "response.completed",
                    "response": {
                        **base,
                        "status": "completed",
                        "output": items,
                        "usage": usage_block(step.get("usage")),
                    },
                }
            )
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    def __enter__(self) -> MockResponses:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self._server.server_close()
