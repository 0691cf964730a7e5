"""Purple agents for the green agent's tests: real A2A servers (the plumbing module's card and app builders) whose
answers are scripted per step, including every way an agent can fail a turn.

Serve one with `server_procs.running_app(lambda url: build_test_purple(mode, url))`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from a2a.helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue

from mcu_arms.a2a_client import message_payload
from mcu_arms.a2a_transport import Skill, build_app, build_card
from mcu_arms.contracts.wire import BUTTON_KEYS

# Compact (VPT joint) button index with forward + attack pressed and the camera meta action off.
COMPACT_FORWARD_ATTACK = (1 * 3 * 3 * 2 * 2 * 2 * 2 * 2) + (1 * 2 * 2)  # fore_back=forward, attack=attack


def env_reply(camera: Any = (0.0, 0.0), **pressed: Any) -> str:
    action: dict[str, Any] = {key.replace("_", "."): value for key, value in pressed.items()}
    action["camera"] = list(camera)
    return json.dumps({"type": "action", "action_type": "env", "action": action})


class Boom(RuntimeError):
    """Raised inside the purple's executor: the caller sees a JSON-RPC internal error."""


def _expanded_jump() -> str:
    buttons = [0] * len(BUTTON_KEYS)
    buttons[BUTTON_KEYS.index("jump")] = 1
    return json.dumps({"type": "action", "action_type": "agent", "buttons": buttons, "camera": [0.0, 2.5]})


# One entry per step of the "script" mode; steps past the end answer a plain noop.
# "sleep" answers late (past the green's step timeout), "raise" fails inside the server.
SCRIPT: list[str] = [
    env_reply(forward=1),
    "sleep",
    "this is not json {",
    json.dumps(
        {
            "type": "action",
            "action_type": "env",
            "action": {"forward": 1, "chat": "/give @s diamond 64", "camera": [0, 0]},
        }
    ),
    json.dumps({"type": "action", "action_type": "env", "action": {"camera": [float("nan"), 0]}}),
    json.dumps({"type": "action", "action_type": "agent", "buttons": [COMPACT_FORWARD_ATTACK], "camera": [60]}),
    _expanded_jump(),
    "raise",
    json.dumps({"type": "ack", "success": False, "message": "confused by this observation"}),
    json.dumps({"type": "action", "action_type": "env", "action": {}, "reason": "model call failed, sent a noop"}),
]
# The crafting table on the embedded simulator: select the table (hotbar.2), then place it (use).
TABLE_SCRIPT: list[str] = [env_reply(hotbar_2=1), env_reply(use=1)]
NOOP = env_reply()


class ScriptedPurple(AgentExecutor):
    """Answers init with an ack (or a refusal) and observation N with `script[N]`."""

    def __init__(self, script: list[str], *, refuse_init: bool = False, sleep_s: float = 0.0) -> None:
        self.script = script
        self.refuse_init = refuse_init
        self.sleep_s = sleep_s
        self.observations: list[int] = []
        self.payloads: list[dict[str, Any]] = []  # every observation payload as received
        self.contexts: set[str] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        payload = message_payload(context.message) or {}
        self.contexts.add(context.context_id or "")
        if payload.get("type") == "init":
            ack = {
                "type": "ack",
                "success": not self.refuse_init,
                "message": "refusing on purpose" if self.refuse_init else f"ready for: {payload.get('text')}",
            }
            reply = json.dumps(ack)
        else:
            step = int(payload.get("step", -1))
            self.observations.append(step)
            self.payloads.append(payload)
            reply = self.script[step] if 0 <= step < len(self.script) else NOOP
            if reply == "sleep":
                await asyncio.sleep(self.sleep_s)
                reply = NOOP
            elif reply == "raise":
                raise Boom(f"scripted failure at step {step}")
        await event_queue.enqueue_event(new_text_message(reply, context_id=context.context_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing long-running to cancel."""


def build_test_purple(executor: ScriptedPurple, url: str):  # a Starlette app
    card = build_card(
        name="test purple",
        description="Scripted answers for the green agent's tests.",
        url=url,
        skills=[Skill(id="test", name="test", description="scripted", tags=("test",))],
        streaming=False,
    )
    return build_app(card, executor)
