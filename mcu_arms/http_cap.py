"""Answers read against a cap: an httpx client given the hook made here reads each answer incrementally and, past
the cap, stops reading, closes the connection and raises ResponseTooLarge, so that a server that answers 1 GB costs
the reader at most the cap. Server-sent events are capped per event (a stream may run for hours; one event may not
be huge).

Used by every client that reads what another process sends: the green reading its purple, the evaluation client
reading the green, the planned agent reading its models. Imports httpx: only those processes import this module.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_MESSAGE_BYTES, MAX_RESPONSE_BYTES_ENV

EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")  # a blank line ends an event, whichever line ending


class ResponseTooLarge(Exception):
    """An answer passed the cap; what remained of it was left unread and its connection closed.

    Not an httpx error on purpose: the libraries between us and httpx (a2a, openai) rewrap those, and the cause
    would be lost; callers find it as the exception itself or as the `__cause__` of theirs."""

    def __init__(self, url: str, cap: int, declared: int | None = None) -> None:
        told = f" (it declared {declared} bytes)" if declared is not None else ""
        super().__init__(f"the answer from {url} passed the {cap}-byte cap{told}; the rest was not read")
        self.cap = cap


def max_response_bytes() -> int:
    """The cap in force: MAX_RESPONSE_BYTES_ENV when set, else MAX_MESSAGE_BYTES."""
    given = os.environ.get(MAX_RESPONSE_BYTES_ENV, "").strip()
    if not given:
        return MAX_MESSAGE_BYTES
    if not given.isdigit() or int(given) == 0:
        raise UserError(
            f"{MAX_RESPONSE_BYTES_ENV}={given!r} is not a cap on answers",
            key=MAX_RESPONSE_BYTES_ENV,
            allowed=f"a positive number of bytes (default {MAX_MESSAGE_BYTES})",
        )
    return int(given)


def too_large_in(error: BaseException) -> ResponseTooLarge | None:
    """The ResponseTooLarge behind an error some library raised in its place, if that is what happened."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ResponseTooLarge):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, url: str, cap: int, per_event: bool) -> None:
        self._inner = inner
        self._url = url
        self._cap = cap
        self._per_event = per_event

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held = 0  # bytes of this answer (or of the event not yet ended) read so far
        tail = b""
        async for chunk in self._inner:
            held += len(chunk)
            if self._per_event:
                seen = tail + chunk
                ended = max(seen.rfind(end) + len(end) if end in seen else -1 for end in EVENT_ENDS)
                if ended >= 0:
                    held = len(seen) - ended
                tail = seen[-3:]
            if held > self._cap:
                raise ResponseTooLarge(self._url, self._cap)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def answer_cap(cap: int | None = None) -> Callable[[httpx.Response], Awaitable[None]]:
    """An httpx response hook (`event_hooks={"response": [answer_cap()]}`) that puts each answer's body behind the
    cap before anyone reads it; an answer that declares more than the cap is refused unread. A hook rather than a
    transport, so that an answer that comes through a proxy is capped too."""
    limit = cap if cap is not None else max_response_bytes()

    async def cap_answer(response: httpx.Response) -> None:
        url = str(response.request.url)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await response.aclose()
            raise ResponseTooLarge(url, limit, int(declared))
        per_event = response.headers.get("content-type", "").startswith("text/event-stream")
        response.stream = _CappedStream(response.stream, url, limit, per_event)

    return cap_answer
