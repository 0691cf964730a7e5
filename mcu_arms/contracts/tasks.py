"""MCU task definitions: the models here, loading from `MCU_benchmark/task_configs/tasks/` below them.

A task file is `<root>/<category>/<task>.yaml`; the task's name is the file's stem and its category the folder.
Only pyyaml and pydantic are imported: `plan` and `tasks` use this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcu_arms.contracts.errors import NESTED_TOO_DEEPLY, UserError, did_you_mean, key_parts, user_error
from mcu_arms.contracts.resources import TASKS_ROOT

ScoringKind = Literal["reward", "milestones", "video"]


class RewardEntry(BaseModel):
    """One reward_cfg / milestone_reward_cfg entry: pays `reward` when counters[event][obj] grows for any obj."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event: str = Field(min_length=1)
    identity: str = Field(min_length=1)
    objects: tuple[str, ...] = Field(min_length=1)
    reward: float = Field(default=1.0, ge=0)
    max_reward_times: int = Field(default=1, ge=1)


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    category: str
    text: str = Field(min_length=1)
    init_commands: tuple[str, ...] = ()
    reward_cfg: tuple[RewardEntry, ...] = ()
    milestones: tuple[RewardEntry, ...] = ()
    thinking: str = ""  # the benchmark's hint of what the task needs; informational
    source: Path | None = None

    @property
    def scoring_kind(self) -> ScoringKind:
        if self.milestones:
            return "milestones"
        if self.reward_cfg:
            return "reward"
        return "video"


TASKS_DIR_ENV = "MCU_TASKS_DIR"

# File key -> TaskSpec field. The file keeps the benchmark's own key names so upstream files read unchanged.
_FILE_KEYS: dict[str, str] = {
    "text": "text",
    "custom_init_commands": "init_commands",
    "reward_cfg": "reward_cfg",
    "milestone_reward_cfg": "milestones",
    "thinking": "thinking",
}
_FIELD_TO_FILE_KEY: dict[str, str] = {field: key for key, field in _FILE_KEYS.items()}


def _file_key(field_key: str) -> str:
    """A TaskSpec field's dotted key as the task file spells it (`milestones[0].event` -> `milestone_reward_cfg...`)."""
    head, _, rest = field_key.partition("[")
    head, dot, tail = head.partition(".")
    return _FIELD_TO_FILE_KEY.get(head, head) + (dot + tail if dot else "") + (f"[{rest}" if rest else "")


# Hydra composition lists in upstream MCU files; they carry no task facts.
_IGNORED_KEYS: frozenset[str] = frozenset({"defaults"})


def tasks_root(root: Path | str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The folder of category folders: `root` if given, else $MCU_TASKS_DIR, else the packaged TASKS_ROOT."""
    if root is not None:
        return Path(root)
    override = (env if env is not None else os.environ).get(TASKS_DIR_ENV)
    return Path(override) if override else TASKS_ROOT


def _line_of(node: yaml.Node | None, path: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at `path` (keys and indexes), or of the deepest ancestor found."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in path:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    child = value_node
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
        line = node.start_mark.line + 1
    return line


def load_task(path: Path | str) -> TaskSpec:
    """Read and validate one task file; any problem is a UserError naming the file, line and key."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read task file: {error}", path=path) from None
    try:
        root_node = yaml.compose(source, Loader=yaml.SafeLoader)
        data = yaml.safe_load(source)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(error, "problem", None) or str(error)
        raise UserError(f"not valid YAML: {problem}", path=path, line=line) from None
    except RecursionError:
        raise UserError(NESTED_TOO_DEEPLY, path=path) from None
    if not isinstance(data, dict):
        raise UserError(
            "a task file must be a mapping of keys",
            path=path,
            line=_line_of(root_node, ()),
            allowed=", ".join(_FILE_KEYS),
        )
    fields: dict[str, Any] = {"name": path.stem, "category": path.parent.name, "source": path}
    for key, value in data.items():
        if key in _IGNORED_KEYS:
            continue
        if key not in _FILE_KEYS:
            raise UserError(
                f"unknown key{did_you_mean(key, _FILE_KEYS)}",
                path=path,
                line=_line_of(root_node, (key,)),
                key=str(key),
                allowed=", ".join(_FILE_KEYS),
            )
        if value is not None:  # an empty key means "none", e.g. `custom_init_commands:` with nothing under it
            fields[_FILE_KEYS[key]] = value
    if "text" not in fields:
        raise UserError("missing the task text", path=path, line=1, key="text")
    try:
        task = TaskSpec.model_validate(fields)
    except ValidationError as error:
        raise user_error(
            error, path=path, key_of=_file_key, line_of=lambda key: _line_of(root_node, key_parts(key))
        ) from None
    for file_key, entries in (("reward_cfg", task.reward_cfg), ("milestone_reward_cfg", task.milestones)):
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            if entry.identity in seen:
                raise UserError(
                    f"duplicate identity '{entry.identity}' (each entry needs its own)",
                    path=path,
                    line=_line_of(root_node, (file_key, index, "identity")),
                    key=f"{file_key}[{index}].identity",
                )
            seen.add(entry.identity)
    return task


def _category_dirs(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        raise UserError(
            f"task folder not found (set {TASKS_DIR_ENV} to a folder of <category>/<task>.yaml files)", path=root
        )
    return {child.name: child for child in sorted(root.iterdir()) if child.is_dir() and any(child.glob("*.yaml"))}


def load_category(category: str, root: Path | str | None = None) -> list[TaskSpec]:
    """All tasks of one category, sorted by name; an unknown category lists the valid ones."""
    folders = _category_dirs(tasks_root(root))
    if category not in folders:
        raise UserError(
            f"unknown task category '{category}'{did_you_mean(category, folders)}",
            path=tasks_root(root),
            key="task_category",
            allowed=", ".join(folders),
        )
    return [load_task(path) for path in sorted(folders[category].glob("*.yaml"))]


def select_tasks(category: str, names: list[str] | None, root: Path | str | None = None) -> list[TaskSpec]:
    """The named tasks of a category in the order given (all of them when `names` is None or empty)."""
    tasks = load_category(category, root)
    if not names:
        return tasks
    by_name = {task.name: task for task in tasks}
    chosen: list[TaskSpec] = []
    for name in names:
        if name not in by_name:
            raise UserError(
                f"unknown task '{name}' in category '{category}'{did_you_mean(name, by_name)}",
                key="tasks",
                allowed=", ".join(by_name),
            )
        if by_name[name] in chosen:
            raise UserError(f"task '{name}' is listed twice", key="tasks")
        chosen.append(by_name[name])
    return chosen


def all_tasks(root: Path | str | None = None) -> dict[str, list[TaskSpec]]:
    """Every category's tasks, categories in name order."""
    folder = tasks_root(root)
    return {category: load_category(category, folder) for category in _category_dirs(folder)}
