"""What a purple agent is to the server that hosts it: answer an init, then one action per observation."""

from __future__ import annotations

from abc import ABC, abstractmethod

from mcu_arms.green.protocol import AckPayload, ActionPayload, InitPayload, ObservationPayload


class Policy(ABC):
    """One episode's decision maker. The server creates one per A2A context (one per episode)."""

    @abstractmethod
    async def init(self, payload: InitPayload) -> AckPayload: ...

    @abstractmethod
    async def act(self, payload: ObservationPayload) -> ActionPayload: ...

    async def close(self) -> None:
        """Called when the episode's context is dropped; write reports here."""
