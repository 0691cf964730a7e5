"""The `mcu-arms` entry point, kept tiny so that Ctrl-C at any moment, even while the CLI is still importing, ends
in one line and exit code 130, never a traceback.

SIGINT raises `Interrupted`, which is not a KeyboardInterrupt: click would turn that into "Aborted!" and exit 1.
Commands that handle signals themselves (`run`, the servers) install their own handlers and restore this one.
"""

from __future__ import annotations

import signal
import sys

EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """Ctrl-C outside a command's own signal handling."""


def _interrupt(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupt)
    try:
        from mcu_arms.cli import app

        app()
    except Interrupted:
        sys.stderr.write("\nmcu-arms: interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
