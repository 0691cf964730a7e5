"""Is a started server ready? Its agent card answers on the socket the supervisor bound and handed to it (no one
else holds that socket, so the answer is the server's). A server that binds its own port (one started by a command
of its own) is checked by `listens_in_tree` too."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import psutil

from mcu_arms.contracts.wire import AGENT_CARD_PATH
from mcu_arms.process.procs import descendants

# The most of an agent card read: a card is a few kilobytes; a server that sends more is not serving one.
MAX_CARD_BYTES = 1_000_000


def fetch_card(url: str, timeout_s: float = 1.0) -> Any:
    """The JSON the agent card address of `url` answers with (None: no answer, or no JSON)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + AGENT_CARD_PATH, timeout=timeout_s) as response:
            return json.loads(response.read(MAX_CARD_BYTES)) if response.status == 200 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def card_answers(url: str, timeout_s: float = 1.0) -> bool:
    """True when the A2A agent card at `url` answers with a JSON object."""
    return isinstance(fetch_card(url, timeout_s), dict)


def listens_in_tree(leader: psutil.Process, port: int) -> bool:
    """Does the leader, or one of its descendants, hold a socket listening on `port`? (Each process's own sockets,
    read through psutil: no host-wide scan.)"""
    for process in [leader, *descendants(leader)]:
        try:
            connections = process.net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port for conn in connections):
            return True
    return False
