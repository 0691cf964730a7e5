"""The reference pages, generated from the code at every `mkdocs build` (an mkdocs hook), never written by hand.

Every command and option comes from the click command tree of `mcu-arms`; every arm-file key from the pydantic model
`ArmSpec` (type, default), the allowed values `mcu_arms.arms.spec.ALLOWED` states and the comment `templates/arm.toml`
gives it; the campaign keys likewise; the schemas from the report models; exit codes, environment variables and
limits from the constants that define them. `tests/test_docs.py` imports this module to check that nothing is left
without an entry.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mcu_arms"
GENERATED = "reference/{}.md"
KEY_LINE = re.compile(r"^#?\s?([A-Za-z0-9_]+)\s*=\s*(.*)$")
TABLE_LINE = re.compile(r"^#?\s?\[{1,2}([A-Za-z0-9_.-]+)\]{1,2}\s*(#.*)?$")
CONTINUATION = re.compile(r"^#\s{8,}#\s?(.*)$")
INLINE_COMMENT = re.compile(r"\s{2,}#\s?(.*)$")


# ---------------------------------------------------------------- commands


@dataclass
class Option:
    names: list[str]
    kind: str
    default: str
    help: str


@dataclass
class Command:
    path: str  # "mcu-arms serve green"
    help: str
    usage: str
    options: list[Option] = field(default_factory=list)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _param_kind(param: Any) -> str:
    """What a parameter takes, from the annotation typer built it from (typer ships its own click)."""
    if getattr(param, "is_flag", False):
        return "flag"
    described = getattr(param, "type_descriptor", None)
    annotation = getattr(described, "annotation", None)
    if annotation is None:
        return "text"
    if typing.get_origin(annotation) is list:
        return _type_name(typing.get_args(annotation)[0]) + " ..."
    return _type_name(annotation)


def _default(param: Any) -> str:
    value = param.default
    if value is None or value in ((), []) or (getattr(param, "is_flag", False) and value is False):
        return ""
    if callable(value):
        return "(computed)"
    return f"`{value}`"


def commands() -> list[Command]:
    """Every command of `mcu-arms`, subcommands included, in the order `--help` lists them."""
    import typer

    from mcu_arms.cli import app

    root = typer.main.get_command(app)
    found: list[Command] = []

    def walk(command: Any, path: str, parent: Any) -> None:
        context = command.context_class(command, info_name=path.split()[-1], parent=parent)
        found.append(
            Command(
                path=path,
                help=inspect.cleandoc(command.help or command.short_help or ""),
                usage=" ".join(command.collect_usage_pieces(context)),
                options=[
                    Option(
                        names=list(param.opts) + list(getattr(param, "secondary_opts", [])),
                        kind=_param_kind(param),
                        default=_default(param),
                        help=inspect.cleandoc(getattr(param, "help", None) or ""),
                    )
                    for param in command.params
                    if not getattr(param, "hidden", False)
                ],
            )
        )
        if hasattr(command, "list_commands"):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                if sub is not None and not sub.hidden:
                    walk(sub, f"{path} {name}", context)

    walk(root, "mcu-arms", None)
    return found


def cli_page() -> str:
    lines = [
        "# Commands",
        "",
        "Generated from the command line itself at every build: each command, its arguments and options, and its",
        "help text. `mcu-arms COMMAND --help` prints the same.",
        "",
    ]
    for command in commands():
        lines += [f"## `{command.path}`", "", f"```text\n{command.path} {command.usage}\n```", ""]
        if command.help:
            lines += [command.help.replace("\b\n", ""), ""]
        if command.options:
            lines += ["| option | takes | default | what it does |", "| --- | --- | --- | --- |"]
            for option in command.options:
                names = ", ".join(f"`{name}`" for name in option.names)
                lines.append(f"| {names} | {_cell(option.kind)} | {option.default} | {_cell(option.help)} |")
            lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- arm and campaign files


@dataclass
class Key:
    table: str | None
    name: str
    kind: str
    default: str
    allowed: str
    comment: str

    @property
    def dotted(self) -> str:
        return f"{self.table}.{self.name}" if self.table else self.name


def template_comments(text: str) -> dict[str, str]:
    """Per dotted key, what the template says of it: the comment block above a run of key lines, the key's inline
    comment and its continuation lines."""
    comments: dict[str, str] = {}
    table: str | None = None
    block: list[str] = []
    after_key = False
    last: str | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line:
            block, after_key, last = [], False, None
            continue
        header = TABLE_LINE.match(line)
        if header:
            table = header.group(1)
            comments.setdefault(table, " ".join(block).strip())  # what the block above a table says of it
            block, after_key, last = [], False, None
            continue
        continued = CONTINUATION.match(line)
        if continued and last:
            comments[last] += " " + continued.group(1).strip()
            continue
        key = KEY_LINE.match(line)
        if key and line.startswith("#") and not _looks_like_value(key.group(2)):
            key = None
        if key:
            dotted = f"{table}.{key.group(1)}" if table else key.group(1)
            inline = INLINE_COMMENT.search(key.group(2))
            # the block above a run of keys explains the first, and the alternatives shown commented out after it
            explained = block if not after_key or line.startswith("#") else []
            said = " ".join([*explained, inline.group(1).strip() if inline else ""]).strip()
            comments.setdefault(dotted, said)
            after_key, last = True, dotted
            continue
        prose = line.lstrip("#").strip()
        if after_key:
            block, after_key = [], False
        block.append(prose)
        last = None
    return comments


def _looks_like_value(value: str) -> bool:
    """`# seeds = [0, 1]` is a key shown commented out; `# Becomes output/NAME/ = ...` would be prose."""
    value = INLINE_COMMENT.sub("", value).strip()
    return bool(re.match(r'^("|\[|\{|-?[0-9]|true\b|false\b|\')', value))


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(value) for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in typing.get_args(annotation) if arg is not type(None))
    if origin is not None:
        args = ", ".join(_type_name(arg) for arg in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', origin)}[{args}]"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "true/false"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _default_of(info: Any) -> str:
    if info.default is not PydanticUndefined:
        value = info.default
    elif info.default_factory is not None:
        value = info.default_factory()
    else:
        return "required"
    if value is None or isinstance(value, BaseModel) or value in ({}, []):
        return ""
    return f"`{json.dumps(value) if not isinstance(value, str) else json.dumps(value)}`"


def model_keys(model: type[BaseModel], table: str | None, allowed: dict[str, str]) -> Iterator[Key]:
    for name, info in model.model_fields.items():
        inner = _model_of(info.annotation)
        dotted = f"{table}.{name}" if table else name
        if inner is not None:
            yield from model_keys(inner, dotted, allowed)
            continue
        yield Key(table, name, _type_name(info.annotation), _default_of(info), allowed.get(dotted, ""), "")


def arm_keys() -> list[Key]:
    """Every key an arm file may hold, tables included (a registered simulator's own table too)."""
    from mcu_arms.arms.spec import ALLOWED, ArmSpec, simulator_tables_outside_the_spec

    comments = template_comments(_arm_template())
    keys = list(model_keys(ArmSpec, None, ALLOWED))
    for table, model in simulator_tables_outside_the_spec().items():
        keys += model_keys(model, table, ALLOWED)
    for key in keys:
        key.comment = comments.get(key.dotted, "")
    return keys


def _arm_template() -> str:
    from mcu_arms.contracts.resources import ARM_TEMPLATE

    return ARM_TEMPLATE.read_text(encoding="utf-8")


def _campaign_template() -> str:
    from mcu_arms.contracts.resources import ARM_TEMPLATE

    return (ARM_TEMPLATE.parent / "campaign.toml").read_text(encoding="utf-8")


def campaign_keys() -> list[Key]:
    """The campaign file's own keys (its arms' keys are the arm file's)."""
    from mcu_arms.arms.campaign import CAMPAIGN_KEYS, Campaign

    comments = template_comments(_campaign_template())
    fields = Campaign.model_fields
    keys = []
    for name in CAMPAIGN_KEYS:
        info = fields.get(name)
        kind = _type_name(info.annotation) if info is not None else "table"
        default = _default_of(info) if info is not None else ""
        if name == "replicates":
            kind = "integer"
        if name == "baseline":
            kind, default = "table: `arm = NAME` or an arm's keys", "required"
        if name == "variants":
            kind = "array of tables: `name`, `differs_in`, then `arm = NAME` or the baseline's keys it overrides"
        if name == "slurm":
            kind = "table: the arm file's [slurm] keys"
        said = comments.get(name, "")
        if name == "variants":
            said = " ".join(comments.get(f"variants.{inner}", "") for inner in ("name", "differs_in", "agent"))
        if name == "baseline":
            said = comments.get("baseline.arm", "")
        keys.append(Key(None, name, kind, default, "", said))
    return keys


def _keys_table(keys: list[Key]) -> list[str]:
    lines = ["| key | type | default | allowed | the template says |", "| --- | --- | --- | --- | --- |"]
    for key in keys:
        cells = (key.kind, key.default, key.allowed, key.comment)
        lines.append(f"| `{key.dotted}` | " + " | ".join(_cell(cell) for cell in cells) + " |")
    return lines


def arm_file_page() -> str:
    keys = arm_keys()
    top = [key for key in keys if key.table is None]
    lines = [
        "# Arm file",
        "",
        "Generated from the arm model (`mcu_arms/arms/spec.py`) and `templates/arm.toml` at every build. `mcu-arms new",
        "NAME` writes the template with its comments; bad input is an error naming the file, the line, the key and",
        "what is allowed. Which keys make up the fingerprint:",
        "[Arms, fingerprints and comparability](../concepts/arms.md).",
        "",
        "## Top-level keys",
        "",
        *_keys_table(top),
        "",
    ]
    tables: dict[str, list[Key]] = {}
    for key in keys:
        if key.table is not None:
            tables.setdefault(key.table, []).append(key)
    said = template_comments(_arm_template())
    for table, inner in tables.items():
        lines += [f"## `[{table}]`", "", *([said[table], ""] if said.get(table) else []), *_keys_table(inner), ""]
    return "\n".join(lines)


def campaign_file_page() -> str:
    return "\n".join(
        [
            "# Campaign file",
            "",
            "Generated from the campaign model (`mcu_arms/arms/campaign.py`) and `templates/campaign.toml` at every",
            "build. A campaign is a baseline arm, its variants and the seeds every one of them runs; each arm's own",
            "keys are those of the [arm file](arm-file.md).",
            "",
            *_keys_table(campaign_keys()),
            "",
        ]
    )


# ---------------------------------------------------------------- schemas, exit codes, variables, limits


SCHEMAS = {
    "result.json (the run report)": "mcu_arms.contracts.run_report:RunReport",
    "compare --json (the analysis)": "mcu_arms.report.analysis:Analysis",
}


def _load(target: str) -> Any:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """What the source says of each field: its description, else the comment on its line."""
    said: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        for found in re.finditer(r"^    (\w+): [^\n]*?  # ([^\n]*)$", source, re.MULTILINE):
            said[found.group(1)] = found.group(2)
    for name, info in model.model_fields.items():
        if info.description:
            said[name] = info.description
    return said


def _schema_rows(model: type[BaseModel], prefix: str = "", seen: frozenset[type] = frozenset()) -> list[str]:
    rows = []
    said = field_comments(model)
    for name, info in model.model_fields.items():
        inner = _model_of(info.annotation)
        if inner is None:
            for arg in typing.get_args(info.annotation):
                inner = inner or _model_of(arg)
        rows.append(f"| `{prefix}{name}` | {_cell(_type_name(info.annotation))} | {_cell(said.get(name, ''))} |")
        if inner is not None and inner not in seen:
            rows += _schema_rows(inner, f"{prefix}{name}.", seen | {inner})
    return rows


def schemas_page() -> str:
    lines = [
        "# Result and report schemas",
        "",
        "Generated from the pydantic models at every build. Readers accept older files: fields are added, never",
        "given a new meaning (the MCU fields keep upstream's).",
        "",
    ]
    for title, target in SCHEMAS.items():
        model = _load(target)
        lines += [
            f"## {title}",
            "",
            f"`{target.replace(':', '.')}`" + (f": {_cell(inspect.getdoc(model) or '')}" if model.__doc__ else ""),
            "",
            "| field | type | note |",
            "| --- | --- | --- |",
            *_schema_rows(model),
            "",
        ]
    return "\n".join(lines)


EXIT_CODE_MODULES = (
    "mcu_arms.supervise.outcomes",
    "mcu_arms.cli.common",
    "mcu_arms.report.analysis_model",
    "mcu_arms.cli.evaluate",
)


def _constants(module: str, pattern: str) -> list[tuple[str, Any, str]]:
    """(name, value, comment) of each module-level constant whose name matches, with its trailing or preceding
    comment as written in the source."""
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    source = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(source))
    found = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if not re.fullmatch(pattern, name):
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            value = getattr(importlib.import_module(module), name)
        line = source[node.lineno - 1]
        comment = line.split("  # ", 1)[1] if "  # " in line else ""
        above = node.lineno - 2
        preceding: list[str] = []
        while above >= 0 and source[above].startswith("#"):
            preceding.insert(0, source[above].lstrip("# "))
            above -= 1
        found.append((name, value, comment or " ".join(preceding)))
    return found


