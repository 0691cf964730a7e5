"""Ending a process that has done its work without the interpreter's own teardown.

After its last atexit handler CPython frees every module and object it still holds; for a process that imported the
heavy stack (a server, the client, the supervisor) that takes about half a second, paid by each of the four processes
of every episode. A command that opts in (`skip_teardown`) ends as soon as the atexit handlers have run (non-daemon
threads are joined before them) and the standard streams are flushed, with the exit status it would have had. Every
file the project writes is closed, or written through an unbuffered descriptor, before then.
"""

from __future__ import annotations

import atexit
import os
import sys

# The status the entry point's `main` ended with; None while it has not (then nothing here acts: a command run
# in-process, by a test, never ends its host process).
exit_status: int | None = None
_armed = False


def install() -> None:
    """Called first thing by the entry point: the handler must be registered before any other, so that it runs last."""
    atexit.register(_end_now)


def skip_teardown() -> None:
    """This command's process ends right after its atexit handlers (see the module's docstring)."""
    global _armed
    _armed = True


def record_exit(status: int | str | None) -> None:
    """The status `main` ends with (a SystemExit's code: None is 0, a message is 1; an exception that escaped: 1)."""
    global exit_status
    exit_status = status if isinstance(status, int) else (0 if status is None else 1)


def _end_now() -> None:
    if not _armed or exit_status is None:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_status)
