"""The client side of the project's A2A plumbing (a2a-sdk 1.x): sending to an agent and reading its answer.

Apart from a2a_transport (the servers) because the evaluation client imports only this: a2a's client and types and
httpx, not uvicorn, starlette or a2a's server stack (about 0.2 s less for the client process of every episode). The
green, which is a server and a client, imports both. Payloads travel as JSON text in one text part (a2a_transport
says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
from a2a.client import A2AClientTimeoutError, Client, ClientCallContext, ClientConfig, create_client
from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import Message, Part, Role, SendMessageRequest, Task
from a2a.utils.errors import A2AError
from google.protobuf import json_format
from pydantic import BaseModel

from mcu_arms.http_cap import ResponseTooLarge, answer_cap

# Added to a caller's step timeout so that the transport never gives up before the agent's own deadline does.
TRANSPORT_MARGIN_S = 10.0
CONNECT_TIMEOUT_S = 10.0


class AgentError(Exception):
    """Sending to an agent failed; subclasses name the cause so that callers can count causes separately."""


class AgentTimeout(AgentError):
    """The agent did not answer within the timeout."""


class AgentTransportError(AgentError):
    """The request did not complete: connection refused or reset, HTTP or JSON-RPC error, malformed response."""


class AgentAnswerTooLarge(AgentTransportError):
    """The answer passed the cap on answers (http_cap): it was abandoned unread and its connection closed."""


_call_token: str | None = None


def present_token(token: str | None) -> None:
    """The token this process presents to every server it calls (a2a_transport.take_tokens takes it from the
    environment of a server that also calls out: the green)."""
    global _call_token
    _call_token = token


def payload_to_message(
    payload: BaseModel | dict[str, Any],
    *,
    context_id: str | None = None,
    role: Literal["user", "agent"] = "user",
) -> Message:
    """A message holding one text part: the payload as JSON text, unset (None) fields left out as upstream sends."""
    text = payload.model_dump_json(exclude_none=True) if isinstance(payload, BaseModel) else json.dumps(payload)
    return Message(
        role=Role.ROLE_USER if role == "user" else Role.ROLE_AGENT,
        parts=[Part(text=text)],
        message_id=uuid.uuid4().hex,
        context_id=context_id or "",
    )


def message_payload(message: Message) -> dict[str, Any] | None:
    """The JSON object a message carries: its text parts parsed as JSON, else its first object data part.

    None when there is no JSON object in it; the caller decides how to count that.
    """
    text = "".join(get_text_parts(message.parts)).strip()
    if text:
        try:
            decoded = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            decoded = None
        if isinstance(decoded, dict):
            return decoded
    for data in get_data_parts(message.parts):
        if isinstance(data, dict):
            return data
    return None


def client_timeout_for_step(step_timeout: float) -> float:
    """The transport timeout for one step: the agent's own budget plus a margin, never the SDK's 5 s default."""
    return step_timeout + TRANSPORT_MARGIN_S


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings every client of this process uses (httpx's defaults, the environment ignored): building them
    loads the CA bundle, ~40 ms that each new httpx client would otherwise pay again."""
    return httpx.create_ssl_context(trust_env=False)


@contextlib.asynccontextmanager
async def open_client(
    url: str, timeout_s: float | None, *, streaming: bool = False, token: str | None = None
) -> AsyncIterator[Client]:
    """A client on ONE httpx.AsyncClient, reused for every request of an episode or evaluation.

    `timeout_s` bounds each read (None: no read timeout, for a stream kept alive by SSE pings). Resolving the card
    fails with AgentTransportError (or AgentTimeout) naming the URL. Proxy variables from the environment are
    ignored: agents sit on loopback or a private network, and a proxy in between would change what is measured.
    Every request carries `token` (by default the one this process was given to call with, see `take_tokens`).
    Every answer is read against the cap on answers (http_cap); one past it raises AgentAnswerTooLarge.
    """
    connect_timeout = CONNECT_TIMEOUT_S if timeout_s is None else min(CONNECT_TIMEOUT_S, timeout_s)
    timeout = httpx.Timeout(timeout_s, connect=connect_timeout)
    presented = token or _call_token
    headers = {"Authorization": f"Bearer {presented}"} if presented else {}
    hooks = {"response": [answer_cap()]}
    async with httpx.AsyncClient(
        timeout=timeout, trust_env=False, verify=tls_context(), headers=headers, event_hooks=hooks
    ) as http:
        try:
            client = await create_client(url, client_config=ClientConfig(streaming=streaming, httpx_client=http))
        except A2AClientTimeoutError as error:
            raise AgentTimeout(f"agent card at {url} did not arrive in time: {error}") from error
        except ResponseTooLarge as error:
            raise AgentAnswerTooLarge(f"the agent card at {url}: {error}") from error
        except (A2AError, httpx.HTTPError, ValueError) as error:
            raise AgentTransportError(f"cannot reach the agent card at {url}: {error}") from error
        try:
            yield client
        finally:
            await client.close()


def reply_text(message: Message) -> str:
    return "".join(get_text_parts(message.parts))


def task_reply_text(task: Task) -> str:
    """The answer held by a task, for agents that reply with a task: last artifact, else status, else history."""
    for artifact in reversed(task.artifacts):
        text = "".join(get_text_parts(artifact.parts))
        if text:
            return text
    if task.status.HasField("message"):
        text = reply_text(task.status.message)
        if text:
            return text
    for message in reversed(task.history):
        if message.role == Role.ROLE_AGENT:
            return reply_text(message)
    return ""


async def send_and_collect(client: Client, message: Message, timeout: float) -> str:
    """Send one message and return the text of the agent's answer (a message, or a task's final answer).

    Raises AgentTimeout or AgentTransportError; never the SDK's own exceptions, so that callers count causes.
    """
    reply = ""
    try:
        async with asyncio.timeout(timeout + TRANSPORT_MARGIN_S):
            async for event in client.send_message(
                SendMessageRequest(message=message), context=ClientCallContext(timeout=timeout)
            ):
                kind = event.WhichOneof("payload")
                if kind == "message":
                    reply = reply_text(event.message)
                elif kind == "task":
                    reply = task_reply_text(event.task) or reply
                elif kind == "status_update" and event.status_update.status.HasField("message"):
                    reply = reply_text(event.status_update.status.message) or reply
                elif kind == "artifact_update":
                    reply = "".join(get_text_parts(event.artifact_update.artifact.parts)) or reply
    except (A2AClientTimeoutError, TimeoutError) as error:
        raise AgentTimeout(f"no answer within {timeout:g} s") from error
    except ResponseTooLarge as error:
        raise AgentAnswerTooLarge(str(error)) from error
    except (A2AError, httpx.HTTPError, ValueError, json_format.ParseError) as error:
        raise AgentTransportError(f"{type(error).__name__}: {error}") from error
    return reply
