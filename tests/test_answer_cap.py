"""The cap on answers (http_cap), on httpx's own client: an answer that declares too much is refused unread, one that
streams too much is abandoned at the cap, and a server-sent stream is capped per event, not in all."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_MESSAGE_BYTES, MAX_RESPONSE_BYTES_ENV
from mcu_arms.http_cap import ResponseTooLarge, answer_cap, max_response_bytes

CAP = 1000


class Streamed(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.sent = 0

    async def __aiter__(self):
        for chunk in self.chunks:
            self.sent += len(chunk)
            yield chunk


def _get(stream: Streamed, headers: dict[str, str]) -> httpx.Response:
    async def fetch() -> httpx.Response:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=headers, stream=stream))
        async with httpx.AsyncClient(transport=transport, event_hooks={"response": [answer_cap(CAP)]}) as client:
            return await client.get("http://agent.test/")

    return asyncio.run(fetch())


def test_an_answer_that_declares_more_than_the_cap_is_refused_unread():
    stream = Streamed([b"x" * 10])
    with pytest.raises(ResponseTooLarge, match="declared 5000 bytes"):
        _get(stream, {"content-length": "5000"})
    assert stream.sent == 0


def test_an_answer_streamed_past_the_cap_is_abandoned_there():
    stream = Streamed([b"x" * 100] * 1000)
    with pytest.raises(ResponseTooLarge, match="1000-byte cap"):
        _get(stream, {})
    assert stream.sent <= CAP + 100


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_a_stream_of_events_is_capped_per_event(newline: bytes):
    event = b"data: " + b"x" * 400 + newline + newline
    assert len(_get(Streamed([event] * 50), {"content-type": "text/event-stream"}).content) == 50 * len(event)
    with pytest.raises(ResponseTooLarge):
        _get(Streamed([b"data: " + b"x" * 400] * 5), {"content-type": "text/event-stream"})


def test_the_cap_is_a_setting(monkeypatch):
    assert max_response_bytes() == MAX_MESSAGE_BYTES
    monkeypatch.setenv(MAX_RESPONSE_BYTES_ENV, "2048")
    assert max_response_bytes() == 2048
    monkeypatch.setenv(MAX_RESPONSE_BYTES_ENV, "lots")
    with pytest.raises(UserError, match=MAX_RESPONSE_BYTES_ENV):
        max_response_bytes()
