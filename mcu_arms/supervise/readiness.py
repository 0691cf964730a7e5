"""Is a started server ready? Its agent card answers, and the listener on its port is that child (or a descendant):
a port that answers from someone else's process is not this arm's server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

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
    relies on the card alone and says so.
    """
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None, None
    pids = {
        conn.pid
        for conn in connections
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid is not None
    }
    if not pids:
        return False, None
    tree = {leader.pid, *(p.pid for p in descendants(leader))}
    ours = pids & tree
    return (True, min(ours)) if ours else (False, min(pids))
