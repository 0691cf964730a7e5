"""Does a Minecraft server answer, and which version does it run? The Server List Ping, in the standard library.

What the multiplayer screen asks: a handshake (next state: status) and a status request; the answer is a JSON
object with `version.name` ("1.21.1", "Paper 1.21.1") and `version.protocol`. Nothing logs in, so this is what
`doctor` can ask of a server at any time.
"""

from __future__ import annotations

import io
import json
import re
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

PING_TIMEOUT_S = 5.0
MAX_ANSWER_BYTES = 1 << 20


@dataclass(frozen=True)
class ServerStatus:
    version_name: str
    protocol: int
    description: str
    players_online: int | None

    def runs(self, version: str) -> bool:
        """The server says it runs `version` (as one of the versions its name lists)."""
        return version in re.findall(r"\d+\.\d+(?:\.\d+)?", self.version_name)


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFF
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _packet(packet_id: int, payload: bytes) -> bytes:
    body = _varint(packet_id) + payload
    return _varint(len(body)) + body


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection mid-answer")
        data += chunk
    return bytes(data)


def _read_varint(read: Callable[[int], bytes]) -> int:
    value = 0
    for shift in range(0, 35, 7):
        byte = read(1)[0]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
    raise ValueError("a VarInt longer than 5 bytes: not a Minecraft server")


def _text(description: object) -> str:
    if isinstance(description, str):
        return description
    if isinstance(description, dict):
        return str(description.get("text", "")) + "".join(_text(extra) for extra in description.get("extra", []))
    return ""


def server_status(host: str, port: int, timeout_s: float = PING_TIMEOUT_S) -> ServerStatus:
    """The server's status answer; OSError when nothing answers there, ValueError when what answers is no
    Minecraft server."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        address = host.encode("utf-8")
        handshake = _varint(-1) + _varint(len(address)) + address + struct.pack(">H", port) + _varint(1)
        sock.sendall(_packet(0x00, handshake) + _packet(0x00, b""))
        length = _read_varint(lambda size: _read_exactly(sock, size))
        if not 0 < length <= MAX_ANSWER_BYTES:
            raise ValueError(f"a status answer of {length} bytes: not a Minecraft server")
        body = _read_exactly(sock, length)
    reader = io.BytesIO(body)
    try:
        packet_id = _read_varint(reader.read)
        if packet_id != 0x00:
            raise ValueError(f"answered packet {packet_id:#x} to a status request: not a Minecraft server")
        answer = json.loads(reader.read(_read_varint(reader.read)).decode("utf-8"))
        version = answer["version"]
        players = answer.get("players") or {}
        return ServerStatus(
            version_name=str(version["name"]),
            protocol=int(version["protocol"]),
            description=_text(answer.get("description")),
            players_online=players.get("online"),
        )
    except (IndexError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"the status answer is no Minecraft status ({type(error).__name__})") from None
