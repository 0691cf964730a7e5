"""A research project's settings: the defaults a user would otherwise pass to every command, kept in
`mcu-arms.toml` (or a `[tool.mcu-arms]` table of `pyproject.toml`) at the top of their own repository.

Commands find the project the way git, ruff and pytest find theirs: from the current directory up to the first
folder holding either file. Flags and environment variables still win over it; without one, every default is taken
from the current directory, as before projects existed. Relative paths in the file are taken from its folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mcu_arms.contracts.errors import UserError, did_you_mean
from mcu_arms.contracts.toml_text import parse_toml, toml_line

SETTINGS_FILE = "mcu-arms.toml"
PYPROJECT_FILE = "pyproject.toml"
PYPROJECT_TABLE = ("tool", "mcu-arms")
STATE_DIR_ENV = "MCU_ARMS_STATE_DIR"  # layout.py's; repeated here to stay below it
CODEX_ROOT_ENV = "MCU_CODEX_ROOT"


class ProjectSettings(BaseModel):
    """The keys of a settings file; each path relative to the file's folder."""

    model_config = ConfigDict(extra="forbid", strict=True)

    arms_dir: str | None = None  # the arm files (default: arms/)
    output_dir: str | None = None  # where runs are written and read (default: output/)
    state_dir: str | None = None  # host-wide state: ports, locks (default: /var/tmp/mcu-arms-$USER)
    codex_root: str | None = None  # the codex agents' homes (default: /var/tmp/mcu-codex-$USER)


# Each setting that is an environment variable downstream: the file fills it in where the environment does not.
ENVIRONMENT_SETTINGS = {"state_dir": STATE_DIR_ENV, "codex_root": CODEX_ROOT_ENV}


@dataclass(frozen=True)
class Project:
    """The settings file in force and what it says."""

    root: Path  # the folder holding the file: relative paths in it are taken from here
    file: Path
    key_prefix: str  # "" for mcu-arms.toml, "tool.mcu-arms." in a pyproject.toml
    settings: ProjectSettings

    def path(self, value: str) -> Path:
        return self.root / Path(value).expanduser()

    def environment_defaults(self) -> dict[str, str]:
        """The variables the file sets (state_dir, codex_root), as absolute paths."""
        given = self.settings.model_dump(exclude_none=True)
        return {variable: str(self.path(given[key])) for key, variable in ENVIRONMENT_SETTINGS.items() if key in given}

    def describe(self) -> str:
        table = f" [{'.'.join(PYPROJECT_TABLE)}]" if self.key_prefix else ""
        return f"{self.file}{table}"


def _table(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    found: Any = data
    for part in path:
        if not isinstance(found, dict) or part not in found:
            return None
        found = found[part]
    return found if isinstance(found, dict) else None


def load_project(file: Path) -> Project | None:
    """The project `file` defines: None for a pyproject.toml without [tool.mcu-arms]; a UserError naming the file,
    line and key for a bad one."""
    text = file.read_text(encoding="utf-8")
    data = parse_toml(text, file)
    in_pyproject = file.name == PYPROJECT_FILE
    prefix = ".".join(PYPROJECT_TABLE) + "." if in_pyproject else ""
    table = _table(data, PYPROJECT_TABLE) if in_pyproject else data
    if table is None:
        if in_pyproject and _table(data, PYPROJECT_TABLE[:1]) is not None and PYPROJECT_TABLE[1] in data["tool"]:
            raise UserError("must be a table of settings", path=file, key=prefix.rstrip("."))
        return None
    try:
        settings = ProjectSettings.model_validate(table)
    except ValidationError as error:
        problem = error.errors()[0]
        name = ".".join(str(part) for part in problem["loc"])
        known = list(ProjectSettings.model_fields)
        unknown = problem["type"] == "extra_forbidden"
        raise UserError(
            f"unknown setting{did_you_mean(name, known)}"
            if unknown
            else f"must be a path, as a string (not {type(problem['input']).__name__})",
            path=file,
            line=toml_line(text, prefix + name),
            key=prefix + name,
            allowed=", ".join(known) if unknown else None,
        ) from None
    return Project(root=file.parent, file=file, key_prefix=prefix, settings=settings)


def find_project(start: Path) -> Project | None:
    """The project holding `start`: the nearest folder at or above it with mcu-arms.toml, or a pyproject.toml with
    [tool.mcu-arms] (mcu-arms.toml first, when a folder has both); None when there is none up to the root."""
    for folder in (start, *start.parents):
        for name in (SETTINGS_FILE, PYPROJECT_FILE):
            candidate = folder / name
            if candidate.is_file():
                project = load_project(candidate)
                if project is not None:
                    return project
    return None
