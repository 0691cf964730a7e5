"""`mcu-arms view` on a 250 MB step log: the server's peak RSS (target < 300 MB: the log is streamed, never held) and
the episode page's first paint (target < 2 s) in headless Chromium, both when the log is opened the first time (cold:
the page is drawn from the log's first page of steps while the index is built in one streaming pass in the
background, then cached beside the log, and the page reloads itself once it is) and once its index is cached.

    python tests/bench/bench_view_large_log.py [--mb 250]

The log is the tests' synthetic episode (tests/view_episodes.py) with every reply at the 4,000 characters a step
log keeps, as a chatty agent's would be. Printed: the log, each load's first paint and timelines drawn, a far page
of step details, the server's peak RSS, and the ratios to the targets.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from bench_view import _url_of  # noqa: E402 - after the sys.path line that finds the tests' helpers
from browser import Browser, CDPError, chromium_missing, start_browser  # noqa: E402 - after the sys.path line that finds the tests' helpers
from view_episodes import TASK, write_episode  # noqa: E402 - after the sys.path line that finds the tests' helpers

from mcu_arms.contracts.steps import MAX_RECEIVED_CHARS  # noqa: E402 - after the sys.path line that finds the tests' helpers
from mcu_arms.layout import steps_log  # noqa: E402 - after the sys.path line that finds the tests' helpers

FIRST_PAINT_TARGET_MS = 2000.0
RSS_TARGET_MB = 300.0
MB = 1024 * 1024
PAGE = f"episodes/big-001-{TASK}/"


def _write_large_log(project: Path, megabytes: int) -> tuple[int, int]:
    """The synthetic episode with replies padded to the longest kept, enough steps for `megabytes`."""
    line_bytes = MAX_RECEIVED_CHARS + 600
    steps = megabytes * MB // line_bytes
    run_dir = write_episode(project, "big", steps=steps, agent="random", frames=False)
    log = steps_log(run_dir.green, TASK)
    padded = log.with_suffix(".padded")
    with log.open(encoding="utf-8") as source, padded.open("w", encoding="utf-8") as target:
        for line in source:
            record = json.loads(line)
            if record["received"] is not None:
                record["received"] = (record["received"] + " " * MAX_RECEIVED_CHARS)[:MAX_RECEIVED_CHARS]
            target.write(json.dumps(record) + "\n")
    padded.replace(log)
    return steps, log.stat().st_size


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmHWM for pid {pid}")


def _indexing(url: str) -> bool:
    with urllib.request.urlopen(f"{url}{PAGE}data.js", timeout=120) as response:
        return b'"indexing":null' not in response.read()


def _whole_log_drawn(browser: Browser, deadline: float) -> None:
    """Wait for the page to have reloaded itself with the whole log's view (a reload in progress fails a probe)."""
    drawn = "window.VIEWER_READY === true && !!window.MCU_EPISODE && !window.MCU_EPISODE.indexing"
    while True:
        try:
            browser.wait_for(drawn, timeout=max(1.0, deadline - time.monotonic()))
            return
        except CDPError:
            if time.monotonic() > deadline:
                raise


def _load(url: str) -> tuple[float, float, int, float | None]:
    """(first paint ms, timelines drawn ms, steps the first page shows, seconds until the page showed the whole log
    when it first showed only its head, else None)."""
    with start_browser(window=(1400, 1000)) as browser:
        started = time.monotonic()
        timings = browser.open(url + PAGE + "index.html", timeout=120)
        browser.wait_for("window.VIEWER_READY === true", timeout=120)
        drawn, shown, partial = browser.run_js(
            "[window.READY_AT, window.MCU_EPISODE.steps, !!window.MCU_EPISODE.indexing]"
        )
        whole = None
        if partial:
            polled = threading.Event()
            while _indexing(url):
                polled.wait(0.5)
            _whole_log_drawn(browser, time.monotonic() + 120)
            whole = time.monotonic() - started
        return timings["firstPaint"], drawn, shown, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=250)
    args = parser.parse_args()
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        started = time.monotonic()
        steps, size = _write_large_log(project, args.mb)
        print(f"step log: {size / MB:.0f} MB, {steps} steps (written in {time.monotonic() - started:.1f} s)")
        view = subprocess.Popen(
            [sys.executable, "-m", "mcu_arms", "view", "big"],
            cwd=project,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            url = _url_of(view, [])
            paints = {}
            for label in ("cold first open (no cached index)", "index cached"):
                paint, drawn, shown, whole = _load(url)
                paints[label] = paint
                print(f"{label}: first paint {paint:.0f} ms, timelines drawn {drawn:.0f} ms, showing {shown} steps")
                if whole is not None:
                    print(f"  index built in the background; the page reloaded with all {steps} steps at {whole:.1f} s")
            far = (steps * 3 // 4) // 500
            started = time.monotonic()
            with urllib.request.urlopen(f"{url}{PAGE}steps-{far:04d}.js", timeout=60) as response:
                page_bytes = len(response.read())
            print(
                f"a far page of step details (page {far}, {page_bytes / 1e3:.0f} kB) in "
                f"{(time.monotonic() - started) * 1000:.0f} ms"
            )
            peak = _peak_rss_mb(view.pid)
        finally:
            view.send_signal(signal.SIGINT)
            view.wait(timeout=30)
    worst = max(paints.values())
    print(f"server peak RSS {peak:.0f} MB vs target {RSS_TARGET_MB:.0f} MB -> ratio {peak / RSS_TARGET_MB:.2f}")
    print(
        f"slowest first paint {worst:.0f} ms vs target {FIRST_PAINT_TARGET_MS:.0f} ms -> ratio "
        f"{worst / FIRST_PAINT_TARGET_MS:.2f}"
    )
    if peak >= RSS_TARGET_MB or worst >= FIRST_PAINT_TARGET_MS:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
