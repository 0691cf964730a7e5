"""The purple A2A server: hosts one Policy per A2A context (one context per episode).

Every request gets exactly one Message back (an executor that enqueues nothing hangs a non-streaming caller until its
timeout): an ack for an init, an action for an observation. A payload it cannot use gets an error ack or a noop
action with the reason, and is counted; the per-kind counts go to stdout in a periodic summary (the arm's
purple.log) and at shutdown.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, OrderedDict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from a2a.helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from pydantic import BaseModel, ValidationError

from mcu_arms.a2a_client import message_payload
from mcu_arms.a2a_transport import (
    Skill,
    build_app,
    build_card,
    card_url_for,
    check_listen_address,
    serve_app,
    take_tokens,
)
from mcu_arms.contracts.catalog import CODEX_AGENTS
from mcu_arms.contracts.errors import validation_summary
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import AckPayload, ActionPayload, InitPayload, ObservationPayload
from mcu_arms.isolation.codex_home import hold_codex_home
from mcu_arms.process.procs import log_line
from mcu_arms.purple.base import Policy, failure_noop
from mcu_arms.purple.registry import PolicyFactory, policy_factory

__all__ = ["PurpleExecutor", "PurpleOptions", "build_purple_app", "serve_purple"]

SUMMARY_INTERVAL_S = 60.0
# Contexts whose policies stay open at once; the least recently used beyond this is closed. Sequential episodes
# from one green need one; the headroom serves greens running episodes side by side.
MAX_LIVE_CONTEXTS = 4


class _Episode:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.lock = asyncio.Lock()  # one act at a time: a policy is never used concurrently
        self.in_flight: asyncio.Future[ActionPayload] | None = None
        self.observations = 0


class PurpleExecutor(AgentExecutor):
    """Routes init/obs payloads to per-context policies; never raises into the SDK, never stays silent."""

    def __init__(self, kind: str, options: PurpleOptions, factory: PolicyFactory) -> None:
        self.kind = kind
        self.options = options
        self._factory = factory
        self._episodes: OrderedDict[str, _Episode] = OrderedDict()
        self._episodes_lock = asyncio.Lock()
        self.counts: Counter[str] = Counter()
        self._act_seconds = 0.0
        self._last_summary = time.monotonic()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        context_id = context.context_id or ""
        try:
            answer = await self._answer(context, context_id)
        except Exception as error:  # a bug here must still answer the caller, and be seen in the log
            self.counts["internal_error"] += 1
            log_line(f"internal error in context {context_id}: {type(error).__name__}: {error}")
            answer = AckPayload(success=False, message=f"purple internal error: {type(error).__name__}: {error}")
        await event_queue.enqueue_event(new_text_message(answer.model_dump_json(), context_id=context_id))
        self._maybe_summarise()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Each request is answered at once; there is nothing running to cancel."""

    async def _answer(self, context: RequestContext, context_id: str) -> BaseModel:
        payload = message_payload(context.message) if context.message is not None else None
        kind = payload.get("type") if payload else None
        if payload is not None and kind == "init":
            return await self._init(payload, context_id)
        if payload is not None and kind == "obs":
            return await self._act(payload, context_id)
        self.counts["bad_payload"] += 1
        got = f"type {kind!r}" if payload is not None else "no JSON object"
        return AckPayload(success=False, message=f"expected a JSON object with type 'init' or 'obs', got {got}")

    async def _init(self, payload: dict[str, Any], context_id: str) -> AckPayload:
        try:
            init = InitPayload.model_validate(payload)
        except ValidationError as error:
            self.counts["bad_init"] += 1
            return AckPayload(success=False, message=f"invalid init: {validation_summary(error, limit=1)}")
        await self._close_context(context_id, why="re-initialised")
        policy: Policy | None = None
        try:
            policy = self._factory(self.options)
            ack = await policy.init(init)
        except Exception as error:
            self.counts["init_failed"] += 1
            log_line(f"init failed in context {context_id}: {type(error).__name__}: {error}")
            if policy is not None:
                await self._close_episode(context_id, _Episode(policy), why="its init failed")
            return AckPayload(success=False, message=f"{self.kind} could not start: {type(error).__name__}: {error}")
        evicted: list[tuple[str, _Episode]] = []
        async with self._episodes_lock:
            self._episodes[context_id] = _Episode(policy)
            while len(self._episodes) > MAX_LIVE_CONTEXTS:
                evicted.append(self._episodes.popitem(last=False))
        for old_context, episode in evicted:
            await self._close_episode(old_context, episode, why="least recently used beyond the live-context limit")
        self.counts["init"] += 1
        log_line(f"init context={context_id} agent={self.kind} task={init.text!r} ack={ack.success}")
        return ack

    async def _act(self, payload: dict[str, Any], context_id: str) -> ActionPayload:
        try:
            observation = ObservationPayload.model_validate(payload)
        except ValidationError as error:
            self.counts["bad_obs"] += 1
            return failure_noop("bad_observation", f"invalid observation: {validation_summary(error, limit=1)}")
        async with self._episodes_lock:
            episode = self._episodes.get(context_id)
            if episode is not None:
                self._episodes.move_to_end(context_id)
        if episode is None:
            self.counts["obs_without_init"] += 1
            return failure_noop("no_init", f"no init received in context {context_id!r}")
        stale = episode.in_flight
        if stale is not None and not stale.done():
            # The caller gave up on that observation (its step timed out) and sent this one: finishing the stale
            # action would only delay this answer, and every later one, by the same amount.
            stale.cancel()
            self.counts["superseded"] += 1
        async with episode.lock:
            started = time.monotonic()
            acting = asyncio.ensure_future(episode.policy.act(observation))
            episode.in_flight = acting
            try:
                action = await acting
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                return failure_noop(
                    "superseded", f"observation {observation.step} was superseded by a newer one before an action came"
                )
            except Exception as error:
                self.counts["act_failed"] += 1
                log_line(f"act failed in context {context_id} step {observation.step}: {type(error).__name__}: {error}")
                return failure_noop("act_crashed", f"{self.kind} failed to act: {type(error).__name__}: {error}")
            finally:
                self._act_seconds += time.monotonic() - started
            episode.observations += 1
        self.counts["obs"] += 1
        return action

    async def _close_context(self, context_id: str, *, why: str) -> None:
        async with self._episodes_lock:
            episode = self._episodes.pop(context_id, None)
        if episode is not None:
            await self._close_episode(context_id, episode, why=why)

    async def _close_episode(self, context_id: str, episode: _Episode, *, why: str) -> None:
        try:
            await episode.policy.close()
        except Exception as error:
            self.counts["close_failed"] += 1
            log_line(f"close failed in context {context_id}: {type(error).__name__}: {error}")
        log_line(f"closed context={context_id} after {episode.observations} observations ({why})")

    async def close_all(self) -> None:
        """Close every open policy (server shutdown), then log the final summary."""
        async with self._episodes_lock:
            episodes = list(self._episodes.items())
            self._episodes.clear()
        for context_id, episode in episodes:
            await self._close_episode(context_id, episode, why="server shutdown")
        log_line(self.summary("final"))

    def summary(self, label: str) -> str:
        answered = self.counts["obs"] + self.counts["act_failed"]
        mean_ms = 1000.0 * self._act_seconds / answered if answered else 0.0
        counts = " ".join(f"{key}={value}" for key, value in sorted(self.counts.items())) or "no requests"
        return (
            f"summary ({label}) agent={self.kind} live_contexts={len(self._episodes)} {counts} "
            f"act_mean_ms={mean_ms:.1f}"
        )

    def _maybe_summarise(self) -> None:
        now = time.monotonic()
        if now - self._last_summary >= SUMMARY_INTERVAL_S:
            self._last_summary = now
            log_line(self.summary("periodic"))


