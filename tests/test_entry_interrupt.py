"""Ctrl-C raised inside code that cannot pass an exception on (a finaliser here; a C extension calling back into
Python did it in CI) is not lost: no "Exception ignored" traceback, and the command still ends with exit 130. Nor is
one that such code wraps in an error of its own (pydantic-core's SchemaError did it in CI)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import signal, sys, time, types
sys.argv = ["mcu-arms", "probe"]
from mcu_arms import entry
{unhook}

class Finaliser:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
        for _ in range(10_000):  # the handler runs here, inside the finaliser, whose exceptions are written off
            pass

def app():
    written_off = Finaliser()
    del written_off
    deadline = time.monotonic() + {wait_s}
    while time.monotonic() < deadline:  # until the interruption is delivered again
        pass
    print("never interrupted")

sys.modules["mcu_arms.cli"] = types.SimpleNamespace(app=app)
entry.main()
"""


def _probe(unhook: str = "", wait_s: float = 30) -> subprocess.CompletedProcess[str]:
    code = PROBE.format(unhook=unhook, wait_s=wait_s)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_an_interruption_written_off_by_a_finaliser_is_delivered_again() -> None:
    done = _probe()
    assert done.returncode == 130, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.strip() == "mcu-arms: interrupted"
    assert "never interrupted" not in done.stdout


def test_without_the_hook_the_probe_shows_the_failure_it_guards_against() -> None:
    """The probe really raises inside the finaliser: with Python's own hook the interruption is lost."""
    done = _probe("sys.unraisablehook = sys.__unraisablehook__", wait_s=1)
    assert "Exception ignored" in done.stderr and "Interrupted: SIGINT" in done.stderr, done.stderr
    assert done.returncode == 0 and "never interrupted" in done.stdout


WRAPPED = """
import signal, sys, types
sys.argv = ["mcu-arms", "probe"]
from mcu_arms import entry

def app():
    try:
        signal.raise_signal(signal.SIGINT)  # the handler raises the interruption here
        for _ in range(10_000):
            pass
    except BaseException as error:  # as pydantic-core building a validator does: its own error, only the text kept
        {wrap}
    print("never interrupted")

sys.modules["mcu_arms.cli"] = types.SimpleNamespace(app=app)
entry.main()
"""


def test_an_interruption_wrapped_in_another_error_still_ends_as_one() -> None:
    for wrap in (
        'raise ValueError(f"Error building validator: {type(error).__name__}: {error}") from None',
        'raise RuntimeError("wrapped") from error',
    ):
        code = WRAPPED.format(wrap=wrap)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 130, (wrap, done.stdout + done.stderr)
        assert done.stderr.strip() == "mcu-arms: interrupted", (wrap, done.stderr)
        assert "never interrupted" not in done.stdout


def test_an_error_that_carries_no_interruption_is_still_a_traceback() -> None:
    code = WRAPPED.format(wrap='raise ValueError("a bug") from None').replace(
        "signal.raise_signal(signal.SIGINT)", "raise KeyError('not a signal')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" in done.stderr and "ValueError: a bug" in done.stderr, done.stderr
