"""Is a started server ready? Its agent card answers, and the listener on its port is that child (or a descendant):
a port that answers from someone else's process is not this arm's server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import psutil

from mcu_arms.contracts.wire import AGENT_CARD_PATH
from mcu_arms.procs import descendants


def card_answers(url: str, timeout_s: float = 1.0) -> bool:
    """True when the A2A agent card at `url` answers with a JSON object."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + AGENT_CARD_PATH, timeout=timeout_s) as response:
            return response.status == 200 and isinstance(json.loads(response.read()), dict)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def listener_owner(port: int, leader: psutil.Process) -> tuple[bool | None, int | None]:
    """Is the listener on `port` the leader or one of its descendants?

    Returns (True/False, listening pid) or (None, None) when the OS will not say (AccessDenied): the caller then
    relies on the card alone and says so. The leader's own sockets are looked at first (a fraction of a millisecond);
    only a port not held by them is looked up among every process's (~10 ms on a quiet host, more on a busy one), to
    name its holder.
    """
    tree = [leader, *descendants(leader)]
    for process in tree:
        try:
            if any(_listens_on(conn, port) for conn in process.net_connections(kind="tcp")):
                return True, process.pid
        except psutil.Error:
            continue
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None, None
    pids = {conn.pid for conn in connections if _listens_on(conn, port) and conn.pid is not None}
    if not pids:
        return False, None
    ours = pids & {process.pid for process in tree}
    return (True, min(ours)) if ours else (False, min(pids))


def _listens_on(conn: Any, port: int) -> bool:  # psutil's sconn or pconn
    return conn.status == psutil.CONN_LISTEN and bool(conn.laddr) and conn.laddr.port == port
