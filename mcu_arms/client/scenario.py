"""The AgentBeats scenario file: which green agent to ask, which participants it evaluates, and the EvalConfig.

    [green_agent]
    endpoint = "http://127.0.0.1:9009"

    [[participants]]
    role = "agent"
    endpoint = "http://127.0.0.1:9019"

    [config]
    task_category = "crafting"

Every mistake is a UserError naming the file, the line and the key. `cmd` entries (AgentBeats' own launcher) are
accepted and ignored: `mcu-arms run` starts the processes. `agentbeats_id` (the platform's id of an agent) is
accepted and kept. Config keys our green does not know are sent as they are, as AgentBeats does (another green may
use them; ours names them as ignored), and the client warns about each, since a typo would otherwise go unseen.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from mcu_arms.contracts.catalog import CATEGORIES
from mcu_arms.contracts.errors import (
    Problem,
    UserError,
    did_you_mean,
    plain_problem,
    user_error,
)
from mcu_arms.contracts.simulators import simulator_descriptor
from mcu_arms.contracts.toml_text import parse_toml, toml_line
from mcu_arms.contracts.wire import EvalConfig, EvalRequest

TOP_LEVEL_TABLES = ("green_agent", "participants", "config")
AGENT_KEYS = ("endpoint", "cmd", "agentbeats_id")
PARTICIPANT_KEYS = ("role", "endpoint", "cmd", "agentbeats_id")


class Participant(BaseModel):
    role: str
    endpoint: str
    agentbeats_id: str | None = None


class Scenario(BaseModel):
    path: Path
    green_endpoint: str
    green_agentbeats_id: str | None = None
    participants: list[Participant]
    config: EvalConfig

    def warnings(self) -> list[str]:
        """Config keys our green does not know: sent anyway, named here so that a misspelt key is seen."""
        known = ", ".join(EvalConfig.model_fields)
        return [
            f"{self.path}: config.{key} is not a key the mcu-arms green knows; sent as written, a green that does "
            f"not use it ignores it (known keys: {known})"
            for key in self.config.ignored_keys()
        ]

    def eval_request(self) -> EvalRequest:
        return EvalRequest(
            participants={participant.role: participant.endpoint for participant in self.participants},
            config=self.config,
        )


def _check_endpoint(value: Any, *, path: Path, line: int | None, key: str) -> str:
    if not isinstance(value, str):
        raise UserError("must be a string URL", path=path, line=line, key=key, allowed="http://HOST:PORT")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"not an http(s) URL: {value!r}", path=path, line=line, key=key, allowed="http://HOST:PORT")
    try:
        _ = parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        raise UserError(f"bad port in {value!r}", path=path, line=line, key=key, allowed="1-65535") from None
    return value


def _check_keys(table: dict[str, Any], allowed: tuple[str, ...], *, path: Path, locate, name: str) -> None:
    for key in table:
        if key not in allowed:
            raise UserError(
                f"unknown key in [{name}]{did_you_mean(key, allowed)}",
                path=path,
                line=locate(key),
                key=f"{name}.{key}",
                allowed=", ".join(allowed),
            )


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("scenario file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read scenario file: {error}", path=path) from None
    data = parse_toml(text, path)
    for key in data:
        if key not in TOP_LEVEL_TABLES:
            raise UserError(
                "unknown top-level entry",
                path=path,
                line=toml_line(text, key),
                key=key,
                allowed="[green_agent], [[participants]], [config]",
            )

    green = data.get("green_agent")
    if not isinstance(green, dict):
        raise UserError("missing [green_agent] table with an endpoint", path=path, key="green_agent")
    _check_keys(green, AGENT_KEYS, path=path, locate=lambda k: toml_line(text, f"green_agent.{k}"), name="green_agent")
    if "endpoint" not in green:
        raise UserError(
            "missing",
            path=path,
            line=toml_line(text, "green_agent"),
            key="green_agent.endpoint",
            allowed="http://HOST:PORT",
        )
    green_endpoint = _check_endpoint(
        green["endpoint"], path=path, line=toml_line(text, "green_agent.endpoint"), key="green_agent.endpoint"
    )
    green_id = _check_agentbeats_id(green.get("agentbeats_id"), path=path, text=text, key="green_agent.agentbeats_id")

    participants = _load_participants(data.get("participants"), path=path, text=text)

    config_table = data.get("config")
    if not isinstance(config_table, dict):
        raise UserError("missing [config] table (at least task_category)", path=path, key="config")
    config = _load_config(config_table, path=path, text=text)
    return Scenario(
        path=path, green_endpoint=green_endpoint, green_agentbeats_id=green_id, participants=participants, config=config
    )


def _check_agentbeats_id(value: Any, *, path: Path, text: str, key: str) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise UserError(
        "must be a non-empty string", path=path, line=toml_line(text, key), key=key, allowed="the agent's AgentBeats id"
    )


def _load_participants(raw: Any, *, path: Path, text: str) -> list[Participant]:
    if not isinstance(raw, list) or not raw:
        raise UserError(
            "at least one [[participants]] entry with role and endpoint is required", path=path, key="participants"
        )
    participants: list[Participant] = []
    for index, entry in enumerate(raw):
        header_line = toml_line(text, f"participants[{index}]")

        def locate(key: str, index: int = index) -> int | None:
            return toml_line(text, f"participants[{index}].{key}")

        if not isinstance(entry, dict):
            raise UserError("must be a table", path=path, line=header_line, key=f"participants[{index}]")
        _check_keys(entry, PARTICIPANT_KEYS, path=path, locate=locate, name="participants")
        role = entry.get("role")
        if not isinstance(role, str) or not role.strip():
            raise UserError(
                "missing or empty", path=path, line=locate("role") or header_line, key=f"participants[{index}].role"
            )
        if any(existing.role == role for existing in participants):
            raise UserError(
                f"role {role!r} appears twice; each participant needs its own role",
                path=path,
                line=locate("role"),
                key=f"participants[{index}].role",
            )
        if "endpoint" not in entry:
            raise UserError("missing", path=path, line=header_line, key=f"participants[{index}].endpoint")
        endpoint = _check_endpoint(
            entry["endpoint"], path=path, line=locate("endpoint"), key=f"participants[{index}].endpoint"
        )
        agentbeats_id = _check_agentbeats_id(
            entry.get("agentbeats_id"), path=path, text=text, key=f"participants[{index}].agentbeats_id"
        )
        participants.append(Participant(role=role, endpoint=endpoint, agentbeats_id=agentbeats_id))
    return participants


def _describe_config_error(error: Mapping[str, Any]) -> Problem:
    problem = plain_problem(error)
    if problem.kind == "missing":
        return Problem(problem.key, "missing", kind=problem.kind)
    return problem


def _load_config(table: dict[str, Any], *, path: Path, text: str) -> EvalConfig:
    try:
        config = EvalConfig.model_validate(table)
    except ValidationError as error:
        raise user_error(
            error,
            path=path,
            line_of=partial(toml_line, text),
            key_of=lambda key: f"config.{key}",
            describe=_describe_config_error,
        ) from None
    if config.task_category not in CATEGORIES:
        raise UserError(
            f"unknown category {config.task_category!r}",
            path=path,
            line=toml_line(text, "config.task_category"),
            key="config.task_category",
            allowed=", ".join(CATEGORIES),
        )
    try:
        simulator_descriptor(config.simulator, key="config.simulator")
    except UserError as error:
        raise error.at(path=path, line=toml_line(text, "config.simulator")) from None
    return config
