"""Listening sockets bound before a server starts, and handed to it (procs.Child passes the descriptor on): the port
check and the bind are one act, and the server serves on exactly the socket it was given.

Where an episode lands on a node it did not plan on (Slurm), its ports are picked there: the kernel gives a free port
to a bind on port 0, and the socket is held, listening, from that moment until the server serves on it, so no
other process can take the port in between. A port another mcu-arms has reserved here but not bound yet is passed
over (a bounded number of times); a fixed port that is busy aborts, naming who holds it. Nothing is ever signalled.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager

from mcu_arms.contracts.addresses import bind_address, socket_family
from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation.ports import PortRegistry, busy_reason

PICK_ATTEMPTS = 16
BACKLOG = 128


def _listening(host: str, port: int) -> socket.socket:
    """Named TCP (asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets: every small reply would wait ~40 ms for a
    delayed ACK), with SO_REUSEADDR (a TIME_WAIT leftover is no holder)."""
    sock = socket.socket(socket_family(host), socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind_address(host), port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def claim_listener(host: str, port: int | None, reserved: set[int]) -> socket.socket:
    """A socket listening on `host`:`port` (None: a free port), not on one in `reserved`."""
    if port is not None:
        try:
            return _listening(host, port)
        except OSError as error:
            reason = busy_reason(host, port) or f"port {port} on {host} cannot be bound: {error.strerror or error}"
            raise UserError(f"{reason}; the episode is aborted and nothing was signalled") from None
    passed_over: list[socket.socket] = []
    try:
        for _ in range(PICK_ATTEMPTS):
            sock = _listening(host, 0)
            if sock.getsockname()[1] not in reserved:
                return sock
            passed_over.append(sock)  # held until the pick is done, so the kernel offers another port
    finally:
        for sock in passed_over:
            sock.close()
    raise UserError(f"no free port on {host} that another mcu-arms has not reserved, after {PICK_ATTEMPTS} tries")


@contextmanager
def claimed_listeners(
    host: str, wanted: Mapping[str, int | None], env: Mapping[str, str]
) -> Iterator[dict[str, socket.socket]]:
    """One listening socket per role (`wanted`: role -> fixed port, or None for a free one), held for the block."""
    reserved = PortRegistry(env).reserved_by_others(host)
    with ExitStack() as stack:
        yield {role: stack.enter_context(claim_listener(host, port, reserved)) for role, port in wanted.items()}
