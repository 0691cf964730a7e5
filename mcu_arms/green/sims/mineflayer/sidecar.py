"""The sidecar process and its JSON-lines channel, owned by the green.

Started in its own process group (start_new_session) and stopped by pid, re-checked with its create time
(procs.stop_process_group): closing its stdin first lets it quit the bot and exit on its own. Its stdout is the
protocol only; a line there that is not JSON is counted (`stray_lines`), never parsed as an answer. Its stderr (the
libraries' own prints) goes to the green's log, each line cut to a readable length.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any

from mcu_arms.green.sims.base import SimulatorUnavailable
from mcu_arms.green.sims.mineflayer.runtime import SIDECAR_SCRIPT, Runtime

READY_TIMEOUT_S = 60.0
EXIT_GRACE_S = 3.0
STOP_GRACE_S = 5.0
LOG_LINE_CHARS = 400


class SidecarFailed(SimulatorUnavailable):
    """The sidecar did not answer, answered an error, or is gone."""


class Sidecar:
    """One running sidecar: `request` sends an op and waits for its answer; `take_events` drains what it reported."""

    def __init__(self, runtime: Runtime, env: Mapping[str, str], log: Callable[[str], None]) -> None:
        import psutil

        self._log = log
        self._next_id = 0
        self._lock = threading.Lock()
        self._waiting: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._events: list[dict[str, Any]] = []
        self._ready = threading.Event()
        self.stray_lines = 0
        self.closed_reason: str | None = None
        self.process = subprocess.Popen(
            [str(runtime.node), str(SIDECAR_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, "NODE_PATH": runtime.node_path},
            start_new_session=True,
        )
        self.pid = self.process.pid
        try:
            self.create_time: float | None = psutil.Process(self.pid).create_time()
        except psutil.Error:
            self.create_time = None
        self._threads = [
            threading.Thread(target=self._read_answers, name="mineflayer-stdout", daemon=True),
            threading.Thread(target=self._read_log, name="mineflayer-stderr", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        if not self._ready.wait(READY_TIMEOUT_S):
            self.stop()
            raise SidecarFailed(f"the sidecar (pid {self.pid}) did not start within {READY_TIMEOUT_S:g} s")
        if self.closed_reason is not None:
            raise SidecarFailed(f"the sidecar exited at start: {self.closed_reason}")

    def _read_answers(self) -> None:
        stdout: IO[bytes] = self.process.stdout  # type: ignore[assignment]
        for raw in stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                self.stray_lines += 1
                self._log(f"mineflayer sidecar: a stray stdout line (not protocol): {raw[:LOG_LINE_CHARS]!r}")
                continue
            if not isinstance(message, dict):
                self.stray_lines += 1
                continue
            if "event" in message and "id" not in message:
                if message["event"] == "sidecar_ready":
                    self._ready.set()
                    continue
                with self._lock:
                    self._events.append(message)
                continue
            waiting = self._waiting.get(message.get("id"))  # type: ignore[arg-type]
            if waiting is not None:
                waiting.put(message)
        self.closed_reason = f"its stdout closed (exit code {self.process.poll()})"
        self._ready.set()
        for waiting in list(self._waiting.values()):
            waiting.put({"ok": False, "error": f"the sidecar is gone: {self.closed_reason}"})

    def _read_log(self) -> None:
        stderr: IO[bytes] = self.process.stderr  # type: ignore[assignment]
        for raw in stderr:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                cut = " ..." if len(line) > LOG_LINE_CHARS else ""
                self._log(f"mineflayer sidecar: {line[:LOG_LINE_CHARS]}{cut}")

    def alive(self) -> bool:
        return self.closed_reason is None and self.process.poll() is None

    def request(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        """The answer to `op`; SidecarFailed when it is an error, late, or the sidecar is gone."""
        if not self.alive():
            raise SidecarFailed(f"the sidecar is gone ({self.closed_reason or 'exited'}); {op} was not sent")
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            answers: queue.Queue[dict[str, Any]] = queue.Queue()
            self._waiting[request_id] = answers
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps({"id": request_id, "op": op, **fields}) + "\n").encode("utf-8"))
            self.process.stdin.flush()
            answer = answers.get(timeout=timeout_s)
        except (BrokenPipeError, OSError) as error:
            raise SidecarFailed(f"{op}: the sidecar's stdin is closed ({error})") from None
        except queue.Empty:
            raise SidecarFailed(f"{op}: no answer from the sidecar within {timeout_s:g} s") from None
        finally:
            self._waiting.pop(request_id, None)
        if not answer.get("ok"):
            raise SidecarFailed(f"{op}: {answer.get('error')}")
        return answer

    def take_events(self) -> list[dict[str, Any]]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def stop(self) -> None:
        """Close its stdin (it quits the bot and exits), then stop its group by pid if it has not."""
        from mcu_arms.process.procs import stop_process_group

        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        stop_process_group(self.pid, self.create_time, grace_s=STOP_GRACE_S, popen=self.process)
        for thread in self._threads:
            thread.join(timeout=2.0)
