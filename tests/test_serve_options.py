"""`serve purple`'s options are PurpleOptions' fields (one declaration: name, type, help), the same flags as the
command lines `plan` writes; what they carry reaches the purple server as PurpleOptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from cli_support import invoke
from typer.main import get_command

import mcu_arms.purple.server as purple_server
from mcu_arms.cli import app
from mcu_arms.contracts.settings import OPTIONS_FROM_ENVIRONMENT, PurpleOptions, flag_for


def _purple_command_options() -> dict[str, Any]:
    root = get_command(app)
    serve = root.get_command(click.Context(root), "serve")  # type: ignore[attr-defined] - the root is a group
    command = serve.commands["purple"]
    return {param.opts[0]: param for param in command.params if param.opts}


def test_each_purple_option_is_a_flag_with_the_fields_help() -> None:
    shown = _purple_command_options()
    for field, info in PurpleOptions.model_fields.items():
        option = shown[flag_for(field)]
        assert option.help == info.description and option.default is None, field
        assert option.envvar == OPTIONS_FROM_ENVIRONMENT.get(field), field
    assert shown["--planner-thinking"].metavar == "true|false"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `serve purple` hands the purple server, instead of serving."""
    seen: dict[str, Any] = {}

    def record(kind: str, options: PurpleOptions, host: str, port: int, card_url: str | None, **kw: Any) -> None:
        seen.update(kind=kind, options=options, host=host, port=port)

    monkeypatch.setattr(purple_server, "serve_purple", record)
    return seen


def test_the_command_line_plan_writes_gives_the_purple_exactly_its_options(
    tmp_path: Path, served: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = PurpleOptions(
        seed=3,
        output_dir=tmp_path / "purple",
        step_timeout=5,
        planner_thinking=True,
        policy_backend="chat",
        planner_timeout=2.5,
        planner_base_url="http://127.0.0.1:8000/v1",
    )
    for name, value in options.environment().items():  # the options kept off the command line
        monkeypatch.setenv(name, value)
    assert "--planner-base-url" not in options.argv()
    done = invoke(tmp_path, {}, "serve", "purple", "--agent", "noop", "--port", "9100", *options.argv())
    assert done.exit_code == 0, done.err
    assert served["options"] == options and served["kind"] == "noop" and served["port"] == 9100


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--planner-thinking", "maybe", "flag '--planner-thinking'"),
        ("--policy-backend", "telepathy", "flag '--policy-backend'"),
        ("--step-timeout", "0", "flag '--step-timeout'"),
    ],
)
def test_a_bad_option_value_names_its_flag(
    tmp_path: Path, served: dict[str, Any], flag: str, value: str, said: str
) -> None:
    done = invoke(tmp_path, {}, "serve", "purple", "--agent", "noop", flag, value)
    assert done.exit_code == 2 and said in done.err + done.out and not served


def test_the_generated_options_leave_the_commands_own_untouched() -> None:
    shown = _purple_command_options()
    assert {"--agent", "--host", "--port", "--card-url", "--expose"} <= set(shown)
    assert len(shown) == 5 + len(PurpleOptions.model_fields)
