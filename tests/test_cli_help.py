"""Every command explains itself: `--help` works and says something for each command and sub-command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from mcu_arms import __version__
from mcu_arms.cli import app
from mcu_arms.version import tool_identity


def all_commands(group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command under `group`, sub-commands included, as click lists them (the root imports each on lookup)."""
    found = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        found.append(((*prefix, name), command))
        if hasattr(command, "commands"):
            found += all_commands(command, (*prefix, name))
    return found


def test_every_command_has_help_text():
    root = typer.main.get_command(app)
    commands = all_commands(root)
    names = {" ".join(path) for path, _ in commands}
    assert {
        "plan",
        "run",
        "compare",
        "status",
        "stop",
        "new",
        "codex-home",
        "doctor",
        "tasks",
        "evaluate",
        "serve green",
        "serve purple",
    } <= names
    for path, command in commands:
        assert (command.help or "").strip(), f"`mcu-arms {' '.join(path)}` has no help text"
        result = CliRunner().invoke(app, [*path, "--help"])
        assert result.exit_code == 0, result.output
        for parameter in command.params:
            if parameter.param_type_name == "option" and parameter.name != "help":
                assert (parameter.help or "").strip(), f"`mcu-arms {' '.join(path)} {parameter.opts[0]}` has no help"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    """The version, and (run from this checkout) that it is one, at which commit."""
    result = CliRunner().invoke(app, [flag])
    assert result.exit_code == 0 and result.output.startswith(f"mcu-arms {__version__} (checkout ")
    assert f"commit {tool_identity().commit[:12]}" in result.output


def test_flags_show_no_type_and_help_texts_keep_their_brackets():
    for path in (["--help"], ["plan", "--help"], ["doctor", "--help"], ["serve", "purple", "--help"]):
        result = CliRunner().invoke(app, path, terminal_width=200)
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output, path
    doctor = CliRunner().invoke(app, ["doctor", "--help"], terminal_width=200).output
    assert "(default: every arm in arms/)" in doctor


SCRIPT = Path(sys.executable).parent / "mcu-arms"


@pytest.mark.skipif(
    not SCRIPT.is_file(), reason=f"no installed mcu-arms script at {SCRIPT} (pip install -e . makes it)"
)
@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_completion_installs_into_home_for_bash_and_completes_commands_flags_and_arm_names(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "demo_pair.toml").write_text('agent = "noop"\n')
    env = {"PATH": f"{SCRIPT.parent}:{os.environ['PATH']}", "HOME": str(home)}
    installed = subprocess.run(
        ["bash", "-c", "mcu-arms --install-completion"],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    script = home / ".bash_completions" / "mcu-arms.sh"
    assert f"source '{script}'" in (home / ".bashrc").read_text()

    def completions(*words: str) -> list[str]:
        line = " ".join(words)
        done = subprocess.run(
            [
                "bash",
                "-c",
                f"source ~/.bashrc; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                '_mcu_arms_completion mcu-arms; printf "%s\\n" "${COMPREPLY[@]}"',
            ],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert completions("mcu-arms", "pl") == ["plan"]
    assert "--rerun" in completions("mcu-arms", "run", "--re")
    assert completions("mcu-arms", "run", "--arm", "demo_") == ["demo_pair"]
    (project / "output" / "demo_ran" / "episode_001").mkdir(parents=True)
    assert completions("mcu-arms", "compare", "demo_") == ["demo_pair", "demo_ran"], "positional arms complete too"
    assert completions("mcu-arms", "view", "demo_r") == ["demo_ran"]


def test_version_is_answered_before_the_cli_is_imported():
    """`mcu-arms --version` (and -V) print the version without importing typer, rich or any command: a start-up of
    the interpreter alone (~0.05 s here, against ~1.2 s for a command's help)."""
    code = (
        "import sys\nfrom mcu_arms.entry import main\n"
        "for flag in ('--version', '-V'):\n    sys.argv = ['mcu-arms', flag]\n    main()\n"
        "print(sorted(name for name in ('typer', 'rich', 'mcu_arms.cli') if name in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    line = f"mcu-arms {tool_identity().describe()}"
    assert done.stdout.splitlines() == [line, line, "[]"], done.stdout + done.stderr
