"""The evaluation client: send a scenario's EvalRequest to the green agent, follow its stream, keep its result.

One long streaming request: the green streams status updates (printed as timestamped lines) and ends with an
artifact holding a text summary and the result (contracts/evaluation.py: evaluation_from_artifact). The result is
written atomically and never over an existing file (a finished evaluation is never lost to a rerun). The typed
events in the status updates (contracts/events.py) go to an events file when one is given, for whoever supervises
the run. Heavy imports (a2a, httpx) stay inside the functions.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel

from mcu_arms.atomic import AlreadyExists, write_json_exclusive
from mcu_arms.client.scenario import Scenario, load_scenario
from mcu_arms.contracts.access import CALL_TOKEN_ENV
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.evaluation import evaluation_from_artifact
from mcu_arms.contracts.events import EventRecord, parse_event
from mcu_arms.contracts.text import MAX_LOG_LINE_CHARS, shown_text
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.contracts.wire import AGENT_CARD_PATH
from mcu_arms.environment import Environment
from mcu_arms.process.collector import imports_without_gc

DEFAULT_CARD_DEADLINE_S = 60.0
CARD_POLL_INTERVAL_S = 0.25
# The green's SSE stream pings every 15 s, so a read that sees nothing for this long means the connection is dead.
STREAM_READ_TIMEOUT_S = 90.0

EvaluationState = Literal[
    "completed", "failed", "rejected", "canceled", "input_required", "auth_required", "unreachable", "incomplete"
]


class StatusLine(BaseModel):
    at: datetime
    state: str
    text: str


class EvaluationOutcome(BaseModel):
    """What happened: the final state, why (when not completed), the green's result and where it was saved."""

    state: EvaluationState
    reason: str = ""
    green_endpoint: str
    task_id: str = ""
    result: dict[str, Any] | None = None
    summary: str = ""
    out_path: Path | None = None
    statuses: list[StatusLine] = []
    started_at: datetime
    finished_at: datetime

    @property
    def completed(self) -> bool:
        return self.state == "completed" and self.result is not None


class _Collected:
    """What the stream has delivered so far; each typed event is appended to `events_path` as it arrives."""

    def __init__(self, events_path: Path | None = None) -> None:
        self.events_path = events_path
        self.state = ""
        self.reason = ""
        self.task_id = ""
        self.artifact_texts: dict[str, list[str]] = {}
        self.artifact_data: list[dict[str, Any]] = []
        self.statuses: list[StatusLine] = []

    def result_and_summary(self) -> tuple[dict[str, Any] | None, str]:
        """The green's result and the artifacts' plain text as the summary.

        Our green sends the result as a DataPart shaped as upstream's; earlier versions sent it whole as JSON text.
        Either is read back as our EvaluationResult (integers restored from the data part's floats); a green that
        is not ours (upstream's) has its last JSON object kept as it came.
        """
        found: list[dict[str, Any]] = []
        summary: list[str] = []
        for chunks in self.artifact_texts.values():
            for text in chunks:
                decoded = _json_object(text)
                if decoded is not None:
                    found.append(decoded)
                elif text.strip():
                    summary.append(text.strip())
        found += self.artifact_data
        ours = [evaluation for data in found if (evaluation := evaluation_from_artifact(data)) is not None]
        if ours:
            return ours[-1].model_dump(mode="json"), "\n".join(summary)
        return (found[-1] if found else None), "\n".join(summary)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return decoded if isinstance(decoded, dict) else None


def _state_name(state: int) -> str:
    from a2a.types import TaskState

    return TaskState.Name(state).removeprefix("TASK_STATE_").lower()


def _print_status(env: Environment, line: StatusLine) -> None:
    """One status line as the terminal gets it: what the green relays from its agent is neutralised and bounded."""
    stamp = line.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = shown_text(line.text, MAX_LOG_LINE_CHARS, one_line=False)
    text = f"{stamp} [Status: {line.state}]" + (f" {shown}" if shown else "")
    env.console.out(text, highlight=False)


