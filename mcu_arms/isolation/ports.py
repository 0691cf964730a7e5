"""Is a port free, and who holds it? Never frees a port: a busy one aborts the run.

A port is free only if a bind probe on the exact host succeeds (with SO_REUSEADDR, as uvicorn binds, so a
TIME_WAIT leftover is not mistaken for a listener), nothing accepts a connection there, and no other live mcu-arms
process has reserved it while it prepares its own arm. Reservations live in a small JSON registry guarded by a file
lock on local disk.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

from mcu_arms.atomic import write_json_atomic
from mcu_arms.contracts.addresses import (
    bind_address,
    is_loopback,
    is_wildcard,
    parse_host,
    reach_address,
    socket_family,
)
from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation.locks import locked
from mcu_arms.layout import STATE_DIR_ENV, prepared_state_dir, state_dir


@dataclass(frozen=True)
class PortHolder:
    pid: int | None
    name: str | None

    def describe(self) -> str:
        if self.pid is None:
            return "another process (not visible to this user)"
        return f"pid {self.pid} ({self.name or 'unknown'})"


def local_address_reason(host: str) -> str | None:
    """Why `host` cannot be bound on this machine (not an IP, or not one of its addresses), or None."""
    try:
        address = parse_host(host)
    except ValueError as error:
        return str(error)
    if is_loopback(host) or is_wildcard(host):
        return None
    local = {entry.address.split("%")[0] for entries in psutil.net_if_addrs().values() for entry in entries}
    if str(address) not in local:
        return f"{host} is not an address of this host (its addresses: {', '.join(sorted(local)) or 'none'})"
    return None


def _bind_probe(host: str, port: int) -> OSError | None:
    with socket.socket(socket_family(host), socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind_address(host), port))
            probe.listen(1)
        except OSError as error:
            return error
    return None


def _accepts_connections(host: str, port: int) -> bool:
    with socket.socket(socket_family(host), socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((reach_address(host), port)) == 0


def listener_pids(port: int) -> set[int]:
    """Pids listening on `port` on any address, where the OS lets us see them."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, PermissionError):
        return set()
    return {
        conn.pid
        for conn in connections
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid is not None
    }


def port_holder(port: int) -> PortHolder | None:
    pids = sorted(listener_pids(port))
    if not pids:
        return None
    try:
        name = psutil.Process(pids[0]).name()
    except psutil.Error:
        name = None
    return PortHolder(pid=pids[0], name=name)


def busy_reason(host: str, port: int) -> str | None:
    """Why `port` cannot be used on `host`, or None when it is free. Touches nothing."""
    bind_error = _bind_probe(host, port)
    if bind_error is not None:
        if bind_error.errno == errno.EADDRINUSE:
            holder = port_holder(port)
            who = holder.describe() if holder else "another process (not visible)"
            return f"port {port} on {host} is in use by {who}"
        return f"port {port} on {host} cannot be bound: {bind_error.strerror}"
    if _accepts_connections(host, port):
        holder = port_holder(port)
        who = holder.describe() if holder else "another process"
        return f"port {port} on {host} accepts connections from {who}"
    return None


def pick_free_port(host: str, avoid: Iterable[int] = ()) -> int:
    """A port the OS reports free now (for `"auto"`), not one in `avoid` (a set is used as it is, not copied)."""
    avoid_set = avoid if isinstance(avoid, set | frozenset) else set(avoid)
    for _ in range(64):
        with socket.socket(socket_family(host), socket.SOCK_STREAM) as probe:
            probe.bind((bind_address(host), 0))
            port = probe.getsockname()[1]
        if port not in avoid_set and busy_reason(host, port) is None:
            return port
    raise UserError(f"could not find a free port on {host}")


class PortRegistry:
    """Ports reserved by live mcu-arms processes that are still preparing or running their arms."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.directory = state_dir(env)
        self.path = self.directory / "ports.json"
        self.lock_path = self.directory / "ports.json.lock"

    def _load(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError, RecursionError):
            return {}

    def _save(self, entries: dict[str, dict]) -> None:
        write_json_atomic(self.path, entries)

    @staticmethod
    def _alive(entry: dict) -> bool:
        try:
            process = psutil.Process(entry["pid"])
            return process.is_running() and abs(process.create_time() - entry["create_time"]) < 0.01
        except (psutil.Error, KeyError):
            return False

    def reserved_by_others(self, host: str) -> set[int]:
        """Ports on `host` that another live mcu-arms has reserved (and may not have bound yet)."""
        if not self.directory.is_dir():
            return set()
        me = psutil.Process().pid
        with locked(self.lock_path):
            entries = self._load()
        prefix = f"{host}:"
        return {
            int(key[len(prefix) :])
            for key, entry in entries.items()
            if key.startswith(prefix) and entry.get("pid") != me and self._alive(entry)
        }

    @contextmanager
    def reserve(self, host: str, ports: Mapping[int, str], owner: str) -> Iterator[None]:
        """Check each port free and not reserved by a live process, then hold it until the block ends.

        `ports` maps port -> role (for messages). Raises UserError naming every busy port; nothing is signalled.
        """
        prepared_state_dir(self.directory)
        me = psutil.Process()
        try:
            self._claim(host, ports, owner, me)
        except OSError as error:
            raise UserError(
                f"the port registry cannot be used: {error.strerror or error}",
                path=error.filename or self.path,
                key=STATE_DIR_ENV,
            ) from None
        try:
            yield
        finally:
            try:
                self._release(host, ports, me)
            except OSError:  # a full or read-only state dir: the reservation lapses when this process ends (_alive)
                pass

    def _release(self, host: str, ports: Mapping[int, str], me: psutil.Process) -> None:
        with locked(self.lock_path):
            entries = self._load()
            for port in ports:
                if entries.get(f"{host}:{port}", {}).get("pid") == me.pid:
                    del entries[f"{host}:{port}"]
            self._save(entries)

    def _claim(self, host: str, ports: Mapping[int, str], owner: str, me: psutil.Process) -> None:
        with locked(self.lock_path):
            entries = {key: value for key, value in self._load().items() if self._alive(value)}
            problems = []
            for port, role in ports.items():
                key = f"{host}:{port}"
                held = entries.get(key)
                if held and held["pid"] != me.pid:
                    problems.append(
                        f"{role} port {port} on {host} is reserved by mcu-arms pid {held['pid']} for arm "
                        f"'{held.get('owner')}'"
                    )
                    continue
                reason = busy_reason(host, port)
                if reason:
                    problems.append(f"{role} {reason}")
            if problems:
                raise UserError("; ".join(problems) + " — the run is aborted and nothing was signalled")
            for port in ports:
                entries[f"{host}:{port}"] = {"pid": me.pid, "create_time": me.create_time(), "owner": owner}
            self._save(entries)
