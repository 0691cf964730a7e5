"""Every command explains itself: `--help` works and says something for each command and sub-command."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from mcu_arms import __version__
from mcu_arms.cli import app


def all_commands(group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command under `group`, sub-commands included (typer ships its own click, so duck-typed)."""
    found = []
    for name, command in group.commands.items():
        found.append(((*prefix, name), command))
        if hasattr(command, "commands"):
            found += all_commands(command, (*prefix, name))
    return found


def test_every_command_has_help_text():
    root = typer.main.get_command(app)
    commands = all_commands(root)
    names = {" ".join(path) for path, _ in commands}
    assert {"plan", "run", "compare", "status", "stop", "new", "codex-home", "doctor", "tasks", "evaluate",
            "serve green", "serve purple"} <= names
    for path, command in commands:
        assert (command.help or "").strip(), f"`mcu-arms {' '.join(path)}` has no help text"
        result = CliRunner().invoke(app, [*path, "--help"])
        assert result.exit_code == 0, result.output
        for parameter in command.params:
            if parameter.param_type_name == "option" and parameter.name != "help":
                assert (parameter.help or "").strip(), f"`mcu-arms {' '.join(path)} {parameter.opts[0]}` has no help"


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"mcu-arms {__version__}"
