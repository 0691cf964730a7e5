"""The process layer: children started in their own process group, logged line by line with a timestamp, and
stopped TERM -> wait -> KILL. The supervisor, the codex agents and the MineStudio backend all use it from below;
it knows nothing above it.

Every signal goes to a process this code can prove it started: a pid is only signalled after psutil confirms it is
still running with the create_time recorded at launch (pids are reused). Nothing here looks a process up by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from mcu_arms.contracts.run_report import RunReport
from mcu_arms.contracts.settings import ProcessPlan
from mcu_arms.contracts.states import SUPERVISOR_ROLE
from mcu_arms.contracts.timestamps import log_stamp

# Seconds a stopped group gets to exit on SIGTERM before what remains of it is killed.
DEFAULT_STOP_GRACE_S = 10.0
# Seconds to wait for SIGKILLed processes to disappear.
KILL_WAIT_S = 5.0
# Create times agree to this many seconds (psutil rounds them from clock ticks).
CREATE_TIME_TOLERANCE_S = 0.01
LOG_TAIL_LINES = 20
# How often a stop re-checks whether the processes it signalled have exited.
EXIT_POLL_S = 0.05
# Set to a fresh token in each child's environment: every descendant inherits it, so the ones that left the child's
# process group or outlived it (reparented away) are still found, and proven ours, when the child is stopped.
OWNER_TOKEN_ENV = "MCU_ARMS_OWNER_TOKEN"



def log_line(line: str) -> None:
    """One line on stdout, which is a child's log: stamped here only when no supervisor stamps it on copy."""
    print(line if OWNER_TOKEN_ENV in os.environ else f"{log_stamp()} {line}", flush=True)


def is_alive(pid: int | None, create_time: float | None) -> bool:
    return verified_process(pid, create_time) is not None


def supervisor_alive(report: RunReport) -> bool:
    """Is the `mcu-arms run` that wrote this report still running (same pid and create_time)?"""
    record = report.processes.get(SUPERVISOR_ROLE)
    return record is not None and is_alive(record.pid, record.create_time)


