"""The fork server's template process: `python -m mcu_arms.fork_template FD TOKEN_VARIABLE MODULE... ROOM`.

An entry point, as `__main__` is: it imports the modules it is given (with the collector paused, then frozen), serves
forkserver.py's requests on descriptor FD, and in each forked child (which serve_template has made the process it
was asked for) runs the `mcu-arms` command it was asked for. ROOM (spaces) keeps room in the command line for a
forked child to show its own there.
"""

import importlib
import socket
import sys
from collections.abc import Sequence

from mcu_arms.collector import imports_without_gc
from mcu_arms.forkserver import serve_template


def main(argv: Sequence[str]) -> None:
    channel_fd, token_variable, *modules, _room_for_command_lines = argv

    def preload() -> None:
        with imports_without_gc():
            for name in modules:
                importlib.import_module(name)

    serve_template(socket.socket(fileno=int(channel_fd)), preload, token_variable)
    from mcu_arms.entry import main as command

    command()


if __name__ == "__main__":
    main(sys.argv[1:])
