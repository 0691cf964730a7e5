"""New arm files, from templates/arm.toml with its comments kept (tomlkit).

Every value lands where the template explains it: a key the template has is set in place, a key the template shows
commented out (`# steps = 12000`) is written on that line, and only a key the template never mentions is added at
the end of its table. A copy of another arm (`--from`) states what its source states and nothing more (the
template's other values are left as comments, so the copy has the source's defaults), and gets "auto" ports unless
ports are asked for, so that it can run beside the arm it was copied from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError

from mcu_arms.arms.spec import ALLOWED, ARM_NAME_PATTERN, AUTO_PORT, arm_path, load_arm, parse_arm
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.resources import ARM_TEMPLATE
from mcu_arms.environment import Environment

# (table, key) -> value; table None is the top level of the file.
Values = dict[tuple[str | None, str], Any]
TABLE_HEADER = re.compile(r"^\[([A-Za-z0-9_.-]+)\]\s*(#.*)?$")


def source_arm_file(env: Environment, given: str) -> Path:
    """`--from` takes a path (one with a / or ending in .toml) or an arm's name, looked up like `--arm`."""
    if "/" in given or given.endswith(".toml"):
        return Path(given) if Path(given).is_absolute() else env.cwd / given
    return arm_path(env.arms_dir, given, key="--from")


def _source_values(path: Path) -> Values:
    load_arm(path)  # a broken source is reported at its own file and line, not at the copy
    source = tomlkit.parse(path.read_text(encoding="utf-8")).unwrap()
    values: Values = {}
    for key, value in source.items():
        if isinstance(value, dict):
            values.update({(key, inner): item for inner, item in value.items()})
        else:
            values[(None, key)] = value
    return values


def _template_text(template: str, given: set[tuple[str | None, str]], *, only_given: bool) -> str:
    """The template with `# key = ...` uncommented for each given (table, key) it shows only as a comment, and,
    with `only_given`, every value it sets that is not given commented out (a copy states what its source states:
    where the source is silent, the copy is too, and gets the same default)."""
    lines = template.splitlines(keepends=True)
    table: str | None = None
    for index, line in enumerate(lines):
        header = TABLE_HEADER.match(line.strip())
        if header:
            table = header.group(1)
            continue
        commented = re.match(r"^#\s?([A-Za-z0-9_]+)\s*=", line)
        if commented and (table, commented.group(1)) in given:
            candidate = line[1:].lstrip(" ")
            try:
                tomlkit.parse(candidate)
            except ParseError:
                continue
            lines[index] = candidate
            given = given - {(table, commented.group(1))}
            continue
        written = re.match(r"^([A-Za-z0-9_]+)\s*=", line)
        if only_given and written and (table, written.group(1)) not in given:
            lines[index] = f"# {line}"
    return "".join(lines)


def arm_text(values: Values, *, only_given: bool = False) -> str:
    """The template with `values` set, each where the template explains it (and, with `only_given`, nothing else)."""
    template = _template_text(ARM_TEMPLATE.read_text(encoding="utf-8"), set(values), only_given=only_given)
    document = tomlkit.parse(template)
    for (table, key), value in values.items():
        if table is None:
            document[key] = value
        else:
            if table not in document:
                document[table] = tomlkit.table()
            document[table][key] = value
    return tomlkit.dumps(document)


def new_arm_file(
    env: Environment,
    name: str,
    *,
    agent: str | None = None,
    task: str | None = None,
    simulator: str | None = None,
    from_arm: str | None = None,
    green_port: int | None = None,
    purple_port: int | None = None,
    scenario: Values | None = None,
) -> Path:
    """Write arms/NAME.toml: the template, with a source arm's values (`from_arm`) or an AgentBeats scenario's
    (`scenario`, arms/from_scenario.py) and the given ones set. Never overwrites."""
    if not re.fullmatch(ARM_NAME_PATTERN, name):
        raise UserError(f"'{name}' is not a valid arm name", key="NAME", allowed=ALLOWED["name"])
    target = env.arms_dir / f"{name}.toml"
    if target.exists():
        raise UserError("an arm with this name exists already; pick another name or edit it", path=target)
    if from_arm is not None and scenario is not None:
        raise UserError("give --from or --from-scenario, not both", key="--from-scenario")
    values = _source_values(source_arm_file(env, from_arm)) if from_arm is not None else dict(scenario or {})
    values[(None, "name")] = name
    for key, value in (("agent", agent), ("task", task), ("simulator", simulator)):
        if value is not None:
            values[(None, key)] = value
    for role, port in (("green", green_port), ("purple", purple_port)):
        values[("ports", role)] = port if port is not None else AUTO_PORT
    text = arm_text(values, only_given=from_arm is not None)
    parse_arm(text, target)  # refuse to write an arm that would not load
    env.arms_dir.mkdir(parents=True, exist_ok=True)
    with open(target, "x", encoding="utf-8") as handle:
        handle.write(text)
    return target
