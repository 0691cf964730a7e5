"""What a purple agent is to the server that hosts it: answer an init, then one action per observation.

Also the noop every purple answers the same way when it cannot act: a typed failure that says why.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from mcu_arms.contracts.wire import (
    AckPayload,
    ActionPayload,
    AgentFailure,
    InitPayload,
    ObservationPayload,
    noop_action,
)


class Policy(ABC):
    """One episode's decision maker. The server creates one per A2A context (one per episode)."""

    @abstractmethod
    async def init(self, payload: InitPayload) -> AckPayload: ...

    @abstractmethod
    async def act(self, payload: ObservationPayload) -> ActionPayload: ...

    async def close(self) -> None:  # noqa: B027 - an optional hook, a no-op unless a policy overrides it
        """Called when the episode's context is dropped; write reports here."""


def failure_noop(cause: str, detail: str) -> ActionPayload:
    """The noop sent when no action can be computed: typed as an agent-side failure, so the green counts it as
    infrastructure under `cause`, never as the agent's choice."""
    action = noop_action()
    action["camera"] = list(action["camera"])
    return ActionPayload(
        action_type="env", action=action, reason=detail, failure=AgentFailure(cause=cause, detail=detail)
    )
