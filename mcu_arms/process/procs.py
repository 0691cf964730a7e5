"""The process layer: children started in their own process group, logged line by line with a timestamp, and
stopped TERM -> wait -> KILL. The supervisor, the codex agents and the MineStudio backend all use it from below;
it knows nothing above it.

Every signal goes to a process this code can prove it started: a pid is only signalled after psutil confirms it is
still running with the create_time recorded at launch (pids are reused), or it carries the owner token set at launch,
or it sits in the cgroup made for that child (containment.py). What names a process comes from this process's own
memory or from the private record (contracts/started.py), never from a report in `output/`. Nothing here looks a
process up by name, and pid <= 1, this process and its ancestors are never signalled, whatever any record says.

What children print reaches their logs neutralised (no terminal escapes), bounded per line, and with the arm's
secrets masked wherever they turn up; a child that holds a conversation (the purple) starts with umask 077, so that
everything it writes is private, and its log is 0600.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import psutil

from mcu_arms.atomic import PRIVATE_FILE_MODE, SHARED_MODE, open_log
from mcu_arms.contracts.redaction import mask_known
from mcu_arms.contracts.settings import ProcessPlan
from mcu_arms.contracts.started import StartedProcess, token_hash
from mcu_arms.contracts.states import SUPERVISOR_ROLE
from mcu_arms.contracts.text import MAX_LOG_LINE_CHARS, shown_text
from mcu_arms.contracts.timestamps import log_stamp
from mcu_arms.process.child_env import OWNER_TOKEN_ENV, inherited_environment
from mcu_arms.process.containment import Cgroup, become_subreaper, create_cgroup

# Seconds a stopped group gets to exit on SIGTERM before what remains of it is killed.
DEFAULT_STOP_GRACE_S = 10.0
# Seconds to wait for SIGKILLed processes to disappear.
KILL_WAIT_S = 5.0
# Create times agree to this many seconds (psutil rounds them from clock ticks).
CREATE_TIME_TOLERANCE_S = 0.01
LOG_TAIL_LINES = 20
# How often a stop re-checks whether the processes it signalled have exited.
EXIT_POLL_S = 0.05
# What a child that holds the agent's conversation (turn prompts, memory) is started with: all it writes is private.
PRIVATE_UMASK = 0o077
# How many times a cgroup is swept for members that appeared while it was being stopped.
CGROUP_SWEEPS = 3
FoundBy = Literal["recorded", "owner token", "cgroup"]
# Set when a child inherits its listening socket (ProcessPlan.listen_fd): the descriptor to serve on.
LISTEN_FD_ENV = "MCU_ARMS_LISTEN_FD"


def log_line(line: str) -> None:
    """One line on stdout, which is a child's log: stamped here only when no supervisor stamps it on copy. Bounded
    and neutralised, since it may quote what an agent sent."""
    line = shown_text(line, MAX_LOG_LINE_CHARS, one_line=False)
    print(line if OWNER_TOKEN_ENV in os.environ else f"{log_stamp()} {line}", flush=True)


def signal_refused(pid: int) -> str | None:
    """Why `pid` must never be signalled from here (None: it may be, once proven ours): pid <= 1 (init, or a PID
    namespace's first process), this process, or one of its ancestors (the shell, the job step that runs us)."""
    if pid <= 1:
        return f"pid {pid} is init or not a process"
    if pid == os.getpid():
        return f"pid {pid} is this mcu-arms process"
    try:
        ancestors = {parent.pid for parent in psutil.Process().parents()}
    except psutil.Error:
        ancestors = {os.getppid()}
    return f"pid {pid} is an ancestor of this mcu-arms process" if pid in ancestors else None


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
    contained: list[int] = field(default_factory=list)  # found only by the child's cgroup: left its group and token


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
    leader: psutil.Process, create_time: float | None, grace_s: float, popen: subprocess.Popen | None
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
    return _token_holders({token_hash(token)}, variable).get(token_hash(token), [])


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
    _stop_listed(_carrying(token, variable), grace_s, outcome)


def _stop_listed(processes: list[psutil.Process], grace_s: float, outcome: StopOutcome) -> None:
    """TERM, wait, KILL `processes` (each proven ours by the caller), through their own psutil handles; one never to
    be signalled (signal_refused) is left out."""
    processes = [process for process in processes if signal_refused(process.pid) is None]
    if not processes:
        return
    outcome.was_running = True
    for process in processes:
        _send(process, signal.SIGTERM)
    alive = _wait_exited(processes, grace_s)
    outcome.terminated += len(processes) - len(alive)
    for process in alive:
        _send(process, signal.SIGKILL)
    survivors = _wait_exited(alive, KILL_WAIT_S)
    outcome.killed += len(alive) - len(survivors)
    outcome.survivors += [p.pid for p in survivors]


def _handles(pids: Iterable[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return found


def stop_cgroup(cgroup: Cgroup, grace_s: float, outcome: StopOutcome) -> None:
    """Stop what is still in a child's cgroup (membership proves it ours, whatever its group or environment),
    sweeping again for members that appeared meanwhile, then remove the cgroup once empty."""
    for _ in range(CGROUP_SWEEPS):
        members = [p for p in _handles(cgroup.pids()) if _still_running(p)]
        if not members:
            break
        outcome.contained += [p.pid for p in members]
        _stop_listed(members, grace_s, outcome)
    cgroup.remove()


def _send(process: psutil.Process, signum: int) -> None:
    if signal_refused(process.pid) is not None:
        return
    try:
        process.send_signal(signum)  # psutil refuses a pid that now belongs to another process
    except psutil.Error:
        pass


def _signal_all(leader: psutil.Process, members: list[psutil.Process], signum: int) -> None:
    """Signal the leader's group while the leader is still ours, and each other member through its own handle."""
    group = leader.pid
    leader_ours = verified_process(leader.pid, leader.create_time()) is not None
    leader_ours = leader_ours and signal_refused(group) is None and os.getpgid(0) != group
    if leader_ours:
        try:
            os.killpg(group, signum)
        except ProcessLookupError:
            leader_ours = False
    for member in members:
        if member.pid == group and leader_ours:
            continue
        try:
            if leader_ours and os.getpgid(member.pid) == group:
                continue  # the group signal reached it
        except ProcessLookupError:
            continue
        _send(member, signum)


def _wait_gone(members: list[psutil.Process], timeout_s: float, popen: subprocess.Popen | None) -> list[psutil.Process]:
    """Members still running after `timeout_s`, every one of them given the whole of it (a child still shutting
    down when its leader exits keeps the rest of the grace). The leader we started is reaped through its Popen."""
    deadline = time.monotonic() + timeout_s
    others = [p for p in members if popen is None or p.pid != popen.pid]
    leader_alive: list[psutil.Process] = []
    if popen is not None and len(others) < len(members):
        try:
            popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            leader_alive = [p for p in members if p.pid == popen.pid]
    return leader_alive + _wait_exited(others, max(deadline - time.monotonic(), 0.0))


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

    def __init__(
        self,
        plan: ProcessPlan,
        base_env: Mapping[str, str],
        *,
        secret_env: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        contain: bool = False,
        umask: int | None = None,
    ) -> None:
        """`secret_env` is added to the child's environment but never to its plan; `secrets` are masked wherever they
        turn up in its output; `contain` puts it in a cgroup of its own where the host allows it; `umask` is the one
        it starts with (PRIVATE_UMASK for one that holds a conversation; None: this process's)."""
        self.plan = plan
        self.role = plan.role
        self.log_path = Path(plan.log)
        self.token = uuid.uuid4().hex
        self.env = {
            **inherited_environment(base_env),
            **plan.env,
            **(secret_env or {}),
            "PYTHONUNBUFFERED": "1",
            OWNER_TOKEN_ENV: self.token,
        }
        self.secrets = list(secrets)
        self.contain = contain
        self.umask = umask
        self.cgroup: Cgroup | None = None
        if plan.listen_fd is not None:
            self.env[LISTEN_FD_ENV] = str(plan.listen_fd)
        self.popen: subprocess.Popen | None = None
        self.pid: int | None = None
        self.create_time: float | None = None
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start in a new session (own process group), in its own cgroup when asked and possible; a reader thread
        timestamps its output into the log."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open_log(self.log_path, SHARED_MODE if self.umask is None else PRIVATE_FILE_MODE)
        self.cgroup = create_cgroup(self.role) if self.contain else None
        try:
            self.popen = subprocess.Popen(
                self.plan.argv,
                cwd=self.plan.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                umask=-1 if self.umask is None else self.umask,
                pass_fds=() if self.plan.listen_fd is None else (self.plan.listen_fd,),
            )
        except OSError:
            log.close()
            self._drop_cgroup()
            raise
        self.pid = self.popen.pid
        self._join_cgroup()
        try:
            self.create_time = psutil.Process(self.popen.pid).create_time()
        except psutil.Error:  # already gone; poll() reports its exit code
            self.create_time = None
        self._reader = threading.Thread(target=self._copy_output, args=(log,), name=f"log-{self.role}", daemon=True)
        self._reader.start()

    def _join_cgroup(self) -> None:
        """Move the child into its cgroup at once: it is still starting its interpreter, so it has started nothing
        yet, and all it starts later is born inside."""
        if self.cgroup is None or self.pid is None:
            return
        try:
            self.cgroup.add(self.pid)
        except OSError:
            self._drop_cgroup()

    def _drop_cgroup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def _copy_output(self, log: IO[str]) -> None:
        """Each line: bounded (a longer one is cut, the rest of it skipped), neutralised, secrets masked."""
        assert self.popen is not None and self.popen.stdout is not None
        stream = self.popen.stdout
        with log:
            while raw := stream.readline(MAX_LOG_LINE_CHARS):
                cut = not raw.endswith(b"\n")
                skipped = _skip_rest_of_line(stream) if cut else 0
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                line = mask_known(shown_text(line, MAX_LOG_LINE_CHARS), self.secrets)
                if skipped:
                    line += f"...[line cut: {skipped} more bytes]"
                log.write(f"{log_stamp()} {line}\n")
                log.flush()
                self._tail.append(line)
        stream.close()

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
        outcome = stop_process_group(self.pid, self.create_time, grace_s=grace_s, popen=self.popen, token=self.token)
        if self.cgroup is not None:
            stop_cgroup(self.cgroup, grace_s, outcome)
        return outcome


def _skip_rest_of_line(stream: IO[bytes]) -> int:
    """Read and drop what is left of an over-long line; how many bytes that was."""
    skipped = 0
    while chunk := stream.readline(MAX_LOG_LINE_CHARS):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


@dataclass(frozen=True)
class LiveProcess:
    """A running process of an arm, whichever of its episodes started it, and how it was proven to be ours."""

    episode: int
    role: str
    pid: int
    found_by: FoundBy


def live_processes(started: Iterable[tuple[int, StartedProcess]]) -> list[LiveProcess]:
    """Every live process the private record accounts for (`started`: episode number and what was started for it),
    each still carrying its evidence: the recorded leader (same create time) holding its owner token or in its
    cgroup, the other holders of a recorded owner token (orphans, reparented or out of their group), and the members
    of a recorded cgroup that still carries its marker (those that also scrubbed their environment). The supervising
    run has no token: the record's pid and create time are its evidence. One environment scan serves all."""
    records = list(started)
    by_hash = _token_holders({record.token_hash for _, record in records if record.token_hash})
    found: dict[int, LiveProcess] = {}
    for episode, record in records:
        for process, how in _accounted(record, by_hash):
            found.setdefault(process.pid, LiveProcess(episode, record.role, process.pid, how))
    return sorted(found.values(), key=lambda live: (live.episode, live.role, live.pid))


def _recorded_cgroup(record: StartedProcess) -> Cgroup | None:
    if record.cgroup is None or record.cgroup_marker is None:
        return None
    return Cgroup.verified(record.cgroup, record.cgroup_marker)


def _recorded_leader(
    record: StartedProcess, holders: list[psutil.Process], cgroup: Cgroup | None
) -> psutil.Process | None:
    """The recorded process itself, when it is still the one started (create time), still carries its evidence, and
    is not one never to be signalled (pid 1, this process, an ancestor: never ours to act on, whatever the record)."""
    leader = verified_process(record.pid, record.create_time)
    if leader is None or signal_refused(leader.pid) is not None:
        return None
    if record.token_hash is None and record.role == SUPERVISOR_ROLE:
        return leader
    if any(holder.pid == leader.pid for holder in holders) or (cgroup is not None and leader.pid in cgroup.pids()):
        return leader
    return None


def _accounted(
    record: StartedProcess, by_hash: dict[str, list[psutil.Process]]
) -> list[tuple[psutil.Process, FoundBy]]:
    found: list[tuple[psutil.Process, FoundBy]] = []
    holders = by_hash.get(record.token_hash or "", [])
    cgroup = _recorded_cgroup(record)
    leader = _recorded_leader(record, holders, cgroup)
    if leader is not None:
        found.append((leader, "recorded"))
    found += [(process, "owner token") for process in holders]
    if cgroup is not None:
        found += [(p, "cgroup") for p in _handles(cgroup.pids()) if _still_running(p)]
    return [(process, how) for process, how in found if signal_refused(process.pid) is None]


def recorded_alive(record: StartedProcess) -> bool:
    """Is the recorded process itself still running, and still ours by its evidence?"""
    holders = _token_holders({record.token_hash}).get(record.token_hash, []) if record.token_hash else []
    return _recorded_leader(record, holders, _recorded_cgroup(record)) is not None


def terminate_started(record: StartedProcess) -> bool:
    """SIGTERM the recorded process itself (a supervising run, asked to finalise), when it is still ours; whether it
    was sent."""
    holders = _token_holders({record.token_hash}).get(record.token_hash, []) if record.token_hash else []
    process = _recorded_leader(record, holders, _recorded_cgroup(record))
    if process is None:
        return False
    _send(process, signal.SIGTERM)
    return True


def _token_holders(hashes: set[str], variable: str = OWNER_TOKEN_ENV) -> dict[str, list[psutil.Process]]:
    """Running processes whose environment has `variable` set to a token of one of these hashes, by hash."""
    holders: dict[str, list[psutil.Process]] = {}
    if not hashes:
        return holders
    for process in psutil.process_iter():
        try:
            token = process.environ().get(variable)
        except (psutil.Error, OSError):
            continue
        if token and (hashed := token_hash(token)) in hashes and _still_running(process):
            holders.setdefault(hashed, []).append(process)
    return holders


def stop_started(record: StartedProcess, grace_s: float = DEFAULT_STOP_GRACE_S) -> StopOutcome:
    """Stop one process the private record names and everything it left, each only while it carries the evidence:
    its group (the leader holding its token or in its cgroup), its token's holders, its marked cgroup."""
    by_hash = _token_holders({record.token_hash}) if record.token_hash else {}
    holders = by_hash.get(record.token_hash or "", [])
    cgroup = _recorded_cgroup(record)
    leader = _recorded_leader(record, holders, cgroup)
    outcome = StopOutcome(was_running=False)
    if leader is not None:
        outcome = _stop_group(leader, record.create_time, grace_s, None)
    _stop_listed([p for p in holders if _still_running(p)], grace_s, outcome)
    if cgroup is not None:
        stop_cgroup(cgroup, grace_s, outcome)
    return outcome


class AdoptedOrphans:
    """On a host without cgroups: this process as a subreaper, so that what the arms' children leave behind when they
    exit is re-parented here instead of to init. Such orphans are reaped as they exit (nobody else will) and stopped
    when the run ends: everything below this process was started by it. A direct child that is not one of ours
    (`ours`, the children started through Child) counts as adopted only once seen on two polls, so a child that is
    being started at this instant is never taken for one."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and become_subreaper()
        self._seen: set[int] = set()

    def poll(self, ours: set[int]) -> None:
        if not self.enabled:
            return
        for child in psutil.Process().children():
            if child.pid in ours:
                self._seen.discard(child.pid)
            elif child.pid in self._seen and not _still_running(child):
                self._reap(child.pid)
            else:
                self._seen.add(child.pid)

    def _reap(self, pid: int) -> None:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self._seen.discard(pid)

    def stop_all(self, ours: set[int], grace_s: float = DEFAULT_STOP_GRACE_S) -> StopOutcome:
        """Stop every live descendant that is not one of ours (call once ours are stopped), then reap them."""
        outcome = StopOutcome(was_running=False)
        if not self.enabled:
            return outcome
        leftovers = [p for p in psutil.Process().children(recursive=True) if p.pid not in ours and _still_running(p)]
        outcome.contained += [p.pid for p in leftovers]
        _stop_listed(leftovers, grace_s, outcome)
        for child in psutil.Process().children():
            if child.pid not in ours and not _still_running(child):
                self._reap(child.pid)
        return outcome