def build_purple_app(kind: str, options: PurpleOptions, url: str, *, token: str | None = None):
    """The app and its executor (the caller closes the executor's policies at shutdown); with a `token`, it answers
    only callers that present it (its arm's green).

    One policy is constructed and dropped here: constructors are cheap and check what the kind needs (STEVE-1: the
    extra, the weights, CUDA), so a host that cannot run it fails now with a UserError, not at the first episode.
    """
    factory = policy_factory(kind)
    factory(options)
    executor = PurpleExecutor(kind, options, factory)
    card = build_card(
        name=f"mcu-arms purple ({kind})",
        description=f"MCU purple agent '{kind}': answers an init with an ack and each observation with an action.",
        url=url,
        skills=[
            Skill(id="mcu_play", name="Play MCU tasks", description="Minecraft actions from frames", tags=("mcu",))
        ],
        streaming=False,
        secured=token is not None,
    )
    return build_app(card, executor, token=token), executor


def serve_purple(
    kind: str, options: PurpleOptions, host: str, port: int, card_url: str | None, *, expose: bool = False
) -> None:
    """Serve a purple agent until SIGINT/SIGTERM; an unknown or unavailable kind fails before the port is bound.

    A codex agent holds its CODEX_HOME's lock while it serves: two purples in one home is what the home prevents.
    """
    token = take_tokens()
    access = check_listen_address(host, token=token, expose=expose)
    with ExitStack() as held:
        home = os.environ.get("CODEX_HOME")
        if kind in CODEX_AGENTS and home:
            held.enter_context(hold_codex_home(Path(home)))
        url = card_url_for(host, port, card_url)
        app, executor = build_purple_app(kind, options, url, token=token)
        log_line(f"purple agent={kind} listening on {host}:{port} card_url={url} seed={options.seed}")
        log_line(access)
        serve_app(app, host, port, on_shutdown=executor.close_all)
