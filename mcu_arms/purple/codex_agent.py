"""The codex-driven purple agents: `worldmodel` (keeps a hypothesis graph and world-model documents on disk) and
`prolong` (keeps only logs.txt and its notes).

Each observation is answered from a queue of planned actions; when the queue is empty the agent runs ONE model turn
(`codex exec`, or `codex exec resume` while the session has turns left) that must write actions.json. Memory lives on
the filesystem, not in the conversation, so any unclean turn simply drops the session and the next turn starts cold.
Every failed turn, noop, compaction, overflow and slow or heavy turn is counted in the report and logged to stdout.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
import os
import shutil
import statistics
import string
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcu_arms.contracts.agent_report import (
    AgentSettings,
    ColdStart,
    CompactionInForce,
    EpisodeReport,
    PayloadBasis,
    TokenUsage,
    TurnRecord,
)
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.resources import TEMPLATES_DIR
from mcu_arms.contracts.settings import PAYLOAD_WALL_BYTES, PurpleOptions, compacts
from mcu_arms.contracts.states import TurnOutcome
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.contracts.wire import (
    BUTTON_KEYS,
    CAMERA_KEY,
    CAMERA_LIMIT_DEGREES,
    AckPayload,
    ActionPayload,
    EnvAction,
    InitPayload,
    ObservationPayload,
)
from mcu_arms.isolation.codex_home import CODEX_CONFIG_NAME, audit_codex_home, write_codex_config
from mcu_arms.layout import claim_task_dir
from mcu_arms.process.procs import log_line
from mcu_arms.purple.base import Policy, failure_noop
from mcu_arms.purple.codex_runner import (
    CANCELLED_RC,
    PROVIDER_NAME,
    TERM_GRACE_S,
    CodexCall,
    RolloutReading,
    TurnRun,
    codex_overrides,
    codex_version,
    find_rollout,
    provider_table,
    read_rollout,
    run_codex,
)
from mcu_arms.purple.report_writer import write_reports

CODEX_KINDS = ("worldmodel", "prolong")
ACTIONS_FILE = "actions.json"
LOG_FILE = "logs.txt"
NOTES_FILE = "notes.md"
MAX_ACTIONS_PER_TURN = 64
HISTORY_LINES = 40
LATENCY_JUMP_FACTOR = 3.0
LATENCY_MIN_HISTORY = 3
DEFAULT_SESSION_TURNS = 1
QUANTISED_ENV = "MCU_CAMERA_QUANTISED"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DATA_URL_PREFIX_BYTES = len('{"type":"input_image","image_url":"data:image/png;base64,"}')

_versions: dict[str, str] = {}  # `codex --version`, read once per executable per process


class ActionsFileError(ValueError):
    """actions.json exists but cannot be replayed; the message says what is wrong and where."""


def turn_budget(step_timeout: float) -> float:
    """Seconds a turn may run: the green's step timeout less the time needed to stop codex and answer."""
    return max(0.5, step_timeout - TERM_GRACE_S - min(5.0, 0.1 * step_timeout))


def _button(value: Any, where: str) -> int:
    if type(value) is not int or value not in (0, 1):
        raise ActionsFileError(f"{where} must be 0 or 1, got {json.dumps(value)}")
    return value


def _camera(value: Any, where: str) -> list[float]:
    if not isinstance(value, list) or len(value) != 2:
        raise ActionsFileError(f"{where} must be [pitch, yaw] in degrees, got {json.dumps(value)}")
    degrees = []
    for axis, number in zip(("pitch", "yaw"), value, strict=True):
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise ActionsFileError(f"{where} {axis} must be a finite number, got {json.dumps(number)}")
        if abs(number) > CAMERA_LIMIT_DEGREES:
            raise ActionsFileError(f"{where} {axis} {number} is beyond ±{CAMERA_LIMIT_DEGREES:g} degrees")
        degrees.append(float(number))
    return degrees


