"""`mcu-arms view`'s server: the Site over HTTP, on loopback unless told otherwise, read-only.

Only the files the Site names are served (no directory is exposed, no link is followed). On loopback a request must
name the server by a loopback host, so a web page elsewhere cannot reach it through a rebound DNS name. On any
other interface every request needs the token from MCU_ARMS_VIEW_TOKEN (as `?token=` once, then a cookie): the
token is the user's, never printed or stored by mcu-arms.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import shutil
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation.ports import busy_reason
from mcu_arms.report.index import IndexRow
from mcu_arms.view.pages import CONTENT_SECURITY_POLICY
from mcu_arms.view.site import ASSETS, INDEX, ROW_ROUTES, RUNS, Content, Site, route_parts, routed_row

LOOPBACK = "127.0.0.1"
TOKEN_ENV = "MCU_ARMS_VIEW_TOKEN"
TOKEN_MIN_CHARS = 16
TOKEN_COOKIE = "mcu_arms_view"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
ROW_SITES_KEPT = 4  # comparisons opened from the index kept built, besides the one `view` was started on


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def view_token(host: str, env: Mapping[str, str]) -> str | None:
    """The token a server on `host` requires: None on loopback; on any other interface one the user set."""
    if is_loopback(host):
        return None
    token = env.get(TOKEN_ENV, "")
    if len(token) < TOKEN_MIN_CHARS:
        raise UserError(
            f"serving on {host} (not loopback) needs a token of at least {TOKEN_MIN_CHARS} characters in "
            f"${TOKEN_ENV}; every request must then carry it",
            key="--host",
            allowed=f'--host {LOOPBACK} (the default), or export {TOKEN_ENV}="$(python3 -c '
            "'import secrets; print(secrets.token_urlsafe())')\"",
        )
    return token


@dataclass
class SiteHolder:
    """The site being served, rebuilt whenever the comparison page is asked for (a new run shows up); and the sites
    of the index's rows opened from it (`build_row`: as the row's command would build it), the latest few kept."""

    build: Callable[[], Site]
    build_row: Callable[[IndexRow], Site] | None = None
    site: Site | None = None
    rows: dict[tuple[str, ...], Site] = field(default_factory=dict)  # by route, the least recently built first
    lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self, rebuild: bool) -> Site:
        with self.lock:
            if self.site is None or rebuild:
                self.site = self.build()
            return self.site

    def routed(self, parts: list[str]) -> tuple[Site, str] | None:
        """The site of the index row that `parts` names and the path within it; None when no row of the index is
        named. Its comparison page builds it again (through the analysis cache); its other files come from the kept
        site."""
        with self.lock:
            for route, site in self.rows.items():
                rest = parts[len(route) :]
                if tuple(parts[: len(route)]) == route and rest not in ([], [""], [INDEX]):
                    return site, "/".join(rest)
        found = routed_row(parts, self.current(rebuild=False).index_rows()) if self.build_row else None
        if found is None or self.build_row is None:
            return None
        row, rest = found
        site = self.build_row(row)
        with self.lock:
            route = tuple(route_parts(row))
            self.rows.pop(route, None)
            self.rows[route] = site
            while len(self.rows) > ROW_SITES_KEPT:
                del self.rows[next(iter(self.rows))]
        return site, "/".join(rest)


def _handler(holder: SiteHolder, token: str | None, port_of: Callable[[], int]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "mcu-arms-view"
        sys_version = ""

        def log_message(self, format: str, *args: object) -> None:  # the base class's name
            """Requests are not logged: the terminal shows the URL, and a log would hold the token's query."""

        def _refuse(self, status: HTTPStatus, text: str) -> None:
            body = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _host_ok(self) -> bool:
            if token is not None:
                return True  # the token guards it; any name that reaches the interface is fine
            host = (self.headers.get("Host") or "").lower()
            return host in {f"{name}:{port_of()}" for name in LOOPBACK_NAMES}

        def _token_ok(self, query: dict[str, list[str]]) -> tuple[bool, bool]:
            """(allowed, set the cookie)."""
            if token is None:
                return True, False
            given = query.get("token", [""])[0]
            if given and hmac.compare_digest(given.encode(), token.encode()):
                return True, True
            cookie = SimpleCookie(self.headers.get("Cookie") or "")
            held = cookie[TOKEN_COOKIE].value if TOKEN_COOKIE in cookie else ""
            return bool(held) and hmac.compare_digest(held.encode(), token.encode()), False

        def do_HEAD(self) -> None:  # http.server's naming
            self.do_GET()

        def do_GET(self) -> None:
            if not self._host_ok():
                return self._refuse(
                    HTTPStatus.MISDIRECTED_REQUEST, "this viewer answers to 127.0.0.1 and localhost only"
                )
            parts = urlsplit(self.path)
            allowed, set_cookie = self._token_ok(parse_qs(parts.query))
            if not allowed:
                return self._refuse(
                    HTTPStatus.UNAUTHORIZED, f"open the viewer's URL with ?token=<the value of ${TOKEN_ENV}>"
                )
            path = unquote(parts.path).lstrip("/") or INDEX
            try:
                if path.split("/")[0] in ROW_ROUTES:
                    found = holder.routed(path.split("/"))
                    if found is None:
                        return self._refuse(
                            HTTPStatus.NOT_FOUND, f"no such comparison in the index of output/: {path} (see /{RUNS})"
                        )
                    site, inner = found
                else:
                    site, inner = holder.current(rebuild=path == INDEX), path
                content = site.get(inner)
            except UserError as error:
                return self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, error.render())
            except OSError as error:  # a file removed or unreadable since the site was listed
                return self._refuse(HTTPStatus.NOT_FOUND, f"{path}: {error.strerror or error}")
            if content is None:
                return self._refuse(HTTPStatus.NOT_FOUND, f"no such page: {path}")
            self._send(content, path, set_cookie)

        def _send(self, content: Content, path: str, set_cookie: bool) -> None:
            try:
                handle = content.file.open("rb") if content.file is not None else None
            except OSError:
                return self._refuse(HTTPStatus.NOT_FOUND, f"gone: {path}")
            try:
                size = content.size if handle is None else os.fstat(handle.fileno()).st_size
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", content.media_type)
                self.send_header("Content-Length", str(size))
                # plotly.js and the pages' scripts change only with mcu-arms; data changes as a run goes on
                self.send_header("Cache-Control", "max-age=3600" if path.startswith(f"{ASSETS}/") else "no-cache")
                self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY + "; frame-ancestors 'none'")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Referrer-Policy", "no-referrer")
                if set_cookie and token is not None:
                    self.send_header("Set-Cookie", f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
                self.end_headers()
                if self.command == "HEAD":
                    return
                if handle is not None:
                    shutil.copyfileobj(handle, self.wfile)
                elif content.data is not None:
                    self.wfile.write(content.data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the browser went away mid-file (a frame skipped while playing)
            finally:
                if handle is not None:
                    handle.close()

    return Handler


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A request that failed is the browser's to retry; the terminal keeps showing the URL."""


class ViewServer6(ViewServer):
    address_family = socket.AF_INET6


def open_server(holder: SiteHolder, host: str, port: int, token: str | None) -> ViewServer:
    """Bound and listening (not serving yet). Port 0 takes a free one; a busy port is an error, never taken over."""
    if port:
        reason = busy_reason(host, port)
        if reason is not None:
            raise UserError(reason, key="--port")
    box: dict[str, int] = {}
    try:
        kind = ViewServer6 if ":" in host else ViewServer
        server = kind((host, port), _handler(holder, token, lambda: box["port"]))
    except OSError as error:
        raise UserError(f"cannot listen on {host}:{port}: {error.strerror or error}", key="--port") from None
    box["port"] = server.server_address[1]
    return server


def url_of(server: ViewServer, host: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{server.server_address[1]}/"