def verified_process(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The live process `pid` if it is the one recorded (same create_time), else None. Zombies count as gone."""
    if pid is None or create_time is None:
        return None
    try:
        process = psutil.Process(pid)
        if not process.is_running() or abs(process.create_time() - create_time) > CREATE_TIME_TOLERANCE_S:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


@dataclass
class StopOutcome:
    """What stopping one process group took. `survivors` is empty unless something refused even SIGKILL."""

    was_running: bool
    terminated: int = 0  # processes that exited on SIGTERM
    killed: int = 0  # processes that needed SIGKILL
    survivors: list[int] = field(default_factory=list)


def stop_process_group(
    pid: int | None,
    create_time: float | None,
    *,
    grace_s: float = DEFAULT_STOP_GRACE_S,
    popen: subprocess.Popen | None = None,
    token: str | None = None,
) -> StopOutcome:
    """TERM the group led by `pid` (started with start_new_session, so pgid == pid), wait, then KILL what remains.

    The leader is re-checked (is_running + create_time) before every group signal; descendants are collected before
    signalling, so ones that left the group or were orphaned are still stopped, each through its own psutil handle
    (which refuses a reused pid). `popen` (when this process started the leader) is used to reap it and keep its
    exit code. `token` (the leader's OWNER_TOKEN_ENV) also stops, the same way, descendants that no longer hang
    below the leader: left behind when it died, or reparented away.
    """
    leader = verified_process(pid, create_time)
    if leader is None:
        if popen is not None:
            popen.poll()
        outcome = StopOutcome(was_running=False)
    else:
        outcome = _stop_group(leader, create_time, grace_s, popen)
    if token:
        _stop_stragglers(token, grace_s, outcome)
    return outcome


def _stop_group(
    leader: psutil.Process, create_time: float, grace_s: float, popen: subprocess.Popen | None
) -> StopOutcome:
    members = [leader, *descendants(leader)]
    _signal_all(leader, members, signal.SIGTERM)
    alive = _wait_gone(members, grace_s, popen)
    outcome = StopOutcome(was_running=True, terminated=len(members) - len(alive))
    if alive:
        if verified_process(leader.pid, create_time):
            alive += [p for p in descendants(leader) if p not in alive]
        _signal_all(leader, alive, signal.SIGKILL)
        survivors = _wait_gone(alive, KILL_WAIT_S, popen)
        outcome.killed = len(alive) - len(survivors)
        outcome.survivors = [p.pid for p in survivors]
    return outcome


def _carrying(token: str, variable: str) -> list[psutil.Process]:
    """Running processes whose environment has `variable` = `token` (only our own user's environments are readable)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(variable) == token:
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def stop_token_holders(
    token: str, *, variable: str = OWNER_TOKEN_ENV, grace_s: float = DEFAULT_STOP_GRACE_S
) -> StopOutcome:
    """TERM, wait, KILL every process whose environment carries `token` in `variable`: a fresh token set by the code
    that started them proves they are ours, wherever they were reparented."""
    outcome = StopOutcome(was_running=False)
    _stop_stragglers(token, grace_s, outcome, variable)
    return outcome


def _stop_stragglers(token: str, grace_s: float, outcome: StopOutcome, variable: str = OWNER_TOKEN_ENV) -> None:
    """TERM, wait, KILL the processes still carrying `token`, each through its own psutil handle; add to `outcome`."""
    stragglers = _carrying(token, variable)
    if not stragglers:
        return
    outcome.was_running = True
    for process in stragglers:
        _send(process, signal.SIGTERM)
    alive = _wait_exited(stragglers, grace_s)
    outcome.terminated += len(stragglers) - len(alive)
    for process in alive:
        _send(process, signal.SIGKILL)
    survivors = _wait_exited(alive, KILL_WAIT_S)
    outcome.killed += len(alive) - len(survivors)
    outcome.survivors += [p.pid for p in survivors]


def _send(process: psutil.Process, signum: int) -> None:
    try:
        process.send_signal(signum)  # psutil refuses a pid that now belongs to another process
    except psutil.Error:
        pass


def _signal_all(leader: psutil.Process, members: list[psutil.Process], signum: int) -> None:
    """Signal the leader's group while the leader is still ours, and each other member through its own handle."""
    group = leader.pid
    leader_ours = verified_process(leader.pid, leader.create_time()) is not None
    if leader_ours:
        try:
            os.killpg(group, signum)
        except ProcessLookupError:
            leader_ours = False
    for member in members:
        if member.pid == group:
            continue
        try:
            if leader_ours and os.getpgid(member.pid) == group:
                continue  # the group signal reached it
            member.send_signal(signum)  # psutil refuses a pid that now belongs to another process
        except (psutil.Error, ProcessLookupError):
            continue


def _wait_gone(members: list[psutil.Process], timeout_s: float, popen: subprocess.Popen | None) -> list[psutil.Process]:
    """Members still running after `timeout_s`. The leader we started is reaped through its Popen."""
    others = [p for p in members if popen is None or p.pid != popen.pid]
    leader_alive: list[psutil.Process] = []
    if popen is not None and len(others) < len(members):
        try:
            popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            leader_alive = [p for p in members if p.pid == popen.pid]
        timeout_s = 0.5
    return leader_alive + _wait_exited(others, timeout_s)


def _wait_exited(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those still running after up to `timeout_s`. A zombie has exited: waiting on its parent (for an orphan, init)
    to reap it, as psutil.wait_procs does, would spend the whole timeout."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        running = [p for p in processes if _still_running(p)]
        if not running or time.monotonic() >= deadline:
            return running
        pause.wait(EXIT_POLL_S)


def _still_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Child:
    """One started process of an arm: its Popen, identity and timestamped log."""

    def __init__(self, plan: ProcessPlan, base_env: Mapping[str, str]) -> None:
        self.plan = plan
        self.role = plan.role
        self.log_path = Path(plan.log)
        self.token = uuid.uuid4().hex
        self.env = {**base_env, **plan.env, "PYTHONUNBUFFERED": "1", OWNER_TOKEN_ENV: self.token}
        self.popen: subprocess.Popen | None = None
        self.pid: int | None = None
        self.create_time: float | None = None
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start in a new session (own process group); a reader thread timestamps its output into the log."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a", encoding="utf-8")
        try:
            self.popen = subprocess.Popen(
                self.plan.argv,
                cwd=self.plan.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError:
            log.close()
            raise
        self.pid = self.popen.pid
        try:
            self.create_time = psutil.Process(self.pid).create_time()
        except psutil.Error:  # already gone; poll() reports its exit code
            self.create_time = None
        self._reader = threading.Thread(target=self._copy_output, args=(log,), name=f"log-{self.role}", daemon=True)
        self._reader.start()

    def _copy_output(self, log) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        with log:
            for raw in iter(self.popen.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                log.write(f"{log_stamp()} {line}\n")
                log.flush()
                self._tail.append(line)
        self.popen.stdout.close()

    def poll(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    @property
    def exit_code(self) -> int | None:
        return None if self.popen is None else self.popen.returncode

    def log_tail(self, wait_s: float = 2.0) -> list[str]:
        """The last lines it printed, after its output has drained (bounded wait)."""
        if self._reader is not None:
            self._reader.join(timeout=wait_s)
        return list(self._tail)

    def process(self) -> psutil.Process | None:
        return verified_process(self.pid, self.create_time)

    def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> StopOutcome:
        return stop_process_group(self.pid, self.create_time, grace_s=grace_s, popen=self.popen, token=self.token)
