"""A stand-in for the OpenAI-compatible model service video evaluation calls (no model can be reached here)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


class FakeModelService(BaseHTTPRequestHandler):
    """A stand-in for the model service (which cannot run here): answers one chat completion with scores."""

    requests: list[dict] = []
    answer: str = ""

    def do_POST(self) -> None:  # http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        payload = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": type(self).answer}}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return