def _record_status(env: Environment, collected: _Collected, state: str, text: str, data: list[Any]) -> None:
    line = StatusLine(at=env.clock(), state=state, text=text)
    collected.statuses.append(line)
    if collected.events_path is not None:
        records = [EventRecord(at=iso_seconds(line.at), event=event) for item in data if (event := parse_event(item))]
        if records:
            with collected.events_path.open("a", encoding="utf-8") as handle:
                handle.write("".join(record.model_dump_json() + "\n" for record in records))
    collected.state = state
    if state in ("failed", "rejected", "canceled", "input_required", "auth_required"):
        collected.reason = text
    _print_status(env, line)


def _absorb(env: Environment, collected: _Collected, event: Any) -> None:
    """Fold one StreamResponse into what has been collected, printing each status as it arrives."""
    from a2a.helpers import get_data_parts, get_text_parts

    kind = event.WhichOneof("payload")
    if kind == "task":
        task = event.task
        collected.task_id = task.id
        for artifact in task.artifacts:
            collected.artifact_texts[artifact.artifact_id] = list(get_text_parts(artifact.parts))
            collected.artifact_data.extend(d for d in get_data_parts(artifact.parts) if isinstance(d, dict))
        parts = task.status.message.parts if task.status.HasField("message") else []
        _record_status(
            env, collected, _state_name(task.status.state), "\n".join(get_text_parts(parts)), get_data_parts(parts)
        )
    elif kind == "status_update":
        status = event.status_update.status
        parts = status.message.parts if status.HasField("message") else []
        _record_status(
            env, collected, _state_name(status.state), "\n".join(get_text_parts(parts)), get_data_parts(parts)
        )
    elif kind == "artifact_update":
        update = event.artifact_update
        artifact = update.artifact
        texts = list(get_text_parts(artifact.parts))
        if update.append and artifact.artifact_id in collected.artifact_texts:
            previous = collected.artifact_texts[artifact.artifact_id]
            if previous and texts:
                previous[-1] += texts[0]
                previous.extend(texts[1:])
            else:
                previous.extend(texts)
        else:
            collected.artifact_texts[artifact.artifact_id] = texts
        collected.artifact_data.extend(d for d in get_data_parts(artifact.parts) if isinstance(d, dict))
    elif kind == "message":
        # A green that answers with a bare message (no task) has finished: treat its text as the final artifact.
        texts = list(get_text_parts(event.message.parts))
        collected.artifact_texts[f"message-{len(collected.artifact_texts)}"] = texts
        result = next((d for t in texts if (d := _json_object(t)) is not None), None)
        state = "completed" if result is not None else "failed"
        _record_status(env, collected, state, "" if result else "\n".join(texts), [])


async def wait_for_card(url: str, deadline_s: float, env: Environment) -> None:
    """Poll the agent card until it answers 200, or raise TimeoutError naming the last failure."""
    import httpx

    from mcu_arms.a2a_client import tls_context

    loop = asyncio.get_running_loop()
    give_up = loop.time() + deadline_s
    last_error = "no answer"
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False, verify=tls_context()) as http:
        while True:
            try:
                response = await http.get(url.rstrip("/") + AGENT_CARD_PATH)
                if response.status_code == 200:
                    return
                last_error = f"HTTP {response.status_code}"
            except httpx.HTTPError as error:
                last_error = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            if loop.time() >= give_up:
                raise TimeoutError(f"green agent card at {url} not ready after {deadline_s:g} s ({last_error})")
            await asyncio.sleep(CARD_POLL_INTERVAL_S)


async def _stream_evaluation(scenario: Scenario, env: Environment, collected: _Collected) -> None:
    from a2a.client import ClientCallContext
    from a2a.types import SendMessageRequest

    from mcu_arms.a2a_client import open_client, payload_to_message

    message = payload_to_message(scenario.eval_request(), context_id=uuid.uuid4().hex)
    # a green started by `mcu-arms run` answers only to its arm's client
    token = env.variables.get(CALL_TOKEN_ENV) or None
    async with open_client(scenario.green_endpoint, STREAM_READ_TIMEOUT_S, streaming=True, token=token) as client:
        request = SendMessageRequest(message=message)
        async for event in client.send_message(request, context=ClientCallContext(timeout=STREAM_READ_TIMEOUT_S)):
            _absorb(env, collected, event)


