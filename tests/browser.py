"""A real headless Chromium for the tests, driven over the DevTools protocol on a pipe (standard library + psutil).

Chromium runs with `--remote-debugging-pipe`: commands and replies travel over two anonymous pipes (fd 3 and fd 4,
NUL-terminated JSON), so nothing listens on a port, no chromedriver is needed, and the browser quits by itself when
the pipe closes. Every request of the page and of its frames and workers is recorded (Selenium's performance log
misses workers), so a test can assert that nothing left loopback or file://. The resolver rule makes any name but
loopback fail to resolve, so a page that tries a CDN gets an error instead of a connection, and the attempt is still
recorded.

    with start_browser() as browser:
        browser.open(url)                  # waits for the load event
        browser.wait_for("window.VIEWER_READY")
        browser.run_js("document.title")   # promises awaited, values copied through JSON
        browser.click(x, y); browser.press("ArrowRight")   # real input events
        browser.external_requests()        # what left loopback / file: / data:
        browser.screenshot(path)

open() of the same URL with only a new #hash is a same-document navigation (no load event): open about:blank first.
The browser is stopped by the pid this module started, re-checked with psutil, with its own process group.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from mcu_arms.process.procs import stop_process_group

CHROMIUM = os.environ.get("MCU_CHROMIUM", "/usr/bin/chromium")

# Flags that keep Chromium from calling out on its own (updates, safe browsing, metrics, sync...).
QUIET_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--no-pings",
    "--mute-audio",
    "--password-store=basic",
    "--use-mock-keychain",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]
LOCAL_SCHEMES = frozenset({"file", "data", "blob", "about", "chrome", "chrome-error", "devtools"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK):
        return None
    return f"no Chromium at {CHROMIUM}: apt-get install -y chromium (.ci/run installs it), or set MCU_CHROMIUM"


def is_local_url(url: str) -> bool:
    """file:, data:, blob:, about: and http(s)/ws(s) to a loopback address."""
    parts = urlsplit(url)
    if parts.scheme in LOCAL_SCHEMES:
        return True
    host = (parts.hostname or "").lower()
    return host in LOOPBACK_HOSTS or host.startswith("127.")


class CDPError(RuntimeError):
    pass


class Browser:
    def __init__(self, window: tuple[int, int] = (1400, 900), timeout: float = 30.0) -> None:
        self.window = window
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.create_time: float | None = None
        self.profile: str | None = None
        self.session: str | None = None  # the page's flat-mode session
        self._write: Any = None
        self._read: Any = None
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._requests: list[dict[str, Any]] = []
        self._console: list[dict[str, Any]] = []
        self._events: list[tuple[str, str | None, dict[str, Any]]] = []
        self._closed = False
        self.log_path: Path | None = None

    # --- the process -----------------------------------------------------------------------------------------
    def start(self) -> Browser:
        missing = chromium_missing()
        if missing:
            raise FileNotFoundError(missing)
        self.profile = tempfile.mkdtemp(prefix="mcu-arms-chromium-")
        self.log_path = Path(self.profile).with_suffix(".log")
        flags = [
            *QUIET_FLAGS,
            f"--user-data-dir={self.profile}",
            f"--window-size={self.window[0]},{self.window[1]}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # sh moves the pipes from stdin/stdout onto fds 3/4 and execs Chromium (Debian's /usr/bin/chromium wrapper
        # execs too), so no preexec_fn is needed and Popen.pid is the browser itself.
        with open(self.log_path, "ab") as log:
            try:
                self.proc = subprocess.Popen(
                    ["/bin/sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2', CHROMIUM, *flags],
                    stdin=to_child_r,
                    stdout=from_child_w,
                    stderr=log,
                    start_new_session=True,  # its own group: stop() also ends the renderers it leaves behind
                )
            finally:
                os.close(to_child_r)
                os.close(from_child_w)
        try:
            self.create_time = psutil.Process(self.proc.pid).create_time()
        except psutil.Error:
            self.create_time = None
        self._write = os.fdopen(to_child_w, "wb", buffering=0)
        self._read = os.fdopen(from_child_r, "rb", buffering=0)
        threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True).start()
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self._record(self.session, wait=True)
            for method in ("Page.enable", "Log.enable"):
                self.send(method, session=self.session)
            self.send("Network.setCacheDisabled", {"cacheDisabled": True}, session=self.session)
        except Exception:
            self.stop()
            raise
        return self

    def _record(self, session: str, wait: bool = False) -> None:
        """Record network and console in `session`, and attach to its iframes and workers (paused until then)."""
        for method, params in (
            ("Network.enable", {}),
            ("Runtime.enable", {}),
            ("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}),
            ("Runtime.runIfWaitingForDebugger", {}),
        ):
            if wait:
                self.send(method, params, session=session)
            else:
                self._post(method, params, session)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None and not self._closed:
            try:
                self.send("Browser.close", timeout=5)
                self.proc.wait(timeout=10)
            except (CDPError, subprocess.TimeoutExpired):
                pass
        self._closed = True
        if self.proc is not None:
            stop_process_group(self.proc.pid, self.create_time, grace_s=3, popen=self.proc)
        for handle in (self._write, self._read):
            if handle is not None:
                try:
                    handle.close()
                except OSError:
                    pass
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the protocol ----------------------------------------------------------------------------------------
    def _post(self, method: str, params: dict[str, Any] | None, session: str | None) -> int:
        with self._write_lock:
            self._next_id += 1
            message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            try:
                self._write.write(json.dumps(message).encode() + b"\0")
            except (BrokenPipeError, ValueError) as error:
                code = self.proc.poll() if self.proc else None
                raise CDPError(f"{method}: the browser is gone (exit code {code}); see {self.log_path}") from error
            return self._next_id

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One command, waiting for its reply (browser-wide unless `session` is given)."""
        wait = timeout or self.timeout
        message_id = self._post(method, params, session)
        deadline = time.monotonic() + wait
        with self._cond:
            while message_id not in self._replies:
                left = deadline - time.monotonic()
                if self._closed:
                    raise CDPError(f"{method}: the browser closed the pipe; see {self.log_path}")
                if left <= 0:
                    raise CDPError(f"{method}: no reply within {wait} s")
                self._cond.wait(min(left, 0.5))
            reply = self._replies.pop(message_id)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._read.read(1 << 16)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                try:
                    message = json.loads(raw)
                except ValueError:
                    continue
                if "id" in message:
                    with self._cond:
                        self._replies[message["id"]] = message
                        self._cond.notify_all()
                else:
                    self._on_event(message.get("method", ""), message.get("sessionId"), message.get("params", {}))
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _on_event(self, method: str, session: str | None, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            request = params.get("request", {})
            self._requests.append(
                {
                    "url": request.get("url", "") + request.get("urlFragment", ""),
                    "type": params.get("type"),
                    "session": session,
                }
            )
        elif method == "Network.webSocketCreated":
            self._requests.append({"url": params.get("url", ""), "type": "WebSocket", "session": session})
        elif method == "Target.attachedToTarget" and params["sessionId"] != self.session:
            self._record(params["sessionId"])  # an iframe or a worker: its requests are recorded too
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self._console.append({"kind": params.get("type"), "text": text})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self._console.append(
                {"kind": f"log.{entry.get('level')}", "text": entry.get("text", ""), "url": entry.get("url")}
            )
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = (details.get("exception") or {}).get("description") or details.get("text", "")
            self._console.append({"kind": "exception", "text": text})
        with self._cond:
            self._events.append((method, session, params))
            self._cond.notify_all()

    def _wait_event(self, method: str, since: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(m == method and s == self.session for m, s, _ in self._events[since:]):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"no {method} within {timeout} s")
                self._cond.wait(min(left, 0.5))

    # --- the page --------------------------------------------------------------------------------------------
    def open(self, url: str, timeout: float | None = None) -> dict[str, Any]:
        """Navigate, wait for the load event, and return the page's timings (ms since navigation start)."""
        since = len(self._events)
        result = self.send("Page.navigate", {"url": url}, session=self.session)
        if result.get("errorText"):
            raise CDPError(f"navigate {url}: {result['errorText']}")
        if result.get("loaderId"):  # none: a same-document (hash) navigation, which fires no load event
            self._wait_event("Page.loadEventFired", since, timeout or self.timeout)
        return self.timings()

    def requests(self) -> list[dict[str, Any]]:
        return list(self._requests)

    def external_requests(self) -> list[dict[str, Any]]:
        return [request for request in self._requests if not is_local_url(request["url"])]

    def clear_requests(self) -> None:
        self._requests.clear()

    def console(self) -> list[dict[str, Any]]:
        return list(self._console)

    def errors(self) -> list[dict[str, Any]]:
        return [entry for entry in self._console if entry["kind"] in ("exception", "error", "log.error")]

    def run_js(self, expression: str, timeout: float | None = None) -> Any:
        """The value of `expression` in the page (promises awaited), copied through JSON so DOM nodes come as {}."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "userGesture": True},
            session=self.session,
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CDPError(f"JS error: {(details.get('exception') or {}).get('description') or details.get('text')}")
        value = result.get("result", {})
        if "objectId" not in value:
            return value.get("value")
        try:
            copied = self.send(
                "Runtime.callFunctionOn",
                {
                    "objectId": value["objectId"],
                    "returnByValue": True,
                    "functionDeclaration": "function () { try { return JSON.parse(JSON.stringify(this)); }"
                    " catch (e) { return String(this); } }",
                },
                session=self.session,
            )
            return copied.get("result", {}).get("value")
        finally:
            self._post("Runtime.releaseObject", {"objectId": value["objectId"]}, self.session)

    def wait_for(self, expression: str, timeout: float = 15.0, interval: float = 0.05) -> Any:
        """Poll until `expression` is truthy (a condition with a deadline, never a sleep)."""
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            value = self.run_js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CDPError(f"timed out after {timeout} s waiting for {expression!r}")
            pause.wait(interval)

    def click(self, x: float, y: float) -> None:
        """A real left click at viewport (x, y). Two within ~300 ms are a double click to most chart libraries."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params: dict[str, Any] = {
                "type": kind,
                "x": x,
                "y": y,
                "button": "none" if kind == "mouseMoved" else "left",
            }
            if kind != "mouseMoved":
                params["clickCount"] = 1
            self.send("Input.dispatchMouseEvent", params, session=self.session)

    def rect(self, selector: str) -> dict[str, float]:
        box = self.run_js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return {x: r.x, y: r.y, width: r.width, height: r.height}; })()"
        )
        if box is None:
            raise CDPError(f"no element matches {selector!r}")
        return box

    def click_selector(self, selector: str, fx: float = 0.5, fy: float = 0.5) -> None:
        box = self.rect(selector)
        self.click(box["x"] + fx * box["width"], box["y"] + fy * box["height"])

    KEYS = {"ArrowRight": 39, "ArrowLeft": 37, "Home": 36, "End": 35}

    def press(self, key: str) -> None:
        """A real key press on the focused element."""
        code = self.KEYS[key]
        for kind in ("rawKeyDown", "keyUp"):
            self.send(
                "Input.dispatchKeyEvent",
                {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code},
                session=self.session,
            )

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params, session=self.session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def timings(self) -> dict[str, Any]:
        """Navigation and paint timings of the document (ms since navigation start), after two animation frames
        (so the first frame's paint entries exist)."""
        return self.run_js(
            """(async () => {
              await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
              const n = performance.getEntriesByType('navigation')[0] || {};
              const p = Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
              return {url: location.href, domContentLoaded: n.domContentLoadedEventEnd, load: n.loadEventEnd,
                      firstPaint: p['first-paint'] ?? null, firstContentfulPaint: p['first-contentful-paint'] ?? null};
            })()"""
        )


def start_browser(**kwargs: Any) -> Browser:
    return Browser(**kwargs).start()
