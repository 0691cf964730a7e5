"""Fixtures shared by several test files."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from model_service import FakeModelService


@pytest.fixture
def model_service() -> Iterator[str]:
    FakeModelService.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModelService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    thread.join()