def _refuse_existing(out_path: Path | None) -> None:
    if out_path is not None and out_path.exists():
        raise UserError("exists already; refusing to overwrite a result (choose another path)", path=out_path)


async def evaluate_async(
    scenario_path: Path,
    out_path: Path | None,
    env: Environment,
    *,
    card_deadline_s: float = DEFAULT_CARD_DEADLINE_S,
    overall_timeout_s: float | None = None,
    events_path: Path | None = None,
) -> EvaluationOutcome:
    """Run one evaluation. A UserError for bad input; every other problem is an outcome with a reason."""
    with imports_without_gc():  # the A2A client stack (a2a_client imports all its first message needs)
        import httpx
        from a2a.utils.errors import A2AError

        from mcu_arms.a2a_client import AgentError

    scenario = load_scenario(scenario_path)
    _refuse_existing(out_path)
    for warning in scenario.warnings():
        env.err_console.out(f"warning: {warning}", highlight=False)
    started = env.clock()
    collected = _Collected(events_path)
    try:
        await wait_for_card(scenario.green_endpoint, card_deadline_s, env)
    except TimeoutError as error:
        return _outcome(scenario, collected, started, env, state="unreachable", reason=str(error))
    try:
        async with asyncio.timeout(overall_timeout_s):
            await _stream_evaluation(scenario, env, collected)
    except TimeoutError:
        collected.reason = f"no final result within the overall timeout of {overall_timeout_s:g} s"
        collected.state = "incomplete"
    except (AgentError, A2AError, httpx.HTTPError) as error:
        collected.reason = f"the stream from the green agent broke: {type(error).__name__}: {error}"
        collected.state = "incomplete"

    result, summary = collected.result_and_summary()
    state = collected.state
    reason = collected.reason
    if state == "completed" and result is None:
        state, reason = "failed", "the green agent completed without a JSON result in its artifact"
    elif state not in ("completed", "failed", "rejected", "canceled", "input_required", "auth_required", "incomplete"):
        state, reason = "incomplete", f"the stream ended in state '{state or 'none'}' without a final status"
    saved: Path | None = None
    if result is not None and out_path is not None:
        try:
            write_json_exclusive(out_path, result)
        except AlreadyExists:
            raise UserError("exists already; refusing to overwrite a result", path=out_path) from None
        saved = out_path
    # the branches above leave `state` one of EvaluationState (the stream's own names are checked there)
    return _outcome(
        scenario,
        collected,
        started,
        env,
        state=cast(EvaluationState, state),
        reason=reason,
        result=result,
        summary=summary,
        saved=saved,
    )


def _outcome(
    scenario: Scenario,
    collected: _Collected,
    started: datetime,
    env: Environment,
    *,
    state: EvaluationState,
    reason: str,
    result: dict[str, Any] | None = None,
    summary: str = "",
    saved: Path | None = None,
) -> EvaluationOutcome:
    return EvaluationOutcome(
        state=state,
        reason=reason,
        green_endpoint=scenario.green_endpoint,
        task_id=collected.task_id,
        result=result,
        summary=summary,
        out_path=saved,
        statuses=collected.statuses,
        started_at=started,
        finished_at=env.clock(),
    )


def evaluate(
    scenario_path: Path,
    out_path: Path | None,
    env: Environment,
    *,
    card_deadline_s: float = DEFAULT_CARD_DEADLINE_S,
    overall_timeout_s: float | None = None,
    events_path: Path | None = None,
) -> EvaluationOutcome:
    """Blocking wrapper around evaluate_async (the CLI's entry point)."""
    return asyncio.run(
        evaluate_async(
            scenario_path,
            out_path,
            env,
            card_deadline_s=card_deadline_s,
            overall_timeout_s=overall_timeout_s,
            events_path=events_path,
        )
    )
