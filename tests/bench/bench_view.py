"""Serving a 12,000-step episode with `mcu-arms view`: first paint of the episode page < 2 s (target), in headless
Chromium, each load in a fresh browser (cold cache, plotly.js parsed anew).

    python tests/bench/bench_view.py [--steps 12000] [--loads 3]

The episode is written as the typed records a run writes (tests/view_episodes.py: a worldmodel arm with a turn
every 4 steps, frames saved). Printed: the server's cold time for the page's data, then per load the first
(contentful) paint, the time until the timelines are drawn, the points drawn, and a far seek (frame, step detail and
turn shown); medians and the ratio to the target.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from browser import chromium_missing, start_browser  # noqa: E402 - after the sys.path line that finds the tests' helpers
from view_episodes import write_episode  # noqa: E402 - after the sys.path line that finds the tests' helpers

FIRST_PAINT_TARGET_MS = 2000.0
PAGE = "episodes/big-001-mine_diamond_from_scratch/"


def _url_of(view: subprocess.Popen[str], lines: list[str]) -> str:
    def read() -> None:
        assert view.stdout is not None
        for line in view.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 60
    pause = threading.Event()
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:\d+/", "".join(lines))
        if found:
            return found.group(0)
        if view.poll() is not None:
            raise SystemExit(f"mcu-arms view exited ({view.returncode}): {''.join(lines)}")
        pause.wait(0.05)
    raise SystemExit("mcu-arms view printed no URL within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12_000)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        started = time.monotonic()
        write_episode(project, "big", steps=args.steps)
        print(
            f"episode: {args.steps} steps, {args.steps + 1} frames, {len(range(0, args.steps, 4))} turns "
            f"(written in {time.monotonic() - started:.1f} s)"
        )
        view = subprocess.Popen(
            [sys.executable, "-m", "mcu_arms", "view", "big"],
            cwd=project,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            url = _url_of(view, [])
            started = time.monotonic()
            with urllib.request.urlopen(url + PAGE + "data.js", timeout=60) as response:
                data_bytes = len(response.read())
            print(
                f"server: the page's data ({data_bytes / 1e3:.0f} kB) read cold in {time.monotonic() - started:.2f} s"
            )
            paints, contentful, drawn, seeks = [], [], [], []
            for load in range(args.loads):
                with start_browser(window=(1400, 1000)) as browser:
                    timings = browser.open(url + PAGE + "index.html")
                    browser.wait_for("window.VIEWER_READY === true", timeout=60)
                    ready = browser.run_js("window.READY_AT")
                    points = browser.run_js("Object.values(viewer.points()).reduce((a, b) => a + b, 0)")
                    far = args.steps * 3 // 4 + 1
                    seek_ms = browser.run_js(
                        f"""new Promise(resolve => {{
                          const t0 = performance.now(); viewer.seek({far});
                          const done = () => {{ const f = document.getElementById('frame');
                            const ok = f.complete && f.getAttribute('src').endsWith('{far:06d}.png')
                              && document.getElementById('step-detail').dataset.step === '{far}'
                              && document.getElementById('turn').dataset.loaded;
                            if (ok) resolve(performance.now() - t0); else requestAnimationFrame(done); }};
                          done(); }})"""
                    )
                    external = browser.external_requests()
                paints.append(timings["firstPaint"])
                contentful.append(timings["firstContentfulPaint"])
                drawn.append(ready)
                seeks.append(seek_ms)
                print(
                    f"load {load + 1}: first paint {timings['firstPaint']:.0f} ms, first contentful paint "
                    f"{timings['firstContentfulPaint']:.0f} ms, timelines drawn {ready:.0f} ms "
                    f"({points} points for {args.steps} steps), seek to step {far} shown in {seek_ms:.0f} ms, "
                    f"external requests {len(external)}"
                )
        finally:
            view.send_signal(signal.SIGINT)
            view.wait(timeout=30)

    median = statistics.median(paints)
    print(
        f"median: first paint {median:.0f} ms, first contentful paint {statistics.median(contentful):.0f} ms, "
        f"timelines drawn {statistics.median(drawn):.0f} ms, far seek {statistics.median(seeks):.0f} ms"
    )
    print(f"first paint vs target {FIRST_PAINT_TARGET_MS:.0f} ms -> ratio {median / FIRST_PAINT_TARGET_MS:.2f}")
    if median >= FIRST_PAINT_TARGET_MS:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
