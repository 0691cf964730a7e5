"""An AgentBeats scenario turned into an arm (`mcu-arms new NAME --from-scenario scenario.toml`): one participant's
`cmd` (split into an argv, its own --host/--port/--card-url replaced by the placeholders mcu-arms fills) or its
`endpoint` becomes [purple]; [config] task_category and max_steps become task and steps. Everything else is listed
as not mapped, with why: nothing is dropped silently.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from mcu_arms.contracts.catalog import A2A_AGENT, CATEGORIES
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.toml_text import parse_toml

# (table, key) -> value, as arms/template.py takes them; table None is the top level.
Values = dict[tuple[str | None, str], Any]
# A participant's own flags, each replaced by the placeholder mcu-arms fills with what it picks.
PLACEHOLDER_FLAGS: dict[str, str] = {"--host": "{host}", "--port": "{port}", "--card-url": "{card_url}"}
WHY_NOT: dict[str, str] = {
    "green_agent": "mcu-arms runs its own green agent",
    "agentbeats_id": "a leaderboard agent, reached through AgentBeats, not here",
    "env": "values such as ${SECRET} are the runner's to fill: put what the agent needs in [env] yourself",
    "endpoint": "replaced by the port mcu-arms picks (the command is started with it)",
}


def _argv(cmd: str) -> list[str]:
    """`cmd` as an argv, its --host/--port/--card-url values replaced by placeholders."""
    words = shlex.split(cmd)
    argv: list[str] = []
    index = 0
    while index < len(words):
        flag, equals, _ = words[index].partition("=")
        if flag in PLACEHOLDER_FLAGS and equals:
            argv.append(f"{flag}={PLACEHOLDER_FLAGS[flag]}")
        elif flag in PLACEHOLDER_FLAGS and index + 1 < len(words):
            argv += [flag, PLACEHOLDER_FLAGS[flag]]
            index += 1
        else:
            argv.append(words[index])
        index += 1
    return argv


def _participant(participants: Any, role: str | None, path: Path) -> tuple[int, dict[str, Any]]:
    if not isinstance(participants, list) or not participants or not all(isinstance(p, dict) for p in participants):
        raise UserError("the scenario has no [[participants]]", path=path, key="participants")
    roles = [str(p.get("role", "")) for p in participants]
    if role is None and len(participants) > 1:
        raise UserError(
            f"the scenario has {len(participants)} participants: name one",
            key="--participant",
            allowed=", ".join(roles),
        )
    index = 0 if role is None else next((i for i, name in enumerate(roles) if name == role), -1)
    if index < 0:
        raise UserError(f"no participant with role '{role}'", path=path, key="--participant", allowed=", ".join(roles))
    return index, participants[index]


def scenario_values(path: Path, role: str | None) -> tuple[Values, list[str]]:
    """The arm values a scenario gives, and each of its keys not mapped (with why)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot read the scenario: {error.strerror or error}", path=path) from None
    scenario = parse_toml(text, path)
    index, participant = _participant(scenario.get("participants"), role, path)
    values: Values = {(None, "agent"): A2A_AGENT}
    unmapped: list[str] = []
    where = f"participants[{index}]"
    cmd, endpoint = participant.get("cmd"), participant.get("endpoint")
    if isinstance(cmd, str) and cmd.strip():
        values[("purple", "command")] = _argv(cmd)
        if endpoint is not None:
            unmapped.append(f"{where}.endpoint: {WHY_NOT['endpoint']}")
    elif isinstance(endpoint, str):
        values[("purple", "url")] = endpoint
    else:
        raise UserError(
            "the participant has neither cmd nor endpoint: an arm starts its agent by command or reaches it at an "
            "address",
            path=path,
            key=where,
        )
    for key in participant:
        if key not in ("role", "cmd", "endpoint"):
            unmapped.append(f"{where}.{key}: {WHY_NOT.get(key, 'no arm setting')}")
    config = scenario.get("config") or {}
    category = config.get("task_category")
    if category in CATEGORIES:
        values[(None, "task")] = category
    elif category is not None:
        unmapped.append(f"config.task_category: {category!r} is no single MCU category (an arm runs one): set task")
    steps = config.get("max_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        values[(None, "steps")] = steps
    elif steps is not None:
        unmapped.append(f"config.max_steps: {steps!r} is not a number of steps")
    unmapped += [f"config.{key}: no arm setting" for key in config if key not in ("task_category", "max_steps")]
    for table in scenario:
        if table == "green_agent":
            unmapped.append(f"green_agent: {WHY_NOT['green_agent']}")
        elif table not in ("participants", "config"):
            unmapped.append(f"{table}: no arm setting")
    return values, unmapped
