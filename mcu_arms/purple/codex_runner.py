"""One `codex exec` turn as a subprocess: the command line, the run under a deadline, and what its events said.

The turn runs in its own process group (start_new_session) with stdin from /dev/null and its JSONL events written to
a file, so that a hung codex can neither block the event loop nor hold a pipe open. On timeout (or when the waiting
request is cancelled) only that group is stopped: TERM, a grace period, then KILL, each signal re-checked against the
pid and create time seen at spawn. After EVERY turn, however it ended, what is still left in the group (a command the
model put in the background, a helper server) is stopped too: a turn owns nothing once it is over, and a process left
running would keep using the arm's CPU, files and model quota into the next turns.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil

from mcu_arms.procs import stop_process_group, stop_token_holders

TERM_GRACE_S = 2.0
PROVIDER_NAME = "mcu_arms_provider"
TIMEOUT_RC = 124  # what timeout(1) exits with; keeps "rc=N" a number users can grep
CANCELLED_RC = 128 + signal.SIGTERM  # what a shell reports for a turn stopped by our SIGTERM when it was cancelled
# Set in each turn's environment (inherited by everything it starts): a leftover is only ever signalled when it
# carries this turn's token, so no process this turn did not start can be touched, whatever its pid or group.
TURN_TOKEN_ENV = "MCU_ARMS_CODEX_TURN"
OVERFLOW_MARKERS = ("ran out of room in the model's context window", "context_length_exceeded")


@dataclass(frozen=True)
class CodexCall:
    """Everything that decides one turn's command line."""

    executable: str
    prompt: str
    image: Path
    thread_id: str | None = None
    compact_limit: int | None = None
    model: str | None = None
    provider_base_url: str | None = None
    provider_wire_api: str | None = None
    provider_env_key: str | None = None  # the NAME of the variable holding the provider's API key, never the key

    def argv(self) -> list[str]:
        """`codex exec [options] [resume ID] -i FRAME -- PROMPT`.

        Options go before `resume`: the sandbox and `-c` overrides are not accepted after it. `-i` takes several
        values, hence the `--` that ends it.
        """
        options = ["--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
        if self.compact_limit is not None:
            options += ["-c", f"model_auto_compact_token_limit={self.compact_limit}"]
        if self.model:
            options += ["-m", self.model]
        options += self._provider_overrides()
        resume = ["resume", self.thread_id] if self.thread_id else []
        return [self.executable, "exec", *options, *resume, "-i", str(self.image), "--", self.prompt]

    def _provider_overrides(self) -> list[str]:
        if not self.provider_base_url:
            return []
        table = f"model_providers.{PROVIDER_NAME}"
        overrides = [f"{table}.name={json.dumps(PROVIDER_NAME)}", f"{table}.base_url={json.dumps(self.provider_base_url)}"]
        if self.provider_wire_api:
            overrides.append(f"{table}.wire_api={json.dumps(self.provider_wire_api)}")
        if self.provider_env_key:
            overrides.append(f"{table}.env_key={json.dumps(self.provider_env_key)}")
        overrides.append(f"model_provider={json.dumps(PROVIDER_NAME)}")
        return [part for override in overrides for part in ("-c", override)]

    def shown(self) -> str:
        """The command line for a log: the prompt elided, credentials in a provider URL masked."""
        shown = []
        for part in self.argv()[:-1]:
            if self.provider_base_url and self.provider_base_url in part:
                part = part.replace(self.provider_base_url, redact_url(self.provider_base_url))
            shown.append(part)
        return " ".join(shown + [f"<prompt {len(self.prompt.encode())} bytes>"])


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


@dataclass
class TurnRun:
    """What happened to one codex subprocess."""

    rc: int
    timed_out: bool
    latency_s: float
    thread_id: str | None = None
    completed: bool = False
    failure: str | None = None
    events: int = 0
    unparsed_lines: int = 0
    stopped: list[str] = field(default_factory=list)
    leftovers_stopped: int = 0  # processes still in the group after codex itself had exited

    @property
    def overflowed(self) -> bool:
        return self.failure is not None and any(marker in self.failure for marker in OVERFLOW_MARKERS)


async def run_codex(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, events_path: Path, stderr_path: Path
) -> TurnRun:
    """Run one codex turn to completion or to its deadline; never raises for what the subprocess does.

    Cancelled (the green gave up on this step, or the server is shutting down), it stops the turn's group before
    letting the cancellation through: a turn nobody waits for must not go on writing into the workdir. A plain Popen
    waited on in a thread (not an asyncio subprocess): the stop reaps it through its handle and keeps its exit code.
    """
    started = time.monotonic()
    token = uuid.uuid4().hex
    with open(events_path, "wb") as events_file, open(stderr_path, "wb") as stderr_file:
        process = subprocess.Popen(
            argv,
            cwd=str(cwd),
            env={**env, TURN_TOKEN_ENV: token},
            stdin=subprocess.DEVNULL,
            stdout=events_file,
            stderr=stderr_file,
            start_new_session=True,
        )
    create_time = _create_time(process.pid)
    timed_out = False
    try:
        rc = await asyncio.wait_for(asyncio.to_thread(process.wait), timeout=timeout_s)
    except asyncio.TimeoutError:
        timed_out = True
    except asyncio.CancelledError:
        await asyncio.shield(stop_turn(process, create_time, token))
        raise
    stopped, leftovers = await stop_turn(process, create_time, token)
    run = TurnRun(
        rc=TIMEOUT_RC if timed_out else rc,
        timed_out=timed_out,
        latency_s=time.monotonic() - started,
        stopped=stopped,
        leftovers_stopped=leftovers,
    )
    _read_events(events_path, run)
    return run


def _create_time(pid: int) -> float | None:
    """Recorded right after spawn, so the stop below can prove the pid is still the turn's."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


async def stop_turn(process: subprocess.Popen, create_time: float | None, token: str) -> tuple[list[str], int]:
    """Stop what is left of a turn, off the event loop: its process group while codex still runs (the supervisor's
    verified stop), then whatever is still in the group after codex exited. Returns (what was done, leftovers)."""
    return await asyncio.to_thread(_stop_turn, process, create_time, token)


def _stop_turn(process: subprocess.Popen, create_time: float | None, token: str) -> tuple[list[str], int]:
    done: list[str] = []
    if process.poll() is None:
        outcome = stop_process_group(process.pid, create_time, grace_s=TERM_GRACE_S, popen=process)
        if outcome.was_running:
            done.append(f"SIGTERM group {process.pid}: {outcome.terminated} exited, {outcome.killed} killed")
    leftovers = stop_token_holders(token, variable=TURN_TOKEN_ENV, grace_s=TERM_GRACE_S)
    found = leftovers.terminated + leftovers.killed + len(leftovers.survivors)
    if found:
        done.append(f"{found} process(es) the turn left behind stopped ({leftovers.killed} killed)")
    return done, found


def _read_events(path: Path, run: TurnRun) -> None:
    """thread.started gives the thread; turn.completed / turn.failed / error say how the turn ended."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            run.unparsed_lines += 1
            continue
        if not isinstance(event, dict):
            run.unparsed_lines += 1
            continue
        run.events += 1
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            run.thread_id = event["thread_id"]
        elif kind == "turn.completed":
            run.completed = True
        elif kind in ("turn.failed", "error"):
            run.failure = _error_message(event) or run.failure


def _error_message(event: dict) -> str | None:
    error = event.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(event.get("message"), str):
        return event["message"]
    return None


def find_rollout(codex_home: Path, thread_id: str) -> Path | None:
    """The thread's rollout file: sessions/YYYY/MM/DD/rollout-<timestamp>-<thread id>.jsonl."""
    matches = sorted((codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return matches[-1] if matches else None


def count_compactions(rollout: Path | None) -> int:
    """Codex's --json stream shows no compaction; the rollout gains a `compacted` record for each one."""
    if rollout is None or not rollout.exists():
        return 0
    count = 0
    with open(rollout, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"compacted"' not in line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("type") == "compacted":
                count += 1
    return count


async def codex_version(executable: str, env: dict[str, str], timeout_s: float = 30.0) -> str:
    """`codex --version`, or why it could not be read (the report says which)."""
    try:
        process = await asyncio.create_subprocess_exec(
            executable,
            "--version",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as error:
        return f"unavailable: {error}"
    create_time = _create_time(process.pid)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=timeout_s)
    except asyncio.TimeoutError:
        await asyncio.to_thread(stop_process_group, process.pid, create_time, grace_s=TERM_GRACE_S)
        await process.wait()
        return f"unavailable: `{executable} --version` did not answer in {timeout_s:.0f} s"
    text = output.decode(errors="replace").strip()
    if process.returncode != 0:
        return f"unavailable: `{executable} --version` exited {process.returncode}: {text[:200]}"
    return text
