"""What every command shares: the injected Environment, user-error handling, JSON output."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.text import neutralised
from mcu_arms.environment import Environment

if TYPE_CHECKING:
    from mcu_arms.arms.campaign import Selection
    from mcu_arms.doctor import ArmGroup

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USER_ERROR = 2
GROUP_STYLE = {"ready": "green", "endpoints down": "yellow", "cannot run here": "bold red"}


class _FlagsWithoutType:
    """A flag takes no value, so its help shows no type (typer's rich help would print `<bool>` beside it)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class Command(_FlagsWithoutType, TyperCommand):
    pass


class Group(_FlagsWithoutType, TyperGroup):
    pass


class App(typer.Typer):
    """A Typer whose group and commands show flags without a type."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("cls", Group)
        super().__init__(**options)

    def command(self, *args: Any, **options: Any) -> Any:
        options.setdefault("cls", Command)
        return super().command(*args, **options)


def environment(ctx: typer.Context) -> Environment:
    """The Environment tests passed as `obj`, or the real one."""
    root = ctx.find_root()
    if not isinstance(root.obj, Environment):
        root.obj = Environment()
    return root.obj


def arm_file_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion for `--arm`: the arms in the arms dir."""
    from mcu_arms.arms.spec import arm_files

    return [path.stem for path in arm_files(environment(ctx).arms_dir) if path.stem.startswith(incomplete)]


def ran_arm_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion for the arms `compare`, `view` and `report` read: those that have run, and the arm files."""
    from mcu_arms.layout import known_arms

    ran = [name for name in known_arms(environment(ctx).output_dir) if name.startswith(incomplete)]
    return sorted({*ran, *arm_file_names(ctx, incomplete)})


def reports_user_errors(fn: F) -> F:
    """Turn a UserError into one clear line on stderr and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as error:
            ctx = kwargs.get("ctx")  # typer passes every parameter by name; commands name their context `ctx`
            env = environment(ctx) if ctx is not None else Environment()
            shown = escape(neutralised(error.render()))  # it may quote a file name or a value from output/
            env.err_console.print(f"[bold red]error:[/] {shown}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USER_ERROR) from None

    return wrapper  # type: ignore[return-value]


def report_unreadable(selection: Selection, env: Environment) -> None:
    """Each arm file of the folder that could not be read, one line each, after what could; then exit 2."""
    for error in selection.unreadable:
        env.err_console.print(f"[bold red]error:[/] {escape(error.render())}", highlight=False, soft_wrap=True)
    if selection.unreadable:
        env.err_console.print(
            f"{len(selection.unreadable)} arm file(s) could not be read; the others are shown above", highlight=False
        )
        raise typer.Exit(EXIT_USER_ERROR)


def show_groups(groups: list[ArmGroup], env: Environment) -> None:
    """One line per group of arms, what it needs in a word: ready, endpoints down, or cannot run here."""
    for group in groups:
        env.console.print(f"[{GROUP_STYLE[group.state]}]{escape(group.text())}[/]")


def print_json(env: Environment, payload: BaseModel | Sequence[BaseModel] | dict[str, Any]) -> None:
    """Print machine-readable output, unstyled and unwrapped."""
    if isinstance(payload, BaseModel):
        data: Any = payload.model_dump(mode="json")
    elif isinstance(payload, dict):
        data = payload
    else:
        data = [item.model_dump(mode="json") for item in payload]
    env.console.out(json.dumps(data, indent=2), highlight=False)
