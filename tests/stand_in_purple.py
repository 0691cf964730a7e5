"""A scripted purple agent as its own process, for supervisor tests that need a purple misbehaving on purpose.

    python tests/stand_in_purple.py --port PORT [--refuse-init] [--nest-step N]

--refuse-init answers the init with success false; --nest-step N answers observation N with a JSON-RPC response
nested 200,000 lists deep (a reply that makes a JSON parser raise RecursionError). Every other observation gets a
noop. Stops on SIGTERM like the real servers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from purples import NOOP, ScriptedPurple, build_test_purple

from mcu_arms.a2a_transport import serve_app

NESTING = 200_000


class NestedReplyAt:
    """ASGI wrapper: the JSON-RPC call carrying observation `step` gets a body nested NESTING lists deep."""

    def __init__(self, app, step: int) -> None:
        self.app = app
        self.marker = f'\\"step\\":{step},'.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if self.marker not in body:
            replayed = False

            async def replay():
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        request_id = json.loads(body).get("id")
        nested = b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": '
        nested += b"[" * NESTING + b"]" * NESTING + b"}"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": nested})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--refuse-init", action="store_true")
    parser.add_argument("--nest-step", type=int)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    app = build_test_purple(ScriptedPurple([NOOP], refuse_init=args.refuse_init), url)
    if args.nest_step is not None:
        app = NestedReplyAt(app, args.nest_step)
    print(f"stand-in purple on {url}", flush=True)
    serve_app(app, "127.0.0.1", args.port)


if __name__ == "__main__":
    main()