def parse_actions(text: str) -> list[EnvAction]:
    """actions.json: a non-empty list of env-format actions; omitted buttons are 0, an omitted camera is [0, 0]."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ActionsFileError(f"not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    if not isinstance(data, list):
        raise ActionsFileError(f"must be a JSON list of actions, got {type(data).__name__}")
    if not data:
        raise ActionsFileError("is an empty list")
    actions = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ActionsFileError(f"action {index} must be an object, got {type(entry).__name__}")
        unknown = sorted(set(entry) - set(BUTTON_KEYS) - {CAMERA_KEY})
        if unknown:
            raise ActionsFileError(f"action {index} has unknown keys {unknown} (allowed: buttons and camera)")
        action: EnvAction = {key: _button(entry.get(key, 0), f"action {index} '{key}'") for key in BUTTON_KEYS}
        action[CAMERA_KEY] = _camera(entry.get(CAMERA_KEY, [0.0, 0.0]), f"action {index} 'camera'")
        actions.append(action)
    return actions


def nearest_surviving_degrees(degrees: float) -> float:
    """The camera value whose quantised move lands nearest the intended angle (MCU_CAMERA_QUANTISED=1 hosts)."""
    from mcu_arms.contracts.camera import SURVIVING_DEGREES

    return min(SURVIVING_DEGREES, key=lambda value: abs(value - degrees))


def describe(action: EnvAction) -> str:
    pressed = [key for key in BUTTON_KEYS if action.get(key)]
    pitch, yaw = action[CAMERA_KEY]
    camera = f" camera=[{pitch:g},{yaw:g}]" if pitch or yaw else ""
    return ("+".join(pressed) or "noop") + camera


def decode_frame(obs: str) -> bytes:
    try:
        data = base64.b64decode(obs, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"observation is not base64: {error}") from None
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("observation is not a PNG")
    return data


def _file_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except FileNotFoundError:
        return 0


def _copy_private(template: Path, target: Path) -> None:
    """Copy a template tree as private as the agent's other files (it becomes the agent's memory): files take this
    process's umask, not the template's modes, and directories are 0700."""
    shutil.copytree(template, target, copy_function=shutil.copyfile)
    for directory in (target, *(path for path in target.rglob("*") if path.is_dir())):
        directory.chmod(0o700)


class CodexPolicy(Policy):
    """One episode of a codex-driven agent, in its own directory under options.output_dir."""

    def __init__(self, kind: str, options: PurpleOptions, environ: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.options = options
        self.environ = dict(os.environ if environ is None else environ)
        self.session_turns = options.session_turns or DEFAULT_SESSION_TURNS
        self.turn_timeout = turn_budget(options.step_timeout)
        self.camera_quantised = self.environ.get(QUANTISED_ENV) == "1"
        self.workdir: Path | None = None
        self.settings: AgentSettings | None = None
        self.episode: EpisodeReport | None = None
        self._queue: deque[tuple[EnvAction, str]] = deque()
        self._task = ""
        self._system_prompt = ""
        self._turn = 0
        self._thread_id: str | None = None
        self._session_index = 0
        self._session_turns_done = 0
        self._frames_in_session = 0
        self._payload_warned_session = -1
        self._compactions_by_thread: dict[str, int] = {}
        self._thread_usage = TokenUsage()  # the current thread's running total, as codex last reported it
        self._last_total_tokens: int | None = None  # the current thread's last response, as its rollout says
        self._drop_thread = False  # the current thread must not be resumed (codex compacted it against the arm)
        self._overrides = codex_overrides(options.compact_limit, options.context_window)
        self._warned: set[str] = set()

    # --- setup -------------------------------------------------------------------------------------------------

    def _check_setup(self) -> tuple[Path, Path, str]:
        if self.kind not in CODEX_KINDS:
            raise UserError(f"'{self.kind}' is not a codex agent kind", key="--agent", allowed=", ".join(CODEX_KINDS))
        if self.options.output_dir is None:
            raise UserError("codex agents need a directory for their memory and reports", key="--output-dir")
        if (self.options.provider_wire_api or self.options.provider_env_key) and not self.options.provider_base_url:
            raise UserError("a provider wire API or key variable needs a provider base URL", key="--provider-base-url")
        if self.options.provider_wire_api not in (None, "responses"):
            raise UserError(
                f"codex no longer speaks wire API '{self.options.provider_wire_api}' "
                "(it exits before sending anything)",
                key="--provider-wire-api",
                allowed="responses",
            )
        key_variable = self.options.provider_env_key
        if key_variable and not self.environ.get(key_variable):
            raise UserError(
                f"the provider's API key variable {key_variable} is not set (or empty) in the purple's environment",
                key="--provider-env-key",
            )
        home = self.environ.get("CODEX_HOME")
        if not home:
            raise UserError(
                "CODEX_HOME is not set: a codex agent runs inside its arm's own home "
                '(eval "$(mcu-arms codex-home ARM)", or let `mcu-arms run` set it)',
                key="CODEX_HOME",
            )
        if not Path(home).is_dir():
            raise UserError(
                f"CODEX_HOME {home} does not exist (build it with `mcu-arms codex-home ARM`)", key="CODEX_HOME"
            )
        executable = shutil.which("codex", path=self.environ.get("PATH"))
        if executable is None:
            raise UserError(
                "the codex CLI is not on PATH: npm install -g @openai/codex, then `codex login`", key="PATH"
            )
        return self.options.output_dir, Path(home), executable

    async def init(self, payload: InitPayload) -> AckPayload:
        output_dir, home, executable = self._check_setup()
        if executable not in _versions:
            _versions[executable] = await codex_version(executable, self.environ)
        version = _versions[executable]
        self.workdir = claim_task_dir(output_dir)
        (self.workdir / "frames").mkdir()
        (self.workdir / "turns").mkdir()
        self._task = payload.text
        if self.kind == "worldmodel":
            _copy_private(TEMPLATES_DIR / "worldmodel_memory", self.workdir / "memory")
        else:
            (self.workdir / NOTES_FILE).write_text(f"# Notes for: {payload.text}\n", encoding="utf-8")
        self._system_prompt = self._render_system_prompt(payload)
        (self.workdir / "system_prompt.md").write_text(self._system_prompt, encoding="utf-8")
        base_url = self.options.provider_base_url
        table = provider_table(base_url, self.options.provider_env_key) if base_url else {}
        provider = PROVIDER_NAME if base_url else None
        config_warning = write_codex_config(home, provider, table, datetime.now(UTC))
        self.settings = AgentSettings(
            kind=self.kind,
            session_turns=self.session_turns,
            compact_limit=self.options.compact_limit,
            step_timeout=self.options.step_timeout,
            turn_timeout=self.turn_timeout,
            model=self.options.model,
            provider_base_url=self.options.provider_base_url,
            provider_wire_api=self.options.provider_wire_api,
            provider_env_key=self.options.provider_env_key,
            camera_quantised=self.camera_quantised,
            codex_executable=executable,
            codex_version=version,
            codex_home=str(home),
            codex_home_audit=audit_codex_home(home),
            context_window=self.options.context_window,
            codex_overrides=self._overrides,
            provider_config=str(home / CODEX_CONFIG_NAME) if base_url else None,
        )
        self.episode = EpisodeReport(
            task_dir=str(self.workdir),
            task=payload.text,
            started_at=iso_seconds(),
        )
        if config_warning:
            self._warn(config_warning)
        if version.startswith("unavailable"):
            self._warn(f"codex version {version}")
        if self.options.compact_limit is None:
            self._warn(
                "no compaction limit given (--compact-limit): codex's own default decides between compacting and "
                "overflowing, which is neither measured nor equal between two runs"
            )
        self._append_log(f"task: {payload.text}")
        self._write_report()
        log_line(
            f"{self.kind} episode in {self.workdir}: codex {version}, session_turns={self.session_turns}, "
            f"compact_limit={self.options.compact_limit}, turn timeout {self.turn_timeout:.1f} s"
        )
        return AckPayload(
            message=f"{self.kind} agent ready ({version}; session_turns {self.session_turns}; "
            f"compact limit {self.options.compact_limit})"
        )

    def _render_system_prompt(self, payload: InitPayload) -> str:
        template = string.Template((TEMPLATES_DIR / f"{self.kind}_system.md").read_text(encoding="utf-8"))
        if self.camera_quantised:
            from mcu_arms.contracts.camera import SURVIVING_DEGREES

            values = ", ".join(f"{value:g}" for value in SURVIVING_DEGREES)
            camera_note = f"This host rounds every camera move to one of these degrees per axis: {values}."
        else:
            camera_note = "Camera moves reach the game as written."
        return template.substitute(
            task=payload.text,
            green_prompt=payload.prompt.strip(),
            button_keys=", ".join(BUTTON_KEYS),
            camera_limit=f"{CAMERA_LIMIT_DEGREES:g}",
            max_actions=MAX_ACTIONS_PER_TURN,
            camera_note=camera_note,
        )

    # --- acting ------------------------------------------------------------------------------------------------

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        if self.episode is None or self.workdir is None:
            return self._noop("no_init", "observation before a successful init")
        self.episode.observations += 1
        if not self._queue:
            try:
                frame = decode_frame(payload.obs)
            except ValueError as error:
                return self._noop("bad_frame", f"step {payload.step}: {error}")
            if not await self._plan(payload.step, frame):
                why = self.episode.turn_records[-1].reason if self.episode.turn_records else None
                return self._noop("failed_turn", f"step {payload.step}: the model turn produced no actions ({why})")
        action, source = self._queue.popleft()
        self.episode.actions_replayed += 1
        self._append_log(f"step {payload.step}: {describe(action)} [{source}]")
        return ActionPayload(action_type="env", action=action)

    def _noop(self, cause: str, reason: str) -> ActionPayload:
        """A noop the green counts as this agent's infrastructure failure, under `cause`."""
        if self.episode is not None:
            self.episode.noops[cause] += 1
            self._append_log(f"noop: {reason}")
            self._write_report()
        return failure_noop(cause, reason)

    async def _plan(self, step: int, frame: bytes) -> bool:
        """Run one model turn and queue what it wrote; False (logged, counted) when it wrote nothing usable.

        A thread that filled a no-compaction arm's window is dropped before codex could compact it, and a resume
        that codex refuses (it no longer has the thread) is a lost session: both are counted, and the step is
        planned from a cold start instead, within the same time budget.
        """
        assert self.episode is not None
        started = time.monotonic()
        cold_start: ColdStart | None = None
        if self._thread_id is not None and self._window_full():
            self.episode.window_full_resets += 1
            log_line(
                f"thread {self._thread_id} reached {self._last_total_tokens} tokens, the limit in force of an arm "
                "that does not compact; dropped before its next turn"
            )
            self._end_session(clean=False)
            cold_start = "window_full"
        run, actions = await self._run_turn(step, frame, self.turn_timeout, cold_start)
        if run.resume_refused:
            self.episode.sessions_lost += 1
            self._end_session(clean=False)
            remaining = self.turn_timeout - (time.monotonic() - started)
            run, actions = await self._run_turn(step, frame, max(remaining, TERM_GRACE_S), "session_lost")
        if actions and not self._drop_thread:
            self._session_turns_done += 1
            if self._session_turns_done >= self.session_turns:
                self._end_session(clean=True)
        else:
            self._end_session(clean=False)
        self._write_report()
        return bool(actions)

    def _window_full(self) -> bool:
        """Whether the current thread's last response reached the cold-start point of an arm that does not compact."""
        assert self.episode is not None
        limit = self.options.compact_limit
        if limit is None or self._last_total_tokens is None or compacts(limit, self.options.context_window):
            return False
        in_force = CompactionInForce.of(limit, self.options.context_window, self.episode.codex_window)
        return in_force.cold_start_at is not None and self._last_total_tokens >= in_force.cold_start_at

    async def _run_turn(
        self, step: int, frame: bytes, timeout_s: float, cold_start: ColdStart | None
    ) -> tuple[TurnRun, list[EnvAction]]:
        """One codex process: run, read its events and its thread's rollout, record and count it."""
        assert self.workdir is not None and self.episode is not None and self.settings is not None
        self._turn += 1
        turn = self._turn
        turn_dir = self.workdir / "turns" / f"turn_{turn:04d}"
        turn_dir.mkdir()
        frame_path = self.workdir / "frames" / f"step_{step}.png"
        frame_path.write_bytes(frame)
        resumed = self._thread_id is not None
        prompt = self._prompt(step, frame_path, resumed)
        (turn_dir / "prompt.md").write_text(prompt, encoding="utf-8")
        home = Path(self.settings.codex_home)
        rollout_before = _file_size(find_rollout(home, self._thread_id)) if self._thread_id else 0
        actions_path = self.workdir / ACTIONS_FILE
        actions_path.unlink(missing_ok=True)
        call = CodexCall(
            executable=self.settings.codex_executable,
            prompt=prompt,
            image=frame_path,
            thread_id=self._thread_id,
            overrides=tuple(self._overrides),
            model=self.options.model,
        )
        log_line(f"turn {turn} step {step} ({'resume' if resumed else 'new session'}): {call.shown()}")
        try:
            run = await run_codex(
                call.argv(),
                cwd=self.workdir,
                env=self.environ,
                timeout_s=timeout_s,
                events_path=turn_dir / "events.jsonl",
                stderr_path=turn_dir / "stderr.txt",
            )
        except asyncio.CancelledError:
            self._cancelled(turn, step)
            raise
        self.episode.turns += 1
        if run.leftovers_stopped:
            self._count_leftovers(turn, run)
        if run.thread_id and run.thread_id != self._thread_id:
            if resumed:
                self._warn(f"turn {turn}: resuming {self._thread_id} started a new thread {run.thread_id}")
            self._start_session(run.thread_id)
        if run.thread_id or resumed:
            self._frames_in_session += 1
        rollout = find_rollout(home, self._thread_id) if self._thread_id else None
        reading = read_rollout(rollout, since=rollout_before if resumed else 0)
        compactions = self._count_new_compactions(reading)
        self._learn_window(reading)
        self._last_total_tokens = reading.last_total_tokens
        usage = self._usage(run)
        if actions_path.exists():
            shutil.move(str(actions_path), str(turn_dir / ACTIONS_FILE))
        outcome, category, reason, actions = self._judge(run, turn_dir / ACTIONS_FILE, turn_dir / "stderr.txt")
        payload_bytes, basis = self._payload(run, reading, rollout, prompt, frame)
        record = TurnRecord(
            turn=turn,
            step=step,
            session=self._session_index,
            thread_id=self._thread_id,
            resumed=resumed,
            outcome=outcome,
            rc=run.rc,
            reason=reason,
            latency_s=round(run.latency_s, 3),
            prompt_bytes=len(prompt.encode()),
            frame_bytes=len(frame),
            rollout_bytes_before=rollout_before,
            rollout_bytes_after=_file_size(rollout),
            payload_bytes=payload_bytes,
            payload_basis=basis,
            requests=len(reading.requests),
            compaction_requests=sum(1 for request in reading.requests if request.kind == "compaction"),
            request_bytes=sum(request.body_bytes for request in reading.requests),
            usage=usage,
            thread_usage=run.thread_usage,
            last_total_tokens=reading.last_total_tokens,
            cold_start=cold_start,
            frames_in_session=self._frames_in_session,
            actions_queued=len(actions),
            compactions_in_thread=compactions,
        )
        log_line(
            f"turn {turn} {outcome} in {run.latency_s:.1f} s; payload {record.payload_bytes / 1e6:.2f} MB in "
            f"{record.requests} request(s); frames in session {self._frames_in_session}; {len(actions)} actions"
        )
        self._check_cost(record)
        self.episode.turn_records.append(record)
        if actions:
            self._queue.extend((action, f"turn {turn} {i + 1}/{len(actions)}") for i, action in enumerate(actions))
            self._append_log(f"turn {turn} at step {step}: {len(actions)} actions planned ({run.latency_s:.1f} s)")
        else:
            self.episode.failed_turns_by_rc[str(run.rc)] += 1
            self.episode.failed_turns_by_reason[category] += 1
            if outcome == "overflow":
                self.episode.overflow_resets += 1
            log_line(f"wrote no actions.json (rc={run.rc}); {reason}")
            self._append_log(f"turn {turn} at step {step} failed (rc={run.rc}): {reason}")
        return run, actions

    def _usage(self, run: TurnRun) -> TokenUsage | None:
        """This turn's tokens: codex reports the thread's running total, carried across `exec resume` processes."""
        assert self.episode is not None
        if run.thread_usage is None:
            return None
        usage = run.thread_usage.minus(self._thread_usage)
        self._thread_usage = run.thread_usage
        self.episode.tokens = self.episode.tokens.plus(usage)
        return usage

    def _payload(
        self, run: TurnRun, reading: RolloutReading, rollout: Path | None, prompt: str, frame: bytes
    ) -> tuple[int, PayloadBasis]:
        """The largest request the turn sent, rebuilt from the rollout; a lower bound (this prompt and frame) when
        codex ran a thread whose rollout cannot be read; 0 when codex sent nothing (it failed before a thread)."""
        if reading.requests:
            return max(request.body_bytes for request in reading.requests), "rollout"
        if rollout is None and run.thread_id is not None:
            self._warn_once(
                "no_rollout",
                f"codex ran thread {run.thread_id} but its rollout is not under the home's sessions/: payload_bytes "
                "is a lower bound (this prompt and frame) from here on",
            )
            return len(prompt.encode()) + DATA_URL_PREFIX_BYTES + 4 * math.ceil(len(frame) / 3), "lower_bound"
        return 0, "rollout"

    def _learn_window(self, reading: RolloutReading) -> None:
        """The window codex actually used (it clamps the one it is told to its model's largest), and loud when that
        moves the limit in force away from the plan's."""
        assert self.episode is not None
        if reading.codex_window is None or reading.codex_window == self.episode.codex_window:
            return
        self.episode.codex_window = reading.codex_window
        limit = self.options.compact_limit
        if limit is None:
            return
        in_force = CompactionInForce.of(limit, self.options.context_window, reading.codex_window)
        if in_force.compact and in_force.codex_compacts_at != limit:
            self._warn_once(
                "window_clamped",
                f"codex uses a window of {reading.codex_window} tokens (told {self.options.context_window}): it "
                f"compacts at {in_force.codex_compacts_at}, not at the stated limit {limit}",
            )
        elif not in_force.compact and in_force.cold_start_at != self.options.context_window:
            self._warn_once(
                "window_clamped",
                f"codex caps its window at {reading.codex_window} tokens and compacts at {in_force.codex_compacts_at} "
                f"whatever it is told: threads are dropped at {in_force.cold_start_at} tokens, below the stated "
                f"window {self.options.context_window}",
            )

    def _cancelled(self, turn: int, step: int) -> None:
        """The request waiting on this turn was cancelled (superseded or shutdown); run_codex stopped its group."""
        assert self.episode is not None
        self.episode.turns += 1
        self.episode.failed_turns_by_rc[str(CANCELLED_RC)] += 1
        self.episode.failed_turns_by_reason["cancelled"] += 1
        reason = "cancelled: its request gave way (a newer observation, or shutdown); its group was stopped"
        log_line(f"wrote no actions.json (rc={CANCELLED_RC}); {reason}")
        self._append_log(f"turn {turn} at step {step} cancelled: {reason}")
        self._end_session(clean=False)
        self._write_report()

    def _count_leftovers(self, turn: int, run: TurnRun) -> None:
        assert self.episode is not None
        if not self.episode.leftover_processes_stopped:
            self._warn(
                f"turn {turn} left {run.leftovers_stopped} process(es) running in its group after codex exited; "
                "they were stopped (every later case is counted in leftover_processes_stopped)"
            )
        self.episode.leftover_processes_stopped += run.leftovers_stopped
        log_line(f"turn {turn}: {'; '.join(run.stopped)}")

    def _judge(
        self, run: TurnRun, actions_path: Path, stderr_path: Path
    ) -> tuple[TurnOutcome, str, str | None, list[EnvAction]]:
        """(outcome, failure category, reason, actions) for a finished turn."""
        if run.timed_out:
            stopped = "; ".join(run.stopped) or "it had exited"
            return "timeout", "timeout", f"timed out after {self.turn_timeout:.1f} s ({stopped})", []
        if run.overflowed:
            return (
                "overflow",
                "overflow",
                f"context window overflow ({run.failure}); session dropped, next turn starts cold",
                [],
            )
        if run.resume_refused:
            return "failed", "session_lost", f"session lost ({run.reason}); the step is planned from a cold start", []
        if run.rc != 0:
            detail = run.reason or f"no error event and no Error line on stderr (see {stderr_path})"
            return "failed", "codex_error", f"codex failed: {detail}", []
        if not actions_path.exists():
            return "failed", "no_file", "codex exited cleanly without writing it", []
        try:
            actions = parse_actions(actions_path.read_text(encoding="utf-8", errors="replace"))
        except ActionsFileError as error:
            return "failed", "invalid_file", f"actions.json unusable: {error}", []
        if len(actions) > MAX_ACTIONS_PER_TURN:
            assert self.episode is not None
            self.episode.actions_truncated += len(actions) - MAX_ACTIONS_PER_TURN
            self._warn(
                f"turn {self._turn}: {len(actions)} actions planned; only the first {MAX_ACTIONS_PER_TURN} are replayed"
            )
            actions = actions[:MAX_ACTIONS_PER_TURN]
        if self.camera_quantised:
            actions = [self._compensate(action) for action in actions]
        return "ok", "", None, actions

    def _compensate(self, action: EnvAction) -> EnvAction:
        pitch, yaw = action[CAMERA_KEY]
        sent = [nearest_surviving_degrees(pitch), nearest_surviving_degrees(yaw)]
        if sent != [pitch, yaw]:
            assert self.episode is not None
            self.episode.camera_compensated += 1
        return {**action, CAMERA_KEY: sent}

    # --- sessions and costs ------------------------------------------------------------------------------------

    def _start_session(self, thread_id: str) -> None:
        assert self.episode is not None
        self._thread_id = thread_id
        self._session_index += 1
        self._session_turns_done = 0
        self._frames_in_session = 0
        self._thread_usage = TokenUsage()
        self._last_total_tokens = None
        self._drop_thread = False
        self.episode.sessions_started += 1

    def _end_session(self, *, clean: bool) -> None:
        """Drop the thread: after its last turn (clean), or after any unclean ending (memory is on disk)."""
        if self._thread_id is None:
            return
        assert self.episode is not None
        if clean:
            self.episode.sessions_completed += 1
        else:
            self.episode.sessions_discarded += 1
            log_line(f"session {self._session_index} (thread {self._thread_id}) discarded; the next turn starts cold")
        self._thread_id = None

    def _count_new_compactions(self, reading: RolloutReading) -> int:
        """New `compacted` records in the thread; in an arm that does not compact, each one is loud and its thread
        is dropped after this turn (codex compacted mid-turn, at its own cap, which it cannot be told to lift)."""
        if self._thread_id is None:
            return 0
        assert self.episode is not None
        total = reading.compactions
        new = total - self._compactions_by_thread.get(self._thread_id, 0)
        self._compactions_by_thread[self._thread_id] = total
        if new > 0:
            self.episode.compactions += new
            log_line(f"turn {self._turn}: {new} compaction(s) in thread {self._thread_id} ({total} so far)")
            limit = self.options.compact_limit
            if limit is not None and not compacts(limit, self.options.context_window):
                self.episode.unwanted_compactions += new
                self._drop_thread = True
                self._warn_once(
                    "unwanted_compaction",
                    f"turn {self._turn}: codex compacted a thread of an arm that does not compact (a response inside "
                    "the turn passed its own cap, 90 % of its model's largest window); such threads are dropped "
                    "after the turn (counted in unwanted_compactions)",
                )
        return total

    def _check_cost(self, record: TurnRecord) -> None:
        """Loud on what stalls arms silently: a session payload past ~5 MB, or a turn far slower than usual."""
        assert self.episode is not None
        if record.payload_bytes > PAYLOAD_WALL_BYTES and self._payload_warned_session != record.session:
            self._payload_warned_session = record.session
            self._warn(
                f"turn {record.turn}: session payload {record.payload_bytes / 1e6:.2f} MB "
                f"is past ~{PAYLOAD_WALL_BYTES / 1e6:g} MB; "
                "turns beyond it have taken a flat ~600 s (lower session_turns)"
            )
        earlier = [previous.latency_s for previous in self.episode.turn_records]
        if len(earlier) >= LATENCY_MIN_HISTORY:
            median = statistics.median(earlier)
            if median > 0 and record.latency_s > LATENCY_JUMP_FACTOR * median:
                self._warn(
                    f"turn {record.turn}: latency {record.latency_s:.1f} s is over {LATENCY_JUMP_FACTOR:g}x the "
                    f"running median {median:.1f} s (payload {record.payload_bytes / 1e6:.2f} MB)"
                )

    def _warn(self, message: str) -> None:
        assert self.episode is not None
        self.episode.warnings.append(message)
        log_line(f"WARNING {message}")

    def _warn_once(self, topic: str, message: str) -> None:
        if topic not in self._warned:
            self._warned.add(topic)
            self._warn(message)

    # --- files -------------------------------------------------------------------------------------------------

    def _prompt(self, step: int, frame_path: Path, resumed: bool) -> str:
        assert self.workdir is not None
        history = self._history()
        if resumed:
            where = f"Session turn {self._session_turns_done + 1} of {self.session_turns}."
        else:
            where = "This is a fresh session: what earlier turns learned is in logs.txt and your files on disk."
        memory = (
            "Read memory/ as you need it; record what this frame confirms or refutes in memory/hypotheses.json and "
            "the documents under memory/world_model/ and memory/procedures/."
            if self.kind == "worldmodel"
            else f"Update {NOTES_FILE} with anything the next turn must know."
        )
        turn = "\n".join(
            [
                f"## Turn {self._turn}, step {step}",
                f"Task: {self._task}",
                where,
                f"The attached image is the current view ({frame_path.relative_to(self.workdir)}).",
                f"Recent history (last {HISTORY_LINES} lines of {LOG_FILE}):",
                "```",
                history or "(nothing yet)",
                "```",
                memory,
                f"Then write {ACTIONS_FILE} in the current directory: the actions to take from this step on.",
            ]
        )
        return turn if resumed else f"{self._system_prompt}\n\n{turn}\n"

    def _history(self) -> str:
        assert self.workdir is not None
        lines = (self.workdir / LOG_FILE).read_text(encoding="utf-8").splitlines()
        return "\n".join(lines[-HISTORY_LINES:])

    def _append_log(self, line: str) -> None:
        assert self.workdir is not None
        with open(self.workdir / LOG_FILE, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    def _write_report(self) -> None:
        assert self.options.output_dir is not None and self.settings is not None and self.episode is not None
        write_reports(self.options.output_dir, self.settings, self.episode)

    async def close(self) -> None:
        if self.episode is None:
            return
        self._end_session(clean=True)
        if self._queue:
            self._append_log(f"episode ended with {len(self._queue)} planned actions unplayed")
        self._write_report()


def make_worldmodel(options: PurpleOptions) -> Policy:
    return CodexPolicy("worldmodel", options)


def make_prolong(options: PurpleOptions) -> Policy:
    return CodexPolicy("prolong", options)
