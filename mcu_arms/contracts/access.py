"""Who may talk to an arm's servers: a bearer token per server, per run, known only to the processes that need it.

The green requires the arm's green token (only the arm's client holds it) and presents the arm's purple token to its
participants; the purple requires the purple token and never learns the green's, so the agent under test cannot
drive, list or cancel its own evaluation. Tokens are made fresh for each run and handed to each process in its
environment — never on a command line, in a plan, a report or a log — and each process takes them out of its own
environment at start, so that nothing it starts inherits them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from mcu_arms.contracts.states import ProcessRole

# The token this process's own A2A server requires from every caller (unset: an open server, loopback only).
SERVE_TOKEN_ENV = "MCU_ARMS_SERVE_TOKEN"
# The token this process presents to the A2A servers it calls.
CALL_TOKEN_ENV = "MCU_ARMS_CALL_TOKEN"
BEARER_SCHEME = "bearer"


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ArmAccess:
    """One run's tokens: the green's and the purple's."""

    green: str
    purple: str

    @classmethod
    def generate(cls) -> ArmAccess:
        return cls(green=new_token(), purple=new_token())

    def environment_for(self, role: ProcessRole) -> dict[str, str]:
        """What each process of the arm gets: the green serves with its token and calls the purple with the
        purple's; the purple serves with its own; the client calls the green."""
        if role == "green":
            return {SERVE_TOKEN_ENV: self.green, CALL_TOKEN_ENV: self.purple}
        if role == "purple":
            return {SERVE_TOKEN_ENV: self.purple}
        return {CALL_TOKEN_ENV: self.green}

    def values(self) -> tuple[str, str]:
        return self.green, self.purple
