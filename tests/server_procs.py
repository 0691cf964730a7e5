"""Starting real A2A servers for tests: as subprocesses (the CLI) or in a thread (an app built in the test).

Only 127.0.0.1, ports picked free at run time, readiness waited on with a deadline (never a sleep), and only the
processes started here are ever signalled (through their own Popen handle).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

HOST = "127.0.0.1"
READY_DEADLINE_S = 60.0
STOP_DEADLINE_S = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def wait_until(condition: Callable[[], bool], deadline_s: float, what: str, interval_s: float = 0.05) -> None:
    give_up = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() >= give_up:
            raise AssertionError(f"timed out after {deadline_s:g} s waiting for {what}")
        time.sleep(interval_s)


def card_ready(url: str) -> bool:
    try:
        return (
            httpx.get(url.rstrip("/") + "/.well-known/agent-card.json", timeout=2.0, trust_env=False).status_code == 200
        )
    except httpx.HTTPError:
        return False


class ServerProcess:
    """One `python -m mcu_arms ARGS` child (or any `command` serving an agent card), its log file, a clean stop."""

    def __init__(
        self,
        args: list[str],
        log_path: Path,
        port: int,
        *,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        host: str = HOST,
    ) -> None:
        self.port = port
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "mcu_arms", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, deadline_s: float = READY_DEADLINE_S) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited with {self.process.returncode} before it was ready:\n{self.log()}")
            return card_ready(self.url)

        wait_until(ready, deadline_s, f"the agent card at {self.url}", interval_s=0.1)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal our own child (by its Popen handle) and wait; KILL only if it ignores the deadline."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_DEADLINE_S)
        self._log.close()
        return self.process.returncode


@contextlib.contextmanager
def running_cli_server(args: list[str], log_path: Path, port: int) -> Iterator[ServerProcess]:
    server = ServerProcess(args, log_path, port)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def running_app(make_app: Callable[[str], object]) -> Iterator[str]:
    """Serve, from a thread on a free port, the app `make_app(base_url)` builds (its card can name its own URL)."""
    import uvicorn

    from mcu_arms.a2a_transport import bind_socket

    port = free_port()
    url = f"http://{HOST}:{port}"
    sock = bind_socket(HOST, port)
    server = uvicorn.Server(uvicorn.Config(make_app(url + "/"), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, READY_DEADLINE_S, f"the in-thread server at {url}")
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=STOP_DEADLINE_S)
        sock.close()
