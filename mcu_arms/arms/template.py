"""New arm files, from templates/arm.toml with its comments kept (tomlkit)."""

from __future__ import annotations

import re
from pathlib import Path

import tomlkit

from mcu_arms.arms.spec import ALLOWED, ARM_NAME_PATTERN, load_arm, parse_arm
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.resources import ARM_TEMPLATE
from mcu_arms.environment import Environment


def new_arm_file(
    env: Environment,
    name: str,
    *,
    agent: str | None = None,
    task: str | None = None,
    simulator: str | None = None,
    from_arm: Path | None = None,
) -> Path:
    if not re.fullmatch(ARM_NAME_PATTERN, name):
        raise UserError(f"'{name}' is not a valid arm name", key="NAME", allowed=ALLOWED["name"])
    target = env.arms_dir / f"{name}.toml"
    if target.exists():
        raise UserError("an arm with this name exists already; pick another name or edit it", path=target)
    document = tomlkit.parse(ARM_TEMPLATE.read_text(encoding="utf-8"))
    if from_arm is not None:
        load_arm(from_arm)  # a broken source is reported at its own file and line, not at the copy
        source = tomlkit.parse(from_arm.read_text(encoding="utf-8"))
        for key, value in source.items():
            document[key] = value
    document["name"] = name
    for key, value in (("agent", agent), ("task", task), ("simulator", simulator)):
        if value is not None:
            document[key] = value
    text = tomlkit.dumps(document)
    parse_arm(text, target)  # refuse to write an arm that would not load
    env.arms_dir.mkdir(parents=True, exist_ok=True)
    with open(target, "x", encoding="utf-8") as handle:
        handle.write(text)
    return target
