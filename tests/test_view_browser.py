"""The results browser in a real headless Chromium (tests/browser.py), on the output of real runs.

Two short embedded arms run for real (`python -m mcu_arms run`): a worldmodel agent on the stand-in codex with frames
saved, and a random agent without frames. `mcu-arms view` serves them as a real process; `mcu-arms report --html`
writes the bundle, which is then opened from file:// with the server stopped. Every request the browser makes, in
every frame and worker, is recorded: none may leave loopback or file://. Screenshots of each page type go to
tests/artifacts/ (not tracked; the README shows copies from docs/screenshots/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from browser import Browser, CDPError, chromium_missing, start_browser
from cli_support import make_environment
from run_helpers import Started, run_cli, wait_for
from view_episodes import write_episode

from mcu_arms.contracts.agent_report import read_episode_report, turn_at_step
from mcu_arms.contracts.steps import StepRecord, read_jsonl
from mcu_arms.view.server import SiteHolder, open_server, url_of
from mcu_arms.view.site import Site

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or ""),
]

ARTIFACTS = Path(__file__).parent / "artifacts"
FAKE_CODEX_DIR = Path(__file__).parent / "fake_codex"
STEPS = 40
SCRUB_TO = 17  # a step inside the fifth turn's plan (turns every 4 steps), not a turn's own step
TASK = "mine_diamond_from_scratch"
ARM = """agent = "{agent}"
task = "{task}"
simulator = "embedded"
seed = 3
steps = {steps}
step_timeout = 15
session_turns = 2
save_frames = {frames}

[ports]
green = "auto"
purple = "auto"

