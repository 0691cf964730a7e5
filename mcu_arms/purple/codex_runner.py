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
from typing import Literal

import psutil

from mcu_arms.contracts.agent_report import TokenUsage
from mcu_arms.contracts.settings import CODEX_UNBOUNDED_TOKENS, compacts
from mcu_arms.process.procs import stop_process_group, stop_token_holders

TERM_GRACE_S = 2.0
PROVIDER_NAME = "mcu_arms_provider"
TIMEOUT_RC = 124  # what timeout(1) exits with; keeps "rc=N" a number users can grep
CANCELLED_RC = 128 + signal.SIGTERM  # what a shell reports for a turn stopped by our SIGTERM when it was cancelled
# Set in each turn's environment (inherited by everything it starts): a leftover is only ever signalled when it
# carries this turn's token, so no process this turn did not start can be touched, whatever its pid or group.
TURN_TOKEN_ENV = "MCU_ARMS_CODEX_TURN"
OVERFLOW_MARKERS = ("ran out of room in the model's context window", "context_length_exceeded")
# `exec resume` of a thread codex no longer has: rc 1 and "Error: thread/resume: thread/resume failed: no rollout
# found for thread id ... (code -32600)" on stderr, before any request (codex-cli 0.171).
RESUME_REFUSED_MARKER = "thread/resume failed"
ERROR_LINE_PREFIXES = ("Error", "ERROR:")
# A project AGENTS.md (read from the git root down to the turn's directory, which sits in the user's checkout)
# would reach the model ahead of every turn; 0 bytes of project docs keeps it out.
BLOCK_PROJECT_DOCS = "project_doc_max_bytes=0"
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def codex_overrides(compact_limit: int | None, context_window: int) -> list[str]:
    """The `-c` settings of every turn: no project docs, and the window and limit that make codex compact exactly
    where the arm says (an arm that does not compact tells it no bound of its own: see CODEX_UNBOUNDED_TOKENS)."""
    overrides = [BLOCK_PROJECT_DOCS]
    if compact_limit is None:
        return overrides
    if compacts(compact_limit, context_window):
        window, limit = context_window, compact_limit
    else:
        window = limit = CODEX_UNBOUNDED_TOKENS
    return overrides + [f"model_context_window={window}", f"model_auto_compact_token_limit={limit}"]


def provider_table(base_url: str, env_key: str | None) -> dict[str, str]:
    """The provider as codex's config file declares it (written by isolation.codex_home.write_codex_config)."""
    table = {"name": PROVIDER_NAME, "base_url": base_url, "wire_api": "responses"}
    if env_key:
        table["env_key"] = env_key  # the NAME of the variable holding the key; codex reads the key from it
    return table


