"""The `mcu-arms` entry point, kept tiny so that Ctrl-C at any moment, even while the CLI is still importing, ends
in one line and exit code 130, never a traceback.

The handler is installed by the first statement that runs, before anything else is imported. Until `main` is inside
its `try` there is nothing to clean up, so a SIGINT then ends the process at once; inside, it raises `Interrupted`,
which is not a KeyboardInterrupt: click would turn that into "Aborted!" and exit 1. Once the command is over (or being
reported as interrupted), a further SIGINT is ignored: the process is already on its way out.
Commands that handle signals themselves (`run`, the servers) install their own handlers and restore this one.

Code that cannot pass an exception on (a finaliser, a C extension calling back into Python) writes it off as
"Exception ignored" and carries on: the interruption would be lost and a traceback printed. `_swallowed` catches that
case and delivers the signal again from another thread, so that it lands once that code has returned. Code that
wraps it in an error of its own (pydantic-core building a validator raises a SchemaError whose text ends
"Interrupted: SIGINT") is recognised by that text or by the exception chain, and ends as an interruption too.
"""

import _thread
import signal
import sys

EXIT_INTERRUPTED = 130
INTERRUPTED_LINE = b"\nmcu-arms: interrupted\n"


class Interrupted(BaseException):
    """Ctrl-C outside a command's own signal handling."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_inside_main = False
_in_swallowed_hook = False


def _interrupt(signum: int, _frame: object) -> None:
    if not _inside_main:
        _end_interrupted()
    if _in_swallowed_hook:  # raising here would be written off too
        _deliver_again(signum)
        return
    raise Interrupted(signum)


def _deliver_again(signum: int) -> None:
    """From another thread, so that the signal lands in the main thread once the current code has returned."""
    _thread.start_new_thread(_thread.interrupt_main, (signal.Signals(signum),))


def _swallowed(unraisable: "sys.UnraisableHookArgs") -> None:
    global _in_swallowed_hook
    if not isinstance(unraisable.exc_value, Interrupted):
        _previous_unraisable_hook(unraisable)
        return
    _in_swallowed_hook = True
    try:
        _deliver_again(unraisable.exc_value.signum)
    finally:
        _in_swallowed_hook = False


def _carries_interruption(error: BaseException) -> bool:
    """Is `error` our Interrupted, wrapped by code that raised its own error instead (by chain, or by text only)?"""
    seen: BaseException | None = error
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:  # a chain can loop back on itself
        if isinstance(seen, Interrupted) or f"{Interrupted.__name__}: SIG" in str(seen):
            return True
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return False


def _exit_interrupted() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr.write(INTERRUPTED_LINE.decode())
    raise SystemExit(EXIT_INTERRUPTED) from None


def _end_interrupted() -> None:
    """One line and exit 130 before the command has begun: nothing to unwind, nothing written yet."""
    import os

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.write(2, INTERRUPTED_LINE)
    os._exit(EXIT_INTERRUPTED)


signal.signal(signal.SIGINT, _interrupt)
_previous_unraisable_hook = sys.unraisablehook
sys.unraisablehook = _swallowed

from mcu_arms.process import process_exit  # noqa: E402  (after the handler: nothing may come before it)

process_exit.install()


VERSION_FLAGS = (["--version"], ["-V"])


def main() -> None:
    try:
        _main()
    except SystemExit as done:
        process_exit.record_exit(done.code)
        raise
    except BaseException:
        process_exit.record_exit(1)  # the interpreter's own status once it has printed the traceback
        raise
    process_exit.record_exit(0)


def _main() -> None:
    global _inside_main
    if sys.argv[1:] in VERSION_FLAGS:  # answered before the CLI (typer, rich, every command) is imported
        from mcu_arms.version import tool_identity

        sys.stdout.write(f"mcu-arms {tool_identity().describe()}\n")
        return
    signal.signal(signal.SIGINT, _interrupt)
    _inside_main = True
    try:
        from mcu_arms.process.collector import imports_without_gc

        with imports_without_gc():
            from mcu_arms.cli import app

        app()
    except Interrupted:
        _exit_interrupted()
    except Exception as error:
        if not _carries_interruption(error):
            raise
        _exit_interrupted()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _inside_main = False