[env]
FAKE_CODEX_MODE = "ok"
"""
CODEX_PAGE = "episodes/cx-001-mine_diamond_from_scratch/index.html"
RANDOM_PAGE = "episodes/rnd-001-mine_diamond_from_scratch/index.html"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two real runs: `cx` (worldmodel on the stand-in codex, frames saved) and `rnd` (random, no frames)."""
    root = tmp_path_factory.mktemp("view")
    project = root / "project"
    (project / "arms").mkdir(parents=True)
    for name, agent, frames in (("cx", "worldmodel", "true"), ("rnd", "random", "false")):
        (project / "arms" / f"{name}.toml").write_text(ARM.format(agent=agent, task=TASK, steps=STEPS, frames=frames))
    codex_root = Path(tempfile.mkdtemp(prefix="mcu-view-codex-", dir="/var/tmp"))  # CODEX_HOMEs are refused under /tmp
    auth = codex_root / "credential" / "auth.json"
    auth.parent.mkdir()
    auth.write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-test-not-a-key"}')
    auth.chmod(0o600)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FAKE_CODEX", "CODEX_", "MCU_"))}
    env.pop("OPENAI_API_KEY", None)
    env.update(
        PATH=f"{FAKE_CODEX_DIR}{os.pathsep}{env.get('PATH', '')}",
        MCU_CODEX_ROOT=str(codex_root / "homes"),
        MCU_CODEX_AUTH=str(auth),
        MCU_ARMS_STATE_DIR=str(root / "state"),
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mcu_arms", "run", "--arm", "cx", "--arm", "rnd"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        yield project
    finally:
        shutil.rmtree(codex_root, ignore_errors=True)


def start_view(project: Path) -> tuple[Started, str]:
    """`mcu-arms view cx rnd` as a real process, and the URL it printed."""
    started = Started(project, project.parent / "state", "view", "cx", "rnd")
    found = wait_for(
        lambda: re.search(r"http://127\.0\.0\.1:\d+/", started.output) or started.popen.poll() is not None,
        "mcu-arms view to print its URL",
        timeout=60,
    )
    assert isinstance(found, re.Match), started.output
    return started, found.group(0)


def stop_view(started: Started) -> int:
    started.popen.send_signal(signal.SIGINT)  # our own child, by its Popen
    return started.wait(timeout=30)


@pytest.fixture(scope="module")
def served(project: Path) -> Iterator[str]:
    started, url = start_view(project)
    try:
        yield url
    finally:
        stop_view(started)
        started.kill_if_running()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with start_browser(window=(1400, 1000)) as opened:
        yield opened


def open_page(browser: Browser, url: str) -> None:
    browser.open("about:blank")  # a fresh document, whatever was open
    browser.clear_requests()
    browser.open(url)
    browser.wait_for("window.VIEWER_READY === true", timeout=60)


def assert_nothing_left_loopback(browser: Browser) -> None:
    assert browser.requests(), "the recorder saw no request at all"
    assert browser.external_requests() == []
    assert browser.errors() == []


def steps_of(project: Path, arm: str) -> list[StepRecord]:
    records, _ = read_jsonl(project / "output" / arm / "episode_001" / "green" / TASK / "steps.jsonl", StepRecord)
    return records


def expected_turn(project: Path, step: int) -> int:
    episode = read_episode_report(
        project / "output" / "cx" / "episode_001" / "purple" / "task_01" / "agent_report.json"
    )
    turn = turn_at_step(episode.turn_records, step)
    assert turn is not None
    return turn.turn


def scrub_to(browser: Browser, step: int) -> None:
    """Real key presses on the focused scrubber: Home, then one ArrowRight per step."""
    browser.run_js("document.getElementById('scrub').focus()")
    browser.press("Home")
    for _ in range(step):
        browser.press("ArrowRight")


def check_step_frame_and_turn(browser: Browser, project: Path, step: int) -> None:
    state = browser.run_js("viewer.state()")
    assert state["step"] == step and state["frameStep"] == step
    assert state["src"] == f"frames/{step:06d}.png"
    browser.wait_for(
        "(() => { const f = document.getElementById('frame'); return f.complete && f.naturalWidth === 128; })()"
    )
    assert browser.run_js("document.getElementById('frame-step').textContent") == str(step)
    record = steps_of(project, "cx")[step]
    browser.wait_for(f"document.getElementById('step-detail').dataset.step === '{step}'")
    detail = browser.run_js("document.getElementById('step-detail').innerText")
    assert f"{record.agent_ms:.1f}" in detail
    turn = expected_turn(project, step)
    browser.wait_for(f"document.getElementById('turn').dataset.loaded === '{turn}'")
    panel = browser.run_js("document.getElementById('turn').innerText")
    actions = (
        project / "output" / "cx" / "episode_001" / "purple" / "task_01" / "turns" / f"turn_{turn:04d}" / "actions.json"
    )
    assert f"turn {turn} (taken at step" in panel and json.loads(actions.read_text()) == json.loads(
        browser.run_js(
            "[...document.querySelectorAll('#turn details')].find(d => d.innerText.startsWith('actions.json'))"
            ".querySelector('pre').textContent"
        )
    )


def test_the_comparison_page_shows_both_arms_and_the_verdict(project: Path, served: str, browser: Browser) -> None:
    open_page(browser, served)
    assert browser.run_js("[...document.querySelectorAll('#arms tr[data-arm]')].map(r => r.dataset.arm)") == [
        "cx",
        "rnd",
    ]
    compared = run_cli(project, project.parent / "state", "compare", "cx", "rnd", "--json")
    verdict = json.loads(compared.stdout)["verdict"]["text"]
    assert browser.run_js("document.querySelector('#verdict strong').textContent") == verdict
    assert verdict == "comparable: differs only in agent"  # save_frames is no difference: the agent sees the same
    names = browser.run_js("document.getElementById('milestone-chart').data.map(t => t.name)")
    assert [name.split(" ")[0].rstrip(":") for name in names] == ["cx", "rnd"]
    assert names[0] == "cx (baseline) (n=1)" and names[1].startswith("rnd: agent=random")
    browser.screenshot(ARTIFACTS / "comparison.png", full_page=True)
    assert_nothing_left_loopback(browser)


def test_the_episode_timeline_has_a_point_per_step(served: str, browser: Browser) -> None:
    open_page(browser, served + CODEX_PAGE)
    points = browser.run_js("viewer.points()")
    assert points["agent ms"] == points["sim ms"] == STEPS  # under 2,000 steps nothing is downsampled
    assert browser.run_js("MCU_EPISODE.latency.agent_ms.encoding") == "raw"
    assert browser.run_js("document.getElementById('n-steps').textContent") == str(STEPS)
    assert points["turn"] == browser.run_js("MCU_EPISODE.turns.length") > 0
    assert_nothing_left_loopback(browser)


def test_scrubbing_to_a_step_shows_its_frame_and_the_turn_in_force(
    project: Path, served: str, browser: Browser
) -> None:
    open_page(browser, served + CODEX_PAGE)
    frames_at_start = [r["url"] for r in browser.requests() if "/frames/" in r["url"]]
    assert frames_at_start[-1].endswith("frames/000000.png")  # lazily: the frame shown, not all 41
    scrub_to(browser, SCRUB_TO)
    check_step_frame_and_turn(browser, project, SCRUB_TO)
    assert browser.run_js("location.hash") == f"#step={SCRUB_TO}"
    browser.screenshot(ARTIFACTS / "episode.png", full_page=True)
    assert_nothing_left_loopback(browser)


def test_a_click_on_the_timeline_jumps_to_that_step(project: Path, served: str, browser: Browser) -> None:
    open_page(browser, served + CODEX_PAGE)
    target = 29
    row = browser.rect("#timeline .nsewdrag")  # the first row's plot area
    browser.click(browser.run_js(f"viewer.clientXOfStep({target})"), row["y"] + row["height"] / 2)
    check_step_frame_and_turn(browser, project, target)
    assert_nothing_left_loopback(browser)


def test_an_episode_without_frames_shows_its_timelines_and_how_to_get_frames(served: str, browser: Browser) -> None:
    open_page(browser, served + RANDOM_PAGE)
    hint = browser.run_js("document.getElementById('no-frames').textContent")
    assert "save_frames = true" in hint and "rnd.toml" in hint
    assert browser.run_js("viewer.points()")["agent ms"] == STEPS
    assert not [r for r in browser.requests() if "/episodes/rnd-" in r["url"] and r["url"].endswith(".png")]
    browser.screenshot(ARTIFACTS / "episode-no-frames.png", full_page=True)
    assert_nothing_left_loopback(browser)


def test_the_bundle_works_from_file_with_the_server_stopped(project: Path) -> None:
    started, url = start_view(project)
    port = int(url.rsplit(":", 1)[1].rstrip("/"))
    bundle = project.parent / "bundle"
    try:
        written = run_cli(project, project.parent / "state", "report", "cx", "rnd", "--html", str(bundle))
        assert written.returncode == 0, written.stdout + written.stderr
    finally:
        assert stop_view(started) == 0
        started.kill_if_running()
    assert "mcu-arms view: stopped (SIGINT)" in started.output
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing serves the pages any more
    with start_browser(window=(1400, 1000)) as browser:
        open_page(browser, (bundle / "index.html").as_uri())
        assert browser.run_js("[...document.querySelectorAll('#arms tr[data-arm]')].map(r => r.dataset.arm)") == [
            "cx",
            "rnd",
        ]
        links = browser.run_js("[...document.querySelectorAll('a.episode-link')].map(a => a.href)")
        assert links and all(link.startswith("file://") for link in links)
        open_page(browser, links[0])
        scrub_to(browser, SCRUB_TO)
        check_step_frame_and_turn(browser, project, SCRUB_TO)
        browser.click_selector("#show-files")
        browser.wait_for("document.querySelectorAll('#file-texts details').length > 0")
        assert "logs.txt" in browser.run_js("document.getElementById('file-texts').innerText")
        browser.screenshot(ARTIFACTS / "bundle-episode.png", full_page=True)
        assert all(r["url"].startswith(("file://", "data:", "about:")) for r in browser.requests())
        assert_nothing_left_loopback(browser)


def test_the_recorder_sees_every_request_that_leaves_loopback(tmp_path: Path) -> None:
    """So that an empty external_requests() above means something: remote loads from the page, an iframe and a
    worker are all recorded (the resolver rule makes them fail instead of connecting)."""
    (tmp_path / "index.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example.com/a.css">'
        '<img src="http://images.example.net/b.png">'
        '<iframe src="frame.html"></iframe>'
        "<script>new Worker('worker.js'); fetch('https://api.example.org/c').catch(() => {});</script>"
    )
    (tmp_path / "frame.html").write_text('<img src="https://frame.example.com/d.png">')
    (tmp_path / "worker.js").write_text("fetch('https://worker.example.com/e').catch(() => {});")
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with start_browser() as browser:
            browser.open(f"http://127.0.0.1:{server.server_address[1]}/index.html")
            wanted = {
                "cdn.example.com",
                "images.example.net",
                "api.example.org",
                "frame.example.com",
                "worker.example.com",
            }

            def hosts() -> set[str]:
                return {urlsplit(request["url"]).hostname or "" for request in browser.external_requests()}

            assert wait_for(lambda: wanted <= hosts(), "every remote request to be recorded", timeout=20)
    finally:
        server.shutdown()
        server.server_close()


def test_a_large_log_first_shown_from_its_head_reloads_whole_once_indexed(tmp_path: Path) -> None:
    """A log opened cold: the page paints from its first 500 steps and shows step 0's details while the index is
    still to be built (held until the test runs it); once built, the page reloads itself with every step."""
    write_episode(tmp_path, "big", steps=1200, frames=False)
    env, _, _ = make_environment(tmp_path, {})
    held: list[Callable[[], None]] = []

    def site() -> Site:
        built = Site.build(["big"], env)
        built.background, built.background_from_bytes = held.append, 1
        return built

    server = open_server(SiteHolder(site), "127.0.0.1", 0, None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with start_browser(window=(1400, 1000)) as browser:
            browser.open(f"{url_of(server, '127.0.0.1')}episodes/big-001-{TASK}/index.html", timeout=60)
            browser.wait_for("window.VIEWER_READY === true", timeout=60)
            assert browser.run_js("window.MCU_EPISODE.steps") == 500
            assert "first 500 steps" in browser.run_js("document.getElementById('indexing').textContent")
            browser.wait_for("document.getElementById('step-detail').dataset.step === '0'", timeout=30)
            assert len(held) == 1, "indexed before the first page was shown"
            held.pop()()
            whole = "window.VIEWER_READY === true && window.MCU_EPISODE.steps === 1200"
            deadline = time.monotonic() + 60
            while True:
                try:  # a probe that lands during the reload fails; the next one sees the new page
                    browser.wait_for(whole, timeout=max(1.0, deadline - time.monotonic()))
                    break
                except CDPError:
                    if time.monotonic() > deadline:
                        raise
            assert browser.run_js("document.getElementById('indexing') === null")
    finally:
        server.shutdown()
        server.server_close()
