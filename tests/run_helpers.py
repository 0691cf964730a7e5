"""Shared by the `run`/`status`/`stop` tests: a tmp project with arm files, the real CLI as a subprocess, and waiting
on conditions with deadlines (never sleeping as synchronisation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil

T = TypeVar("T")

ARM_TEMPLATE = """agent = "{agent}"
task = "mine_diamond_from_scratch"
simulator = "embedded"
seed = {seed}
steps = {steps}
step_timeout = {step_timeout}
save_frames = false

[ports]
green = {green}
purple = {purple}
"""


def write_arm(
    project: Path,
    name: str,
    *,
    agent: str = "random",
    steps: int = 30,
    seed: int = 0,
    step_timeout: float = 10,
    green: int | str = "auto",
    purple: int | str = "auto",
) -> Path:
    arms = project / "arms"
    arms.mkdir(parents=True, exist_ok=True)
    path = arms / f"{name}.toml"
    quoted = {
        key: f'"{value}"' if isinstance(value, str) else str(value)
        for key, value in {"green": green, "purple": purple}.items()
    }
    path.write_text(ARM_TEMPLATE.format(agent=agent, seed=seed, steps=steps, step_timeout=step_timeout, **quoted))
    return path


def cli_env(state_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MCU_ARMS_STATE_DIR"] = str(state_dir)
    env["COLUMNS"] = "200"
    env.pop("OPENAI_API_KEY", None)
    return env


def run_cli(project: Path, state_dir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", *args],
        cwd=project,
        env=cli_env(state_dir),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Started:
    """`mcu-arms ...` started in the background, its output collected by threads (so pipes never fill)."""

    def __init__(
        self,
        project: Path,
        state_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        """`wrapper`: a command that execs the rest of its arguments (so the pid is mcu-arms' own)."""
        self.popen = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "mcu_arms", *args],
            cwd=project,
            env=env or cli_env(state_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.family: list[psutil.Process] = []
        self._readers = [
            threading.Thread(target=self._collect, args=(self.popen.stdout, self.out), daemon=True),
            threading.Thread(target=self._collect, args=(self.popen.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _collect(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait(self, timeout: float = 120) -> int:
        code = self.popen.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=5)
        return code

    @property
    def output(self) -> str:
        return "".join(self.out) + "".join(self.err)

    def remember_family(self) -> list[psutil.Process]:
        """Its descendants now (green, purple, client...), kept so that cleanup can reach them after it is gone."""
        self.family = descendants(self.popen.pid)
        return self.family

    def kill_if_running(self) -> None:
        """Test cleanup: kill what this test started, if a failed assertion left it running. Each descendant goes
        through its own psutil handle, which refuses a pid that now belongs to someone else."""
        if self.popen.poll() is None:
            known = {process.pid for process in self.family}
            self.family += [process for process in descendants(self.popen.pid) if process.pid not in known]
            os.killpg(self.popen.pid, 9)  # its servers are in sessions of their own: reached through the family
            self.popen.wait(timeout=10)
        for process in self.family:
            try:
                if process.is_running():
                    process.kill()
            except psutil.Error:
                continue


def wait_for(condition: Callable[[], T], what: str, timeout: float = 90.0, interval: float = 0.1) -> T:
    """Poll `condition` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        pause.wait(interval)


def report(project: Path, arm: str, episode: int = 1) -> dict[str, Any] | None:
    path = project / "output" / arm / f"episode_{episode:03d}" / "result.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def steps_logged(project: Path, arm: str, episode: int = 1) -> int:
    green = project / "output" / arm / f"episode_{episode:03d}" / "green"
    return sum(len(p.read_bytes().splitlines()) for p in green.glob("*/steps.jsonl")) if green.is_dir() else 0


def running_with_steps(project: Path, arm: str, min_steps: int = 3) -> dict[str, Any] | None:
    """The arm's started report once its client runs and the green has logged some steps."""
    data = report(project, arm)
    if data and data["status"] == "started" and "client" in data["processes"]:
        if steps_logged(project, arm) >= min_steps:
            return data
    return None


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def alive(processes: list[psutil.Process]) -> list[int]:
    """Pids among `processes` (psutil handles: a reused pid does not count) still running and not zombies."""
    running = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                running.append(process.pid)
        except psutil.Error:
            continue
    return running
