"""The policy: one choice among the action runner's candidates, with a probability for each, validated every time.

Two backends ask the same question: the decision service (its native choice question), or a chat model told to
answer `{"choice": ID, "probabilities": {ID: p, ...}}`. Either answer passes `validate_decision` or it is
`invalid_policy_output`, and the caller falls back to the action runner's own first choice.
"""

from __future__ import annotations

import json
import math
from typing import Any

from mcu_arms.contracts.planned import PROBABILITY_TOLERANCE, Decision
from mcu_arms.contracts.trajectory import CandidateAction
from mcu_arms.purple.planned.models import ChatModel, DecisionService

CHAT_POLICY_PROMPT = """You choose the next action of a game agent. You receive its goal, its current subgoal, its
state and the allowed actions (id: description). Answer with one JSON object only:
{"choice": "<one allowed id>", "probabilities": {"<id>": <probability>, ...}}
with a probability for every allowed id and no other, each between 0 and 1, summing to 1."""


class InvalidDecision(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_decision(answer: Any, candidates: list[str]) -> Decision:
    """The answer as a Decision, or InvalidDecision saying what is wrong with it (the seed's validateDecision)."""
    if not isinstance(answer, dict):
        raise InvalidDecision("unparseable", f"not a JSON object: {str(answer)[:120]!r}")
    choice, probabilities = answer.get("choice"), answer.get("probabilities")
    if choice not in candidates:
        raise InvalidDecision("choice_not_a_candidate", f"choice {choice!r} is not one of {candidates}")
    if not isinstance(probabilities, dict):
        raise InvalidDecision("no_probabilities", "no probabilities object")
    missing, extra = sorted(set(candidates) - set(probabilities)), sorted(set(probabilities) - set(candidates))
    if missing or extra:
        raise InvalidDecision(
            "probabilities_not_the_candidates",
            f"probabilities must cover exactly the candidates (missing: {missing or 'none'}, extra: {extra or 'none'})",
        )
    for candidate, value in probabilities.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidDecision("probability_not_a_number", f"probability of {candidate} is {value!r}")
        if not 0 <= value <= 1:
            raise InvalidDecision("probability_out_of_range", f"probability of {candidate} is {value}, outside [0, 1]")
    total = sum(probabilities.values())
    if abs(total - 1) > PROBABILITY_TOLERANCE:
        raise InvalidDecision("probabilities_do_not_sum_to_1", f"probabilities sum to {total:.4f}, not 1")
    return Decision(choice=choice, probabilities={c: float(probabilities[c]) for c in candidates})


class DecisionServicePolicy:
    def __init__(self, service: DecisionService) -> None:
        self.service = service

    async def ask(self, context: dict[str, Any], candidates: list[CandidateAction]) -> tuple[Any, float]:
        return await self.service.choose(context, {c.id: c.description for c in candidates})

    async def close(self) -> None:
        await self.service.close()


class ChatPolicy:
    def __init__(self, chat: ChatModel) -> None:
        self.chat = chat

    async def ask(self, context: dict[str, Any], candidates: list[CandidateAction]) -> tuple[Any, float]:
        question = {**context, "allowed_actions": {c.id: c.description for c in candidates}}
        text, latency = await self.chat.complete(
            [{"role": "system", "content": CHAT_POLICY_PROMPT}, {"role": "user", "content": json.dumps(question)}]
        )
        try:
            return json.loads(strip_fence(text)), latency
        except json.JSONDecodeError:
            return text, latency

    async def close(self) -> None:
        await self.chat.close()


def strip_fence(text: str) -> str:
    """Models often wrap JSON in a ```json fence despite being told not to."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return body.strip()
