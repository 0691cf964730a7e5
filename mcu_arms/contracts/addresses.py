"""Where an arm's servers listen and how they are reached: IP literals only, IPv6 in brackets in every URL.

`ports.host` names the address both servers bind to. Loopback is the default and needs nothing; any other address
(a LAN address, or the wildcard 0.0.0.0 / ::) opens the arm to the network and must be asked for (`expose = true`).
A wildcard is bound as given and reached through the loopback of its family.
"""

from __future__ import annotations

import ipaddress
import socket

LOOPBACK_V4 = "127.0.0.1"
LOOPBACK_V6 = "::1"


def parse_host(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The IP address `host` names; ValueError saying what is allowed when it is not an IP literal."""
    if not host:
        raise ValueError("an empty address would bind every interface; name one (127.0.0.1 by default)")
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(
            f"{host!r} is not an IP address: give an IPv4 or IPv6 literal such as 127.0.0.1 or ::1"
        ) from None


def is_loopback(host: str) -> bool:
    return parse_host(host).is_loopback


def is_wildcard(host: str) -> bool:
    return parse_host(host).is_unspecified


def socket_family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if parse_host(host).version == 6 else socket.AF_INET


def bind_address(host: str) -> str:
    """The address as a socket binds it: without brackets."""
    return str(parse_host(host))


def reach_address(host: str) -> str:
    """The address a client on this host connects to: the bound one, or the loopback of a wildcard's family."""
    address = parse_host(host)
    if address.is_unspecified:
        return LOOPBACK_V6 if address.version == 6 else LOOPBACK_V4
    return str(address)


def url_host(address: str) -> str:
    """An address as the host part of a URL: IPv6 literals in brackets."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def http_url(host: str, port: int) -> str:
    """`http://HOST:PORT` for a server bound to `host`, reachable from this host."""
    return f"http://{url_host(reach_address(host))}:{port}"
