"""Is a started server ready? Its agent card answers, and the listener on its port is that child (or a descendant):
a port that answers from someone else's process is not this arm's server."""

from __future__ import annotations

import json
import os
import socket
import struct
import urllib.error
import urllib.request
from typing import Any

import psutil

from mcu_arms.contracts.wire import AGENT_CARD_PATH
from mcu_arms.procs import descendants

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


def listener_owner(port: int, leader: psutil.Process) -> tuple[bool | None, int | None]:
    """Is the listener on `port` the leader or one of its descendants?

    Returns (True/False, listening pid) or (None, None) when the OS will not say (AccessDenied): the caller then
    relies on the card alone and says so. The kernel is asked for the listening sockets alone (sock_diag), which are
    then looked for among the tree's descriptors: reading the TCP tables instead, as psutil does, walks every
    connection of the host, ~12 ms a check once a campaign has left thousands in TIME_WAIT. Where sock_diag is not
    to be had, the tree's own sockets are read through psutil; only a port not held by the tree is looked up among
    every process's, to name its holder.
    """
    tree = [leader, *descendants(leader)]
    inodes = listening_inodes(port)
    if inodes is None:
        holder = next((process.pid for process in tree if _listens_through_psutil(process, port)), None)
    else:
        holder = next((process.pid for process in tree if inodes & _socket_inodes(process.pid)), None)
        if holder is None and not inodes:
            return False, None
    if holder is not None:
        return True, holder
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None, None
    pids = {conn.pid for conn in connections if _listens_on(conn, port) and conn.pid is not None}
    if not pids:
        return False, None
    ours = pids & {process.pid for process in tree}
    return (True, min(ours)) if ours else (False, min(pids))


def _listens_through_psutil(process: psutil.Process, port: int) -> bool:
    try:
        return any(_listens_on(conn, port) for conn in process.net_connections(kind="tcp"))
    except psutil.Error:
        return False


def _listens_on(conn: Any, port: int) -> bool:  # psutil's sconn or pconn
    return conn.status == psutil.CONN_LISTEN and bool(conn.laddr) and conn.laddr.port == port


# Linux's sock_diag netlink protocol (linux/inet_diag.h): a dump of the TCP sockets in the states asked for.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_DIAG_REQUEST = struct.Struct("=BBBBI48x")  # family, protocol, extensions, pad, states, socket id (zero: any)
_DIAG_MESSAGE = struct.Struct("=BBBB2s2s16s16sI8sIIIII")  # ..., socket id (source port first), ..., uid, inode
SOCK_DIAG_TIMEOUT_S = 2.0  # a kernel answers a dump at once; past this, psutil is asked instead


def listening_inodes(port: int) -> set[int] | None:
    """The inodes of the TCP sockets listening on `port` (IPv4 and IPv6), from the kernel's listening table alone;
    None where sock_diag cannot be used (not Linux, refused, or no answer in time)."""
    found: set[int] = set()
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as channel:
            channel.settimeout(SOCK_DIAG_TIMEOUT_S)
            for family in (socket.AF_INET, socket.AF_INET6):
                request = _DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
                header = _NLMSG_HEADER.pack(
                    _NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, family, 0
                )
                channel.send(header + request)
                if not _read_dump(channel, port, found):
                    return None
    except (AttributeError, OSError):
        return None
    return found


def _read_dump(channel: socket.socket, port: int, found: set[int]) -> bool:
    """Add the inodes of the dumped sockets on `port` to `found`; False where the kernel answered with an error."""
    while True:
        data = channel.recv(1 << 16)
        offset = 0
        while offset + _NLMSG_HEADER.size <= len(data):
            length, kind, _flags, _sequence, _port_id = _NLMSG_HEADER.unpack_from(data, offset)
            if kind == _NLMSG_DONE:
                return True
            if kind == _NLMSG_ERROR or length < _NLMSG_HEADER.size:
                return False
            fields = _DIAG_MESSAGE.unpack_from(data, offset + _NLMSG_HEADER.size)
            if int.from_bytes(fields[4], "big") == port:
                found.add(fields[-1])
            offset += (length + 3) & ~3
        if not data:
            return False


def _socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process `pid` holds (its /proc/PID/fd links read `socket:[INODE]`)."""
    inodes: set[int] = set()
    directory = f"/proc/{pid}/fd"
    try:
        descriptors = os.listdir(directory)
    except OSError:
        return inodes
    for descriptor in descriptors:
        try:
            target = os.readlink(f"{directory}/{descriptor}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes
