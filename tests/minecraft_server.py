"""A real Minecraft-protocol server for the mineflayer tests: flying-squid from npm (tests/fixtures/minecraft_server),
on loopback, offline mode, a free port chosen by binding, with oak trees near the spawn.

    found = runtime()            # the product's node (>= 22, from npm into the cache when the system's is older)
                                 # and this fixture's libraries, or a str saying why not (for pytest.skip)
    with MinecraftServer(found) as server: ...   # stopped by pid in every case

Installs go to the product's cache ($MCU_ARMS_CACHE_DIR or ~/.cache/mcu-arms): the sidecar's libraries where the
product keeps them, and this fixture's under test-minecraft-server/<digest of its lockfile>/. The product never
starts this server; users bring a vanilla one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from server_procs import free_port

from mcu_arms.contracts.mineflayer import cache_root
from mcu_arms.green.sims.base import SimulatorUnavailable
from mcu_arms.green.sims.mineflayer.runtime import INSTALLED_MARK, Runtime, ensure_runtime, run_npm
from mcu_arms.process.procs import stop_process_group

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "minecraft_server"
FIXTURE_FILES = ("package.json", "package-lock.json")
READY_DEADLINE_S = 90.0
VERSION = "1.21.1"


@dataclass(frozen=True)
class ServerRuntime:
    sidecar: Runtime  # the product's node and sidecar libraries
    libraries: Path  # this fixture's node_modules live here


def _fixture_dir(env: dict[str, str]) -> Path:
    digest = hashlib.sha256(b"".join((FIXTURE / name).read_bytes() for name in FIXTURE_FILES)).hexdigest()[:12]
    return cache_root(env) / "test-minecraft-server" / digest


def runtime() -> ServerRuntime | str:
    """Node, the sidecar's libraries and flying-squid, installed first when missing; else why they cannot be."""
    env = dict(os.environ)
    try:
        sidecar = ensure_runtime(env, print)
        libraries = _fixture_dir(env)
        if not (libraries / INSTALLED_MARK).is_file():
            libraries.mkdir(parents=True, exist_ok=True)
            for name in FIXTURE_FILES:
                shutil.copyfile(FIXTURE / name, libraries / name)
            run_npm(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(libraries)], env, sidecar.node)
            (libraries / INSTALLED_MARK).write_text("flying-squid\n", encoding="utf-8")
    except SimulatorUnavailable as error:
        return f"the Minecraft test server or the sidecar cannot be installed from npm here: {error}"
    return ServerRuntime(sidecar=sidecar, libraries=libraries)


class MinecraftServer:
    """flying-squid in its own process group; its console (stdin) takes the tests' commands."""

    def __init__(self, found: ServerRuntime, log_path: Path, seed: int = 7) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.ready: dict[str, Any] = {}
        self.reports: list[dict[str, Any]] = []
        self._ready = threading.Event()
        self._log = log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [
                str(found.sidecar.node),
                str(FIXTURE / "server.mjs"),
                "--port",
                str(self.port),
                "--seed",
                str(seed),
                "--version",
                VERSION,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, "NODE_PATH": str(found.libraries / "node_modules")},
        )
        self.create_time = psutil.Process(self.process.pid).create_time()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode("utf-8", errors="replace")
            self._log.write(line)
            self._log.flush()
            if line.startswith("{"):
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if message.get("event") == "server_ready":
                    self.ready = message
                    self._ready.set()
                else:
                    self.reports.append(message)
        self._ready.set()

    def __enter__(self) -> MinecraftServer:
        """Wait until the server is up; whatever ends the wait early (Ctrl-C included) stops it first, since a
        `with` whose __enter__ raises never calls __exit__."""
        try:
            came_up = self._ready.wait(READY_DEADLINE_S) and bool(self.ready)
        except BaseException:
            self.stop()
            raise
        if not came_up:
            self.stop()
            raise AssertionError(f"the test server did not come up:\n{self.log_path.read_text()[-3000:]}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def command(self, text: str) -> None:
        """A line on the server's console, as an operator would type it."""
        assert self.process.stdin is not None
        self.process.stdin.write((text + "\n").encode("utf-8"))
        self.process.stdin.flush()

    def stop(self) -> None:
        stop_process_group(self.process.pid, self.create_time, grace_s=5.0, popen=self.process)
        self._reader.join(timeout=5.0)
        self._log.close()
