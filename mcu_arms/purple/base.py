"""What a purple agent is to the server that hosts it: answer an init, then one action per observation.

Also the noop every purple answers the same way when it has no action: one that says why.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from mcu_arms.contracts.wire import AckPayload, ActionPayload, InitPayload, ObservationPayload, noop_action


class Policy(ABC):
    """One episode's decision maker. The server creates one per A2A context (one per episode)."""

    @abstractmethod
    async def init(self, payload: InitPayload) -> AckPayload: ...

    @abstractmethod
    async def act(self, payload: ObservationPayload) -> ActionPayload: ...

    async def close(self) -> None:
        """Called when the episode's context is dropped; write reports here."""


class NoopWithReason(ActionPayload):
    """The noop sent when no action can be computed; `reason` says why (callers that do not know it ignore it)."""

    reason: str


def noop_with_reason(reason: str) -> NoopWithReason:
    action = noop_action()
    action["camera"] = list(action["camera"])
    return NoopWithReason(action_type="env", action=action, reason=reason)