@dataclass(frozen=True)
class CodexCall:
    """Everything that decides one turn's command line. The provider is not here: it reaches codex through the
    home's private config file, so that no credential in its URL is ever on a command line."""

    executable: str
    prompt: str
    image: Path
    thread_id: str | None = None
    overrides: tuple[str, ...] = ()
    model: str | None = None

    def argv(self) -> list[str]:
        """`codex exec [options] [resume ID] -i FRAME -- PROMPT`.

        Options go before `resume`: the sandbox and `-c` overrides are not accepted after it (and a resumed turn
        without its sandbox option is read-only). `-i` takes several values, hence the `--` that ends it.
        """
        options = ["--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
        for override in self.overrides:
            options += ["-c", override]
        if self.model:
            options += ["-m", self.model]
        resume = ["resume", self.thread_id] if self.thread_id else []
        return [self.executable, "exec", *options, *resume, "-i", str(self.image), "--", self.prompt]

    def shown(self) -> str:
        """The command line for a log, the prompt elided."""
        return " ".join(self.argv()[:-1] + [f"<prompt {len(self.prompt.encode())} bytes>"])


@dataclass
class TurnRun:
    """What happened to one codex subprocess."""

    rc: int
    timed_out: bool
    latency_s: float
    thread_id: str | None = None
    completed: bool = False
    failure: str | None = None  # codex's own words: turn.failed's message, else the last error event's
    error_line: str | None = None  # the first stderr line starting with "Error" (startup failures write no JSON)
    thread_usage: TokenUsage | None = None  # turn.completed's usage: the THREAD's running total
    events: int = 0
    unparsed_lines: int = 0
    stopped: list[str] = field(default_factory=list)
    leftovers_stopped: int = 0  # processes still in the group after codex itself had exited

    @property
    def reason(self) -> str | None:
        """Why codex says the turn failed: its event text, else its stderr error line."""
        return self.failure or self.error_line

    @property
    def overflowed(self) -> bool:
        return self.failure is not None and any(marker in self.failure for marker in OVERFLOW_MARKERS)

    @property
    def resume_refused(self) -> bool:
        """codex no longer has the thread: it failed before starting one (a dropped session, not a model failure)."""
        return self.thread_id is None and RESUME_REFUSED_MARKER in (self.reason or "")


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
    except TimeoutError:
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
    run.error_line = codex_error_line(stderr_path)
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
    failed = last_error = None
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
            run.thread_usage = token_usage(event.get("usage"))
        elif kind == "turn.failed":
            failed = _error_message(event)
        elif kind == "error":
            last_error = _error_message(event) or last_error
    run.failure = failed or last_error


def token_usage(usage: object) -> TokenUsage | None:
    if not isinstance(usage, dict):
        return None
    counts = {key: usage[key] for key in USAGE_KEYS if isinstance(usage.get(key), int)}
    return TokenUsage(**counts)


def codex_error_line(stderr_path: Path) -> str | None:
    """Codex's own error line: the first stderr line starting with "Error" (a startup failure, such as a config it
    refuses or a thread it cannot resume, prints one and more lines after it; the last line says nothing)."""
    try:
        with open(stderr_path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith(ERROR_LINE_PREFIXES):
                    return line.strip()[:500]
    except FileNotFoundError:
        return None
    return None


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


# Rebuilding request sizes from a rollout (measured with codex-cli 0.171 against a mock that logged every body, to
# within 0.2 %): a request carries the thread's history as its `input` (the rollout's response_item records, less
# the one key codex keeps to itself) inside a small envelope; a compaction request carries the history plus
# codex's compaction prompt, and the rollout's `compacted` record then replaces the history. For a model codex
# knows, its tools and instructions travel in the history (an `additional_tools` item, a developer message); for
# one it does not (a local model's name) they travel as the request's top-level `tools` (empty in a compaction
# request) and a developer message, neither of which the rollout records: constants of this codex version, measured.
ROLLOUT_ONLY_KEYS = ("internal_chat_message_metadata_passthrough",)
REQUEST_ENVELOPE_BYTES = 1_500  # model, reasoning, include, prompt_cache_key, client_metadata ... (1,482 measured)
UNRECORDED_TOOLS_BYTES = 18_200  # 18,198 measured with codex-cli 0.171
UNRECORDED_INSTRUCTIONS_BYTES = 17_470
COMPACTION_PROMPT_BYTES = 511
OUTPUT_ITEM_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"})
CODEX_EFFECTIVE_WINDOW_PERCENT = 95  # task_started.model_context_window is this share of the window in force


@dataclass(frozen=True)
class ModelRequest:
    kind: Literal["turn", "compaction"]
    body_bytes: int


@dataclass
class RolloutReading:
    """What a thread's rollout says: the requests sent since an offset, and the thread's state at its end."""

    requests: list[ModelRequest] = field(default_factory=list)
    compactions: int = 0  # `compacted` records in the whole thread
    last_total_tokens: int | None = None  # the last response's total_tokens: what codex holds to its limit
    codex_window: int | None = None  # the window codex used (the one it was told, clamped to its model's largest)


def _item_bytes(item: dict) -> int:
    sent = {key: value for key, value in item.items() if key not in ROLLOUT_ONLY_KEYS}
    return len(json.dumps(sent, separators=(",", ":"), ensure_ascii=False).encode())


def _is_output(item: dict) -> bool:
    return item.get("type") in OUTPUT_ITEM_TYPES or (item.get("type") == "message" and item.get("role") == "assistant")


def _rollout_records(path: Path) -> list[tuple[int, dict]]:
    """(byte offset, record) for each line of a rollout; a torn last line (codex killed mid-write) is skipped."""
    records = []
    offset = 0
    with open(path, "rb") as lines:
        for raw in lines:
            start, offset = offset, offset + len(raw)
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(record, dict) and isinstance(record.get("payload"), dict):
                records.append((start, record))
    return records


def read_rollout(path: Path | None, since: int = 0) -> RolloutReading:
    """The requests codex sent from byte `since` of the thread's rollout on (a turn's), rebuilt from the history it
    re-sends with each one, and where the thread stands: compactions, the last reported total, codex's window.

    Codex reports no byte counts anywhere; this is what its requests carried, as the mock server received them.
    """
    reading = RolloutReading()
    if path is None or not path.exists():
        return reading
    records = _rollout_records(path)
    summaries = set()  # the compaction replies: the response item right before each `compacted` record
    last_item = None
    for index, (_, record) in enumerate(records):
        if record.get("type") == "response_item":
            last_item = index
        elif record.get("type") == "compacted" and last_item is not None:
            if _is_output(records[last_item][1]["payload"]):
                summaries.add(last_item)
    history: list[int] = []
    tools_in_history = False
    pending = False  # input was added since the last response: the next response answers a request with it all

    def send(kind: Literal["turn", "compaction"], at: int, extra: int = 0) -> None:
        if at >= since:
            envelope = REQUEST_ENVELOPE_BYTES
            if not tools_in_history:
                envelope += UNRECORDED_INSTRUCTIONS_BYTES + (UNRECORDED_TOOLS_BYTES if kind == "turn" else 0)
            reading.requests.append(ModelRequest(kind, envelope + sum(history) + extra))

    for index, (offset, record) in enumerate(records):
        kind, payload = record.get("type"), record["payload"]
        if kind == "response_item":
            if index in summaries:
                send("compaction", offset, COMPACTION_PROMPT_BYTES)
                pending = False
                continue
            if _is_output(payload):
                if pending:
                    send("turn", offset)
                pending = False
            else:
                pending = True
            history.append(_item_bytes(payload))
            tools_in_history = tools_in_history or payload.get("type") == "additional_tools"
        elif kind == "compacted":
            reading.compactions += 1
            replacement = payload.get("replacement_history")
            kept = [item for item in replacement if isinstance(item, dict)] if isinstance(replacement, list) else []
            history = [_item_bytes(item) for item in kept]
            tools_in_history = any(item.get("type") == "additional_tools" for item in kept)
            pending = True
        elif kind == "token_usage_record":
            total = (payload.get("usage") or {}).get("total_tokens")
            reading.last_total_tokens = total if isinstance(total, int) else reading.last_total_tokens
        elif kind == "event_msg" and payload.get("type") == "task_started":
            window = payload.get("model_context_window")
            if isinstance(window, int):
                reading.codex_window = round(window * 100 / CODEX_EFFECTIVE_WINDOW_PERCENT)
    end = path.stat().st_size
    if pending and end > since:  # a request that got no answer (a failed or stopped turn)
        send("turn", end)
    return reading


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
    except TimeoutError:
        await asyncio.to_thread(stop_process_group, process.pid, create_time, grace_s=TERM_GRACE_S)
        await process.wait()
        return f"unavailable: `{executable} --version` did not answer in {timeout_s:.0f} s"
    text = output.decode(errors="replace").strip()
    if process.returncode != 0:
        return f"unavailable: `{executable} --version` exited {process.returncode}: {text[:200]}"
    return text
