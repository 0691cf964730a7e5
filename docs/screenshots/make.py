"""Regenerate the documentation's pictures from a demo campaign that resolves: `python docs/screenshots/make.py`.

In a temporary project (this checkout's demo arms and campaign template, its own output and state directories) it runs
the campaign `demo` against `demo_random` on six paired seeds of 300 steps (about a minute on two idle cores), then
saves into docs/screenshots/:

- compare-table.png: the terminal table of `mcu-arms compare campaigns/agents.toml`, rendered by rich;
- plot.png: the `compare --plot` figure (Kaplan–Meier curves of reaching each milestone);
- comparison.png: the results browser's comparison page (`mcu-arms view`);
- episode.png: an episode page of the scripted arm, its frame player scrubbed to a step.

Needs the `view` extra (jinja2, plotly) and Debian's headless chromium (`apt-get install chromium`; MCU_CHROMIUM
names another), driven over its DevTools pipe by tests/browser.py. Every process it starts it stops by its pid.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import chromium_missing, start_browser  # noqa: E402  (tests/browser.py: the tests' headless chromium)

STEPS = "300"
SCRUB_TO = 40  # the episode page's frame player is shown at this step
WIDTH = 120  # columns of the terminal table
TABLE_EDGES = "│┃┏┡└┌├┗┣"


def mcu_arms(project: Path, env: dict[str, str], *args: str, columns: int | None = None) -> str:
    run_env = {**env, **({"COLUMNS": str(columns), "FORCE_COLOR": "1", "TERM": "xterm-256color"} if columns else {})}
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", *args], cwd=project, env=run_env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"mcu-arms {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def project_with_the_campaign(root: Path) -> Path:
    project = root / "project"
    (project / "arms").mkdir(parents=True)
    (project / "campaigns").mkdir()
    for arm in ("demo", "demo_random"):
        text = (ROOT / "arms" / f"{arm}.toml").read_text(encoding="utf-8")
        # frames for the episode page's player (the demo arms save none, to stay small)
        (project / "arms" / f"{arm}.toml").write_text(text.replace("save_frames = false", "save_frames = true"))
    shutil.copy(ROOT / "templates" / "campaign.toml", project / "campaigns" / "agents.toml")
    return project


def terminal_table(ansi: str, target: Path, browser: object) -> None:
    """The compare output as a terminal shows it, through rich's HTML export, photographed by the browser."""
    from rich.console import Console
    from rich.text import Text

    text = Text.from_ansi(ansi)
    # a piped table keeps each row on one line: as wide as the widest table row, the sentences wrapped to it
    width = max(len(line) for line in text.plain.splitlines() if line[:1] in TABLE_EDGES)
    console = Console(record=True, width=width, file=open(os.devnull, "w"))  # noqa: SIM115 (closed with the process)
    console.print(text)
    page = target.with_suffix(".html")
    page.write_text(console.export_html(inline_styles=True), encoding="utf-8")
    browser.open(page.as_uri())  # type: ignore[attr-defined]
    browser.screenshot(SHOTS / "compare-table.png", full_page=True)  # type: ignore[attr-defined]


def start_view(project: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    view = subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", "view", "campaigns/agents.toml"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    first = view.stdout.readline() if view.stdout else ""  # it prints the URL once it listens
    url = re.search(r"http://127\.0\.0\.1:\d+/", first)
    if not url:
        view.kill()
        raise SystemExit(f"mcu-arms view printed no URL: {first}")
    return view, url.group(0)


def wait_ready(browser: object) -> None:
    deadline = time.monotonic() + 60
    while not browser.run_js("window.VIEWER_READY === true"):  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise SystemExit("the page did not get ready in 60 s")
        time.sleep(0.1)


def main() -> None:
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)
    with tempfile.TemporaryDirectory(prefix="mcu-arms-shots-") as scratch:
        root = Path(scratch)
        project = project_with_the_campaign(root)
        env = {key: value for key, value in os.environ.items() if not key.startswith(("MCU_", "COLUMNS", "LINES"))}
        env["MCU_ARMS_STATE_DIR"] = str(root / "state")
        print("running the campaign: 2 arms x 6 seeds x 300 steps", flush=True)
        mcu_arms(project, env, "run", "campaigns/agents.toml", "--steps", STEPS)
        compared = mcu_arms(project, env, "compare", "campaigns/agents.toml", "--plot", "plot.png", columns=WIDTH)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", compared)
        if not re.search(r"^score: .*; distinguishable from seed noise", plain, re.MULTILINE):
            raise SystemExit(f"the demo campaign did not resolve; nothing saved:\n{compared}")
        shutil.copy(project / "plot.png", SHOTS / "plot.png")
        view, url = start_view(project, env)
        try:
            with start_browser(window=(1400, 1000)) as browser:
                terminal_table(compared, root / "compare.html", browser)
                browser.open(url)
                wait_ready(browser)
                browser.screenshot(SHOTS / "comparison.png", full_page=True)
                episode = browser.run_js("document.querySelector('a[href*=\"episodes/demo-\"]').href")
                browser.open("about:blank")
                browser.open(episode)
                wait_ready(browser)
                browser.run_js("document.getElementById('scrub').focus()")
                browser.press("Home")
                for _ in range(SCRUB_TO):
                    browser.press("ArrowRight")
                browser.screenshot(SHOTS / "episode.png", full_page=True)
        finally:
            view.send_signal(signal.SIGINT)  # our own child, by its pid
            try:
                view.wait(timeout=30)
            except subprocess.TimeoutExpired:
                view.kill()
                view.wait(timeout=30)
    print(f"saved compare-table.png, plot.png, comparison.png and episode.png in {SHOTS.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
