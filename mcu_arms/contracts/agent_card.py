"""An A2A agent card as another program serves it (a purple of `agent = "a2a"`): is it a card, and what identifies
it. Both shapes are read: a2a-sdk 0.3's (`url`, `protocolVersion`) and 1.x's (`supportedInterfaces`).

What identifies a card is its name, version and skills (ids, names, descriptions): what the agent says it is and
does, not where it was reached (the URL changes with every port picked).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

# The keys an agent card must carry in either shape, besides where it is reached.
CARD_KEYS: tuple[str, ...] = ("name", "version", "skills")


class CardIdentity(BaseModel):
    """What a served card says the agent is, and its digest (the part that enters a comparison)."""

    name: str
    version: str
    skills: list[str]  # skill ids
    digest: str  # sha256 over name, version and skills, 16 hex digits


def card_problem(card: Any) -> str | None:
    """What makes `card` no A2A agent card (None: it is one, in the 0.3 or the 1.x shape)."""
    if not isinstance(card, dict):
        return f"the agent card is a JSON {type(card).__name__}, not an object"
    missing = [key for key in CARD_KEYS if key not in card]
    if "url" not in card and "supportedInterfaces" not in card:
        missing.append("url (a2a-sdk 0.3) or supportedInterfaces (1.x)")
    if missing:
        return f"the agent card has no {', '.join(missing)}"
    if not isinstance(card["name"], str) or not isinstance(card["version"], str):
        return "the agent card's name and version must be strings"
    skills = card["skills"]
    if not isinstance(skills, list) or not all(isinstance(skill, dict) for skill in skills):
        return "the agent card's skills must be a list of objects"
    return None


def card_identity(card: dict[str, Any]) -> CardIdentity:
    """The identity of a card that `card_problem` accepted."""
    skills = [
        {key: skill.get(key) for key in ("id", "name", "description", "tags")}
        for skill in sorted(card["skills"], key=lambda skill: str(skill.get("id")))
    ]
    canonical = json.dumps(
        {"name": card["name"], "version": card["version"], "skills": skills}, sort_keys=True, separators=(",", ":")
    )
    return CardIdentity(
        name=card["name"],
        version=card["version"],
        skills=[str(skill["id"]) for skill in skills],
        digest=hashlib.sha256(canonical.encode()).hexdigest()[:16],
    )
