"""The A2A plumbing every server in the project shares (a2a-sdk 1.x): cards, the guarded app, listening sockets.

Only servers import this module, so it may import a2a, httpx and uvicorn at the top; light commands (plan, tasks,
compare) never reach it, and the evaluation client needs only the client side (a2a_client). Payloads travel as JSON
text in one text part: a2a-sdk 1.x data parts pass through `google.protobuf.Value`, which turns integers into floats,
and existing MCU purple agents send text too.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcu_arms import __version__
from mcu_arms.a2a_client import present_token
from mcu_arms.contracts.access import BEARER_SCHEME, CALL_TOKEN_ENV, SERVE_TOKEN_ENV
from mcu_arms.contracts.addresses import bind_address, http_url, is_loopback, parse_host, socket_family
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_MESSAGE_BYTES
from mcu_arms.contracts.wire import AGENT_CARD_PATH
from mcu_arms.process.procs import LISTEN_FD_ENV, log_line

PROTOCOL_VERSION = "1.0"
LEGACY_PROTOCOL_VERSION = "0.3"
# How long uvicorn lets open connections (a streaming evaluation) finish after SIGTERM before cancelling them.
GRACEFUL_SHUTDOWN_S = 5.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Refused requests are logged one by one up to this many, then every REFUSAL_LOG_EVERY-th, so that a flood of them
# cannot fill the log.
REFUSALS_LOGGED = 10
REFUSAL_LOG_EVERY = 100
# A port serves another arm's card after this server stops: callers keep the card but revalidate it (a 304 by ETag).
CARD_CACHE_CONTROL = "no-cache"


class PortBusy(UserError):
    """The address a server should listen on is already taken. We abort; we never free a port."""


@dataclass(frozen=True)
class Skill:
    """One skill advertised on an agent card (kept free of protobuf so that callers need not import a2a)."""

    id: str
    name: str
    description: str
    tags: Sequence[str] = field(default_factory=tuple)
    examples: Sequence[str] = field(default_factory=tuple)


def build_card(
    name: str,
    description: str,
    url: str,
    skills: Sequence[Skill] = (),
    *,
    streaming: bool,
    secured: bool = False,
    version: str = __version__,
) -> AgentCard:
    """An agent card with every field a 1.x client requires; `url` is where callers should reach the JSON-RPC route.

    The spec requires a skill; without one given, the agent itself is its one skill. The same route is also listed
    as a 0.3 interface: the SDK serves 0.3 fields (`url`, `protocolVersion`) on the
    card only when one is, and 0.3 clients refuse a card without them. 1.x clients pick the 1.0 interface.
    A `secured` agent advertises the bearer scheme it requires on every call but the card itself.
    """
    security: dict[str, Any] = {}
    if secured:
        scheme = HTTPAuthSecurityScheme(
            scheme="Bearer", description="the per-run token mcu-arms gives only to the arm's own processes"
        )
        security = {
            "security_schemes": {BEARER_SCHEME: SecurityScheme(http_auth_security_scheme=scheme)},
            "security_requirements": [SecurityRequirement(schemes={BEARER_SCHEME: StringList()})],
        }
    return AgentCard(
        name=name,
        description=description,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=LEGACY_PROTOCOL_VERSION),
        ],
        version=version,
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=skill.id,
                name=skill.name,
                description=skill.description,
                tags=list(skill.tags),
                examples=list(skill.examples),
            )
            for skill in skills or [Skill(id="default", name=name, description=description)]
        ],
        **security,
    )


def card_url_for(host: str, port: int, card_url: str | None) -> str:
    """The URL to advertise: the one given (e.g. reachable from a container), else the bound address."""
    if card_url:
        return card_url.rstrip("/") + "/"
    return http_url(host, port) + "/"


class _Guard:
    """ASGI middleware in front of every route: without the bearer token (when the server has one) only the agent
    card answers, 401 for the rest (`message/send`, `tasks/get`, `tasks/list`, `tasks/cancel`), each refusal
    logged; and no request body past the size cap is read."""

    def __init__(self, app: Any, *, token: str | None, max_request_bytes: int) -> None:
        self.app = app
        self.token = token
        self.max_request_bytes = max_request_bytes
        self.refused = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        card = scope["method"] in ("GET", "HEAD") and scope["path"] == AGENT_CARD_PATH
        if self.token is not None and not card and not self._authorised(headers.get("authorization", "")):
            self._log_refusal(scope)
            await _reply(
                send,
                401,
                "this agent answers only to its arm: a bearer token is required",
                [(b"www-authenticate", b'Bearer realm="mcu-arms"')],
            )
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_request_bytes:
            await _reply(send, 413, f"request body of {declared} bytes exceeds {self.max_request_bytes}")
            return
        await self.app(scope, self._capped(receive), send)

    def _authorised(self, header: str) -> bool:
        scheme, _, presented = header.partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), self.token.encode())

    def _log_refusal(self, scope: dict[str, Any]) -> None:
        self.refused += 1
        if self.refused <= REFUSALS_LOGGED or self.refused % REFUSAL_LOG_EVERY == 0:
            peer = ":".join(str(part) for part in scope.get("client") or ("unknown",))
            log_line(
                f"refused {scope['method']} {scope['path']} from {peer}: no valid bearer token "
                f"({self.refused} refused so far)"
            )

    def _capped(self, receive: Any) -> Any:
        """`receive` that stops a body (sent without a length, or longer than it said) at the cap."""
        seen = 0

        async def capped() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_request_bytes:
                    raise HTTPException(413, f"request body exceeds {self.max_request_bytes} bytes")
            return message

        return capped


async def _reply(send: Any, status: int, error: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _asks_for_1_0(version: str | None) -> bool:
    """Whether an `A2A-Version` header names 1.0 or later (1.x clients send it on every request, 0.3 ones never)."""
    major, _, _ = (version or "").strip().partition(".")
    return major.isdigit() and int(major) >= 1


def card_route(card: AgentCard) -> Route:
    """The agent card, negotiated by the caller's protocol version: a caller that sends `A2A-Version: 1.0` gets the
    strict 1.0 card (the protocol's own fields, nothing else: a 1.0 schema accepts it); any other caller gets the same
    card with the 0.3 fields beside them (`url`, `protocolVersion`, ...), without which 0.3 clients refuse it. Both
    with an ETag (a matching If-None-Match is a 304) and Cache-Control."""
    bodies = {
        strict: json.dumps(shown, sort_keys=True).encode()
        for strict, shown in ((True, json_format.MessageToDict(card)), (False, agent_card_to_dict(card)))
    }
    etags = {strict: f'"{hashlib.sha256(body).hexdigest()[:32]}"' for strict, body in bodies.items()}

    async def serve_card(request: Request) -> Response:
        strict = _asks_for_1_0(request.headers.get("a2a-version"))
        headers = {"ETag": etags[strict], "Cache-Control": CARD_CACHE_CONTROL, "Vary": "A2A-Version"}
        asked = {tag.strip() for tag in request.headers.get("if-none-match", "").split(",")}
        if etags[strict] in asked or "*" in asked:
            return Response(status_code=304, headers=headers)
        return Response(bodies[strict], media_type=JSONResponse.media_type, headers=headers)

    return Route(AGENT_CARD_PATH, serve_card, methods=["GET"])


def build_app(
    card: AgentCard, executor: AgentExecutor, *, token: str | None = None, max_request_bytes: int = MAX_MESSAGE_BYTES
) -> Starlette:
    """Card route plus JSON-RPC route; 0.3-style callers (no A2A-Version header, `message/send`) are accepted too.

    With a `token`, every call but the card needs it as a bearer token; every request body is capped."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [card_route(card), *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)]
    guard = Middleware(_Guard, token=token, max_request_bytes=max_request_bytes)
    return Starlette(routes=routes, middleware=[guard])


def take_tokens() -> str | None:
    """Take this process's tokens out of its environment (so nothing it starts inherits them): the token it presents
    to the servers it calls is kept for `open_client`; the one its own server requires is returned."""
    present_token(os.environ.pop(CALL_TOKEN_ENV, None) or None)
    return os.environ.pop(SERVE_TOKEN_ENV, None) or None


def check_listen_address(host: str, *, token: str | None, expose: bool) -> str:
    """The start-up line that says who may call this server; a UserError for an address that is not an IP, and
    for an open server (no token) beyond loopback that was not asked for with --expose."""
    try:
        parse_host(host)
    except ValueError as error:
        raise UserError(str(error), key="--host") from None
    if token is not None:
        return "access: a bearer token is required on every call but the agent card"
    if is_loopback(host):
        return "access: open, no token configured (loopback only: any process on this host may call it)"
    if not expose:
        raise UserError(
            f"{host} is not a loopback address, and without a token ({SERVE_TOKEN_ENV}) anyone who can reach it "
            "could drive this server",
            key="--host",
            allowed="a loopback address (127.0.0.1, ::1), or --expose to open it to the network",
        )
    return f"WARNING access: open, no token configured, and listening on {host}: anyone on the network may call it"


def inherited_socket(fd: str, port: int) -> socket.socket:
    """The listening socket the supervisor bound for this server and handed down (so that no one could take the
    port in between); it must be the one the server was told to serve on."""
    try:
        sock = socket.socket(fileno=int(fd))
        bound = sock.getsockname()
    except (OSError, ValueError) as error:
        raise PortBusy(
            f"{LISTEN_FD_ENV}={fd} is not a socket this process inherited: {error}", key=LISTEN_FD_ENV
        ) from None
    if bound[1] != port:
        sock.close()
        raise PortBusy(f"the inherited socket listens on port {bound[1]}, not on {port}", key="--port")
    return sock


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves so that a busy port is a clear error, not a uvicorn log line (or take the
    one the supervisor bound and handed down in LISTEN_FD_ENV).

    The protocol must be named: asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets, and without it every small
    reply waits ~40 ms for a delayed ACK (measured: 48 ms vs 4 ms per round trip).
    """
    handed = os.environ.pop(LISTEN_FD_ENV, None)
    if handed is not None:
        return inherited_socket(handed, port)
    try:
        family = socket_family(host)
    except ValueError as error:
        raise UserError(str(error), key="--host") from None
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind_address(host), port))
    except OSError as error:
        sock.close()
        raise PortBusy(
            f"cannot listen on {host}:{port}: {error.strerror or error}; something else holds it and is left alone",
            key="--port",
        ) from None
    sock.set_inheritable(True)
    return sock


def _absorb_reraised_signal(signum: int, frame: object) -> None:
    """uvicorn has already stopped on this signal; it re-raises it only to run the previous handler."""


def serve_app(
    app: Starlette,
    host: str,
    port: int,
    *,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, then run `on_shutdown` (e.g. close policies) and return. Blocking.

    uvicorn stops gracefully on those signals and then re-raises them; with the default handlers that would end the
    process before `on_shutdown` ran, so while serving the re-raised signal is absorbed.
    """
    sock = bind_socket(host, port)
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_S),
        lifespan="off",
    )
    server = uvicorn.Server(config)
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signals belong to the main thread only
        previous = {sig: signal.signal(sig, _absorb_reraised_signal) for sig in _STOP_SIGNALS}

    async def run() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            if on_shutdown is not None:
                await on_shutdown()

    try:
        asyncio.run(run())
    finally:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