def exit_codes() -> list[tuple[str, Any, str]]:
    codes = []
    for module in EXIT_CODE_MODULES:
        codes += [(f"{module}.{name}", value, said) for name, value, said in _constants(module, r"EXIT_[A-Z_]+")]
    return codes


def environment_variables() -> list[tuple[str, str]]:
    """Each MCU_* variable the package names, with the module naming it and the comment on its line (or above)."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(source):
            for name in re.findall(r'"(MCU_[A-Z0-9_]*[A-Z0-9])"', line):
                comment = line.split("  # ", 1)[1] if "  # " in line else ""
                if not comment and index and source[index - 1].lstrip().startswith("#"):
                    comment = source[index - 1].strip().lstrip("# ")
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                if name not in found or (comment and not found[name][1]):
                    found[name] = (module, comment)
    return sorted((name, f"`{module}`" + (f": {said}" if said else "")) for name, (module, said) in found.items())


def limits() -> list[tuple[str, Any, str]]:
    return _constants("mcu_arms.contracts.limits", r"[A-Z_]+")


def exits_env_limits_page() -> str:
    lines = [
        "# Exit codes, environment variables, limits",
        "",
        "Generated from the constants that define them, at every build.",
        "",
        "## Exit codes",
        "",
        "| constant | code | meaning |",
        "| --- | --- | --- |",
        *(f"| `{name}` | {value} | {_cell(said)} |" for name, value, said in exit_codes()),
        "",
        "`run` exits 0 when every episode finished (or was stopped by `mcu-arms stop`, as asked), 1 when one failed,",
        "130 when interrupted; every command exits 2 on bad input (a one-line error naming file, line and key).",
        "`compare` exits 0 when the arms are comparable, 1 when they are not (or one has no finished episode), 3 when",
        "a result cannot be trusted because of infrastructure trouble. Every command's codes, in one table:",
        "[Reading the verdict](../tutorial/reading-the-verdict.md).",
        "",
        "## Environment variables",
        "",
        "Variables named `MCU_ARMS_*` that a command reads are also its options (`--output-dir` and",
        "`MCU_ARMS_OUTPUT_DIR`); the others are set by mcu-arms for the processes it starts, or read by an agent.",
        "",
        "| variable | where, and what |",
        "| --- | --- |",
        *(f"| `{name}` | {_cell(said)} |" for name, said in environment_variables()),
        "",
        "## Limits",
        "",
        "Each is enforced where the value is read, with an error naming the limit (`mcu_arms/contracts/limits.py`).",
        "",
        "| limit | value | why |",
        "| --- | --- | --- |",
        *(f"| `{name}` | `{value!r}` | {_cell(said)} |" for name, value, said in limits()),
        "",
    ]
    return "\n".join(lines)


PAGES = {
    "cli": cli_page,
    "arm-file": arm_file_page,
    "campaign-file": campaign_file_page,
    "schemas": schemas_page,
    "exit-codes-env-limits": exits_env_limits_page,
}


def on_files(files: Any, config: Any) -> Any:
    """The mkdocs hook: each generated page added to the site as if it were a file in docs/reference/."""
    from mkdocs.structure.files import File

    for name, render in PAGES.items():
        files.append(File.generated(config, GENERATED.format(name), content=render()))
    return files


def write(target: Path) -> None:
    """The pages as files (`python docs/hooks/reference.py DIR`), to read them without building the site."""
    for name, render in PAGES.items():
        path = target / GENERATED.format(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    import sys

    write(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "site-reference")
