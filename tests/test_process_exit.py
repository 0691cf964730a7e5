"""A command that opts in ends right after its atexit handlers: its status and its output kept, the interpreter's
teardown (which frees the heavy stack, ~0.5 s per process of an episode) skipped."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mcu_arms"

PROBE = """
import atexit, os, sys
sys.argv = ["mcu-arms", "no-such-command"]
from mcu_arms import entry
from mcu_arms.process import process_exit
atexit.register(lambda: print("atexit ran"))
if {armed}:
    process_exit.skip_teardown()

class Teardown:
    def __del__(self):
        os.write(1, b"teardown ran\\n")

kept_until_teardown = Teardown()
sys.stdout.write("buffered, unflushed|")
entry.main()
"""


@pytest.mark.parametrize("armed", [True, False])
def test_an_armed_command_skips_the_teardown_and_keeps_its_status_and_output(armed: bool) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE.format(armed=armed)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr  # click's usage error, as without the early exit
    assert "No such command" in done.stderr
    assert "buffered, unflushed|" in done.stdout and "atexit ran" in done.stdout
    assert ("teardown ran" in done.stdout) is not armed


def test_the_episodes_processes_skip_the_teardown_and_the_module_stands_alone() -> None:
    """The green, the purple, the client and the supervisors arm it; it imports nothing of mcu_arms."""
    for module in ("serve", "evaluate", "run", "run_episode"):
        tree = ast.parse((PACKAGE / "cli" / f"{module}.py").read_text(encoding="utf-8"))
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "skip_teardown"
        ]
        assert calls, module
    tree = ast.parse((PACKAGE / "process" / "process_exit.py").read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.startswith("mcu_arms")]


def test_a_command_run_in_process_never_ends_its_host_process() -> None:
    """Armed by a command a test invokes in-process (CliRunner), with the entry point's `main` never run: the host
    process (pytest) ends as it would have, with its own status."""
    code = (
        "import atexit, sys\n"
        "from mcu_arms.process import process_exit\n"
        "process_exit.skip_teardown()\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "sys.exit(5)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 5 and "atexit ran" in done.stdout
