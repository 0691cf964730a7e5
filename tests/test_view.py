"""The results browser without a browser: downsampling, what an episode page is built from, the site's files, the
static bundle, the loopback server's guards and the CLI's errors. Episodes are typed records written directly
(tests/view_episodes.py); tests/test_view_browser.py drives the pages of real runs in Chromium."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from cli_support import invoke, make_environment
from view_episodes import TASK, step_records, turn_records, write_episode

from mcu_arms.contracts.agent_report import agent_messages, turn_at_step
from mcu_arms.contracts.run_report import ProcessRecord, RunReport, read_report
from mcu_arms.contracts.started import StartedProcess
from mcu_arms.contracts.states import SUPERVISOR_ROLE
from mcu_arms.contracts.steps import frame_step
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir, frame_file, steps_log
from mcu_arms.process.private_record import record_started
from mcu_arms.view import downsample, extra
from mcu_arms.view.server import SiteHolder, open_server, view_token
from mcu_arms.view.site import Site, write_bundle


def build(project: Path, *arms: str) -> Site:
    env, _, _ = make_environment(project, {})
    return Site.build(list(arms), env)


def only_episode(site: Site) -> str:
    (key,) = site.sources
    return key


# --- downsampling ------------------------------------------------------------------------------------------------


def test_change_points_are_lossless_and_keep_the_last_step() -> None:
    steps = list(range(12_000))
    values = [float((s // 37) % 5) for s in steps]
    series = downsample.change_points(steps, values)
    assert series.encoding == "change_points" and series.x[-1] == 11_999 and len(series.x) < 400
    for step in range(0, 12_000, 7):  # the value at a step is the last kept point at or before it
        kept = max(i for i, x in enumerate(series.x) if x <= step)
        assert series.y[kept] == values[step]


def test_latency_is_kept_whole_up_to_the_limit_then_min_max_per_bucket_keeps_every_spike() -> None:
    short = downsample.minmax_buckets(list(range(2000)), [1.0] * 2000)
    assert short.encoding == "raw" and len(short.x) == 2000
    latency = [1.0] * 12_000
    latency[7777], latency[3] = 600_000.0, 0.5
    series = downsample.minmax_buckets(list(range(12_000)), latency)
    assert series.encoding == "minmax_buckets" and len(series.x) <= 2 * downsample.LATENCY_BUCKETS
    assert 7777 in series.x and max(series.y) == 600_000.0 and min(series.y) == 0.5
    assert series.x == sorted(series.x)


def test_events_become_bucket_counts_past_the_limit() -> None:
    few = downsample.events([5, 9], 100)
    assert few.encoding == "events" and few.x == [5, 9]
    many = downsample.events(list(range(12_000)), 12_000)
    assert many.encoding == "bucket_counts" and sum(many.counts or []) == 12_000 and many.total == 12_000


# --- the contracts' readers --------------------------------------------------------------------------------------


def test_the_turn_at_a_step_is_the_latest_taken_at_or_before_it() -> None:
    turns = turn_records(40, every=4)
    assert turn_at_step(turns, 0).turn == 1
    assert turn_at_step(turns, 7).turn == 2 and turn_at_step(turns, 8).turn == 3
    assert turn_at_step(turns[1:], 2) is None


def test_agent_messages_are_the_completed_agent_message_items(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"type": "thread.started", "thread_id": "t"}\n'
        '{"type": "item.completed", "item": {"type": "reasoning", "text": "hmm"}}\n'
        '{"type": "item.completed", "item": {"type": "agent_message", "text": "planned"}}\n'
        "not json\n"
    )
    assert agent_messages(events) == ["planned"]
    assert agent_messages(tmp_path / "missing.jsonl") == []


def test_frame_names() -> None:
    assert frame_step("000012.png") == 12 and frame_step("1234567.png") == 1234567
    assert frame_step("12.png") is None and frame_step("000012.png.bak") is None


# --- an episode page's data --------------------------------------------------------------------------------------


def test_episode_view_of_a_codex_run(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=1200)
    site = build(tmp_path, "cx")
    view = site.episode(only_episode(site)).view
    assert view.steps == 1200 and view.agent == "worldmodel" and view.takes_turns
    assert set(view.vitals) == {"health", "food", "drink", "energy"}
    assert view.latency["agent_ms"].encoding == "raw" and len(view.latency["agent_ms"].x) == 1200
    assert view.frames.ranges == [(0, 1200)] and view.frames.hint is None
    assert [t.turn for t in view.turns] == list(range(1, 301))
    records = step_records(1200)
    assert view.noops["timeout"].x == [r.step for r in records if r.noop_cause == "timeout"]
    assert view.noop_kinds == {"timeout": "infrastructure", "invalid_action": "behaviour"}
    counted = {row.what: (row.kind, row.count) for row in view.counts}
    report = site.sources[only_episode(site)].report
    for kind, causes in (("infrastructure", report.infrastructure), ("behaviour", report.behaviour)):
        assert {cause: counted[cause] for cause in causes} == {cause: (kind, n) for cause, n in causes.items()}
    assert counted["timeout"][0] == "infrastructure" and counted["invalid_action"][0] == "behaviour"
    assert counted["dropped.chat"] == ("behaviour", 3) and counted["failed model turn: timeout"][0] == "infrastructure"
    assert counted["steps with an input that had no effect"] == ("behaviour", 24)
    assert "the green's evaluation" in view.counts_source
    assert view.alerts == report.alerts and any("infrastructure noops" in alert for alert in view.alerts)
    assert view.notes == report.notes and any("could not be applied" in note for note in view.notes)
    assert view.no_effect.x == [s for s in range(1200) if s % 50 == 7]
    assert [m.identity for m in view.milestones if m.step is not None] == ["mine_log", "crafting_table"]
    assert view.agent_files == ["logs.txt", "memory/hypotheses.json"]


def test_episode_without_frames_says_how_to_get_them(tmp_path: Path) -> None:
    write_episode(tmp_path, "rnd", steps=50, agent="random", frames=False)
    site = build(tmp_path, "rnd")
    view = site.episode(only_episode(site)).view
    assert view.frames.count == 0 and "save_frames = true" in (view.frames.hint or "")
    assert "in arms/rnd.toml and" in (view.frames.hint or "") and str(tmp_path) not in (view.frames.hint or "")
    assert "with --rerun" in (view.frames.hint or "") and "not in the fingerprint" in (view.frames.hint or "")
    assert view.vitals and view.latency["agent_ms"].x == list(range(50))
    assert not view.takes_turns and "takes no model turns" in (view.turns_note or "")


def test_torn_and_foreign_lines_are_counted_not_hidden(tmp_path: Path) -> None:
    run_dir = write_episode(tmp_path, "cx", steps=30)
    with steps_log(run_dir.green, TASK).open("a") as log:
        log.write("not a step record\n")
        log.write('{"step": 30, "t": 1')  # being written
    site = build(tmp_path, "cx")
    view = site.episode(only_episode(site)).view
    assert view.steps == 30
    counted = {row.what: row.count for row in view.counts}
    assert counted["step log lines that are not step records"] == 1 and counted["step log ends in a torn line"] == 1
    assert any("are not step records" in alert for alert in view.alerts)


def test_a_growing_step_log_is_read_again(tmp_path: Path) -> None:
    run_dir = write_episode(tmp_path, "cx", steps=30)
    site = build(tmp_path, "cx")
    key = only_episode(site)
    assert site.episode(key).view.steps == 30
    extra_record = step_records(31)[30]
    with steps_log(run_dir.green, TASK).open("a") as log:
        log.write(extra_record.model_dump_json() + "\n")
    assert site.episode(key).view.steps == 31


def _scripted(site: Site, path: str) -> object:
    return _script_value(site.get(path).data.decode())


def _script_value(body: str) -> object:
    """The value a data script (`window.X = ...`) or keyed script (`(window.X = ...)[k] = ...`) sets."""
    return json.loads(body.split("] = " if body.startswith("(") else " = ", 1)[1].rstrip(";\n"))


def test_a_large_log_s_first_page_is_served_before_its_index_is_built(tmp_path: Path) -> None:
    """A log past the background size, opened for the first time: the page, its view and its first page of steps
    come from the start of the log while the index is still to be built (held here until the test runs it); a later
    page waits for it; once built the view is the whole log's and the index is cached beside it."""
    run_dir = write_episode(tmp_path, "cx", steps=1200, frames=False)
    log = steps_log(run_dir.green, TASK)
    held: list = []
    site = build(tmp_path, "cx")
    site.background, site.background_from_bytes = held.append, 1
    key = only_episode(site)
    root = f"episodes/{key}"

    page = site.get(f"{root}/index.html").data.decode()
    assert 'id="indexing"' in page and "first 500 steps" in page
    assert len(held) == 1 and not log.with_name(log.name + ".index").exists(), "indexed before the first page"
    view = _scripted(site, f"{root}/data.js")
    assert view["indexing"] and (view["steps"], view["last_step"], view["chunks"]) == (500, 499, 1)
    written = [json.loads(line) for line in log.read_text().splitlines()[:500]]
    served = _scripted(site, f"{root}/steps-0000.js")
    assert [r["step"] for r in served] == list(range(500))
    assert [(r["reward"], r["agent_ms"], r["info"]) for r in served] == [
        (w["reward"], w["agent_ms"], w["info"]) for w in written
    ]
    assert not site.load(key).done

    later = threading.Thread(target=lambda: held.append(site.get(f"{root}/steps-0002.js")))
    later.start()
    held[0]()  # the background pass
    later.join(timeout=60)
    assert [r["step"] for r in _script_value(held[1].data.decode())] == list(range(1000, 1200))
    whole = _scripted(site, f"{root}/data.js")
    assert whole["indexing"] is None and (whole["steps"], whole["chunks"]) == (1200, 3)
    assert log.with_name(log.name + ".index").is_file()
    assert 'id="indexing"' not in site.get(f"{root}/index.html").data.decode()


def test_a_large_log_that_grew_shows_its_previous_reading_while_it_is_read_again(tmp_path: Path) -> None:
    """A run going on: the page is never sent back to the log's head (which would reload it again and again)."""
    run_dir = write_episode(tmp_path, "cx", steps=700, frames=False)
    held: list = []
    site = build(tmp_path, "cx")
    site.background, site.background_from_bytes = held.append, 1
    key = only_episode(site)
    assert site.episode(key).view.indexing
    held.pop()()
    assert site.episode(key).view.steps == 700
    with steps_log(run_dir.green, TASK).open("a") as log:
        log.write(step_records(701)[700].model_dump_json() + "\n")
    meanwhile = site.episode(key).view
    assert (meanwhile.steps, meanwhile.indexing) == (700, None) and len(held) == 1
    held.pop()()
    assert site.episode(key).view.steps == 701


def test_a_large_log_whose_index_is_cached_is_read_at_once(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=600, frames=False)
    build(tmp_path, "cx").episode("cx-001-" + TASK)  # builds and caches the index
    site = build(tmp_path, "cx")
    site.background, site.background_from_bytes = lambda work: pytest.fail("indexed again"), 1
    assert site.episode(only_episode(site)).view.steps == 600


# --- the site's files ----------------------------------------------------------------------------------------------


def test_every_listed_file_resolves_and_step_chunks_cover_the_steps(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=1200)
    site = build(tmp_path, "cx")
    key = only_episode(site)
    paths = list(site.paths())
    assert all(site.get(path) is not None for path in paths)
    chunks = sorted(p for p in paths if re.search(r"/steps-\d{4}\.js$", p))
    assert len(chunks) == 3
    body = site.get(f"episodes/{key}/steps-0002.js").data.decode()
    records = json.loads(body.split("] = ", 1)[1].rstrip(";\n"))
    assert [r["step"] for r in records] == list(range(1000, 1200))
    turn = site.get(f"episodes/{key}/turns/turn-0003.js").data.decode()
    assert "prompt of turn 3 at step 8" in turn and "plan 3" in turn


def test_the_site_serves_only_its_own_files_and_follows_no_link(tmp_path: Path) -> None:
    run_dir = write_episode(tmp_path, "cx", steps=20)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not yours")
    frame = frame_file(run_dir.green, TASK, 5)
    frame.unlink()
    frame.symlink_to(secret)
    site = build(tmp_path, "cx")
    key = only_episode(site)
    assert site.get(f"episodes/{key}/frames/000005.png") is None
    assert f"episodes/{key}/frames/000005.png" not in set(site.paths())
    assert site.get(f"episodes/{key}/frames/000006.png") is not None
    for path in (
        "../secret.png",
        f"episodes/{key}/../../secret.png",
        "assets/../index.html",
        "arms/cx.toml",
        f"episodes/{key}/frames/evil.png",
        "episodes/nope/index.html",
        "",
    ):
        assert site.get(path) is None, path


def test_the_comparison_page_names_every_arm_and_the_verdict(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=20)
    write_episode(tmp_path, "rnd", steps=20, agent="random", frames=False)
    page = build(tmp_path, "cx", "rnd").get("index.html").data.decode()
    assert "comparable: differs only in agent" in page  # save_frames is no difference: it changes nothing seen
    assert 'data-arm="cx"' in page and 'data-arm="rnd"' in page
    assert "episodes/cx-001-mine_diamond_from_scratch/index.html" in page


# --- the bundle -------------------------------------------------------------------------------------------------------


LINK = re.compile(r"""(?:src|href)\s*=\s*["']([^"']*)["']""")


def test_the_bundle_is_complete_with_relative_links_only(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=60)
    write_episode(tmp_path, "rnd", steps=60, agent="random", frames=False)
    target = tmp_path / "bundle"
    summary = write_bundle(build(tmp_path, "cx", "rnd"), target)
    assert summary.episodes == 2 and summary.frames == 61 + 15  # step frames + one frame per turn
    pages = list(target.rglob("*.html"))
    assert len(pages) == 4  # the comparison, the index of every run, two episodes
    for page in pages:
        for link in LINK.findall(page.read_text()):
            assert not link.startswith(("/", "http:", "https:", "//")), (page, link)
            if not link.startswith(("data:", "#")):
                assert (page.parent / link).resolve().is_file(), (page, link)
    assert not list(tmp_path.glob(".bundle.partial-*"))


def test_a_bundle_never_overwrites(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=10)
    target = tmp_path / "bundle"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    outcome = invoke(tmp_path, {}, "report", "cx", "--html", str(target))
    assert outcome.exit_code == 2 and "a bundle never overwrites" in outcome.err
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    outcome = invoke(tmp_path, {}, "report", "cx", "--html", "empty", "--json")
    assert outcome.exit_code == 0, outcome.err
    assert json.loads(outcome.out)["index"] == str(empty / "index.html") and (empty / "index.html").is_file()


def test_report_and_view_name_the_extra_when_it_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_episode(tmp_path, "cx", steps=10)
    real = extra._package_dir
    monkeypatch.setattr(extra, "_package_dir", lambda name: None if name == "plotly" else real(name))
    for args in (("report", "cx", "--html", "out"), ("view", "cx")):
        outcome = invoke(tmp_path, {}, *args)
        assert outcome.exit_code == 2
        assert (
            "needs plotly, from the optional extra 'view'" in outcome.err and "pip install -e '.[view]'" in outcome.err
        )
    assert not (tmp_path / "out").exists()


def test_no_runs_is_a_clear_error(tmp_path: Path) -> None:
    outcome = invoke(tmp_path, {}, "report", "--html", "out")
    assert outcome.exit_code == 2 and "no arm has run here yet" in outcome.err


# --- the server ---------------------------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path):
    """A view server on loopback in a thread, with or without a token."""
    write_episode(tmp_path, "cx", steps=20)
    servers = []

    def start(token: str | None = None) -> str:
        holder = SiteHolder(lambda: build(tmp_path, "cx"))
        server = open_server(holder, "127.0.0.1", 0, token)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_server_serves_the_site_with_its_guards(served) -> None:
    url = served()
    status, headers, body = get(url)
    assert status == 200 and b"cx" in body and "connect-src 'none'" in headers["Content-Security-Policy"]
    status, headers, _ = get(url + "assets/plotly.min.js")
    assert status == 200 and headers["Cache-Control"] == "max-age=3600" and int(headers["Content-Length"]) > 10**6
    assert get(url + "assets/../../etc/passwd")[0] == 404
    assert get(url + "episodes/x/index.html")[0] == 404
    port = url.rsplit(":", 1)[1].rstrip("/")
    assert get(url, {"Host": f"evil.example:{port}"})[0] == 421  # a rebound DNS name is refused


def test_a_token_guards_every_request_and_then_rides_a_cookie(served) -> None:
    token = "t" * 24
    url = served(token)
    assert get(url)[0] == 401 and get(url + "?token=wrong" + "x" * 20)[0] == 401
    status, headers, _ = get(url + "?token=" + token)
    assert status == 200 and headers["Set-Cookie"].startswith(f"mcu_arms_view={token}; HttpOnly")
    assert get(url + "assets/viewer.css", {"Cookie": f"mcu_arms_view={token}"})[0] == 200
    assert get(url + "assets/viewer.css", {"Cookie": "mcu_arms_view=guess"})[0] == 401


def test_another_interface_needs_a_token_the_user_set() -> None:
    assert view_token("127.0.0.1", {}) is None and view_token("::1", {}) is None
    with pytest.raises(Exception, match="needs a token of at least 16 characters in \\$MCU_ARMS_VIEW_TOKEN"):
        view_token("0.0.0.0", {"MCU_ARMS_VIEW_TOKEN": "short"})
    assert view_token("0.0.0.0", {"MCU_ARMS_VIEW_TOKEN": "x" * 16}) == "x" * 16


def test_view_refuses_another_interface_without_a_token_and_a_busy_port(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=10)
    outcome = invoke(tmp_path, {}, "view", "cx", "--host", "0.0.0.0")
    assert outcome.exit_code == 2 and "MCU_ARMS_VIEW_TOKEN" in outcome.err
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        outcome = invoke(tmp_path, {}, "view", "cx", "--port", str(port))
    assert outcome.exit_code == 2 and f"port {port} on 127.0.0.1 is in use by pid {os.getpid()}" in outcome.err


def test_a_bundle_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=10)
    (tmp_path / "a-file").write_text("not a directory")
    outcome = invoke(tmp_path, {}, "report", "cx", "--html", "a-file/bundle")
    assert outcome.exit_code == 2 and "cannot write the bundle" in outcome.err and "a-file" in outcome.err


# --- a running episode, tags, rows that apply ----------------------------------------------------------------------


RUNNING_KEY = f"cx-002-{TASK}"


def start_running(project: Path, arm: str, episode: int, *, steps: int, done: int) -> tuple[RunDir, RunReport]:
    """Episode `episode` of `arm` as it is while it runs: its report says started, its step log has `done` steps."""
    run_dir = write_episode(project, arm, steps=steps, episode=episode)
    finished = read_report(run_dir.report)
    log = steps_log(run_dir.green, TASK)
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:done]))
    run_dir.evaluation.unlink()
    run_dir.write_report(finished.model_copy(update={"status": "started", "finished_at": None, "wall_s": None}))
    return run_dir, finished


@pytest.fixture
def supervisor() -> Iterator[psutil.Process]:
    """A live process of the test's own, standing for a run's supervisor; it ends when its stdin closes."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield psutil.Process(child.pid)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def supervised_by(supervisor: psutil.Process, env: Environment, run_dir: RunDir) -> None:
    """The started report names `supervisor` as its supervisor, and so does the private record: a run going on."""
    report = read_report(run_dir.report)
    record = ProcessRecord(role=SUPERVISOR_ROLE, pid=supervisor.pid, create_time=supervisor.create_time(), log="")
    run_dir.write_report(report.model_copy(update={"processes": {**report.processes, SUPERVISOR_ROLE: record}}))
    started = StartedProcess(role=SUPERVISOR_ROLE, pid=supervisor.pid, create_time=supervisor.create_time())
    record_started(env.variables, run_dir.path, report.arm, report.episode, started)


def test_a_running_episode_is_shown_first_marked_with_its_step_and_reloaded_until_it_ends(
    tmp_path: Path, supervisor: psutil.Process
) -> None:
    write_episode(tmp_path, "cx", steps=20)
    run_dir, finished = start_running(tmp_path, "cx", 2, steps=20, done=12)
    env, _, _ = make_environment(tmp_path, {})
    supervised_by(supervisor, env, run_dir)
    site = Site.build(["cx"], env, live=True)
    assert list(site.sources)[0] == RUNNING_KEY, "the running episode's page comes first"
    index = site.get("index.html").data.decode()
    assert '<meta http-equiv="refresh" content="5">' in index
    assert f"episode 2 running: {TASK}, step 12 of 20" in index
    assert re.search(rf'title="episode 2">seed \d+: {TASK} \(running\)', index), "links are named by seed"
    assert re.search(rf'title="episode 1">seed \d+: {TASK}</a>', index)
    page = site.get(f"episodes/{RUNNING_KEY}/index.html").data.decode()
    assert 'id="running"' in page and 'http-equiv="refresh"' in page
    assert site.episode(RUNNING_KEY).view.steps == 12
    finished_page = site.get(f"episodes/cx-001-{TASK}/index.html").data.decode()
    assert 'http-equiv="refresh"' not in finished_page and 'id="running"' not in finished_page

    holder = SiteHolder(lambda: Site.build(["cx"], env, live=True))
    server = open_server(holder, "127.0.0.1", 0, None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        status, _, body = get(url)
        assert status == 200 and b'http-equiv="refresh"' in body and b"episode 2 running" in body
        snapshot = Site.build(["cx"], env)  # `report --html`: a bundle never reloads itself
        assert 'http-equiv="refresh"' not in snapshot.get("index.html").data.decode()

        run_dir.write_report(finished)  # the episode ends: its final report
        log = steps_log(run_dir.green, TASK)
        log.write_text("".join(record.model_dump_json() + "\n" for record in step_records(20)))
        status, _, body = get(url + f"episodes/{RUNNING_KEY}/index.html")  # the page open in the browser reloads
        assert status == 200 and b'http-equiv="refresh"' not in body and b'id="running"' not in body
        assert b"finished" in body
        status, _, body = get(url)
        assert b'http-equiv="refresh"' not in body and b"running now" not in body
    finally:
        server.shutdown()
        server.server_close()


def test_a_started_episode_whose_supervisor_is_gone_is_shown_stale_and_never_reloads(
    tmp_path: Path, supervisor: psutil.Process
) -> None:
    """As `status` says it: a report left `started` by a supervisor that died is not a run going on. Asked at each
    page: the same site shows it running once a live supervisor is on record."""
    write_episode(tmp_path, "cx", steps=20)
    run_dir, _ = start_running(tmp_path, "cx", 2, steps=20, done=12)
    env, _, _ = make_environment(tmp_path, {})
    site = Site.build(["cx"], env, live=True)
    index = site.get("index.html").data.decode()
    assert f"episode 2 stale (supervisor gone): its report was never finished; it stopped at {TASK}, step 12" in index
    assert 'http-equiv="refresh"' not in index and f"{TASK} (running)" not in index
    assert "left unfinished" in index and "running now" not in index
    page = site.get(f"episodes/{RUNNING_KEY}/index.html").data.decode()
    assert "stale (supervisor gone)" in page and 'id="running"' not in page and 'http-equiv="refresh"' not in page

    supervised_by(supervisor, env, run_dir)
    index = site.get("index.html").data.decode()
    assert f"episode 2 running: {TASK}, step 12 of 20" in index and 'http-equiv="refresh"' in index
    assert "left unfinished" not in index


def test_view_tag_filters_through_the_analysis_and_shows_tags_notes_and_what_was_left_out(tmp_path: Path) -> None:
    first = write_episode(tmp_path, "cx", steps=20)
    second = write_episode(tmp_path, "cx", steps=20, episode=2)
    for run_dir, tags, note in ((first, {"purpose": "smoke"}, None), (second, {"purpose": "ablation"}, "why not")):
        run_dir.write_report(read_report(run_dir.report).model_copy(update={"tags": tags, "note": note}))
    env, _, _ = make_environment(tmp_path, {})
    site = Site.build(["cx"], env, tags={"purpose": "smoke"})
    assert list(site.sources) == [f"cx-001-{TASK}"]
    index = site.get("index.html").data.decode()
    assert "only episodes run with tags purpose=smoke" in index
    assert "cx episode 1 (seed 0): purpose=smoke" in index
    assert "cx episode 2 (seed 0, finished): other tags: run with tags purpose=ablation" in index
    unfiltered = Site.build(["cx"], env).get("index.html").data.decode()
    assert "cx episode 2 (seed 0): purpose=ablation; why not" in unfiltered

    bundle = invoke(tmp_path, {}, "report", "cx", "--html", "out", "--tag", "purpose=smoke")
    assert bundle.exit_code == 0, bundle.out + bundle.err
    assert "only episodes run with tags purpose=smoke" in (tmp_path / "out" / "index.html").read_text()
    assert [path.name for path in (tmp_path / "out" / "episodes").iterdir()] == [f"cx-001-{TASK}"]

    outcome = invoke(tmp_path, {}, "view", "cx", "--tag", "purpose")
    assert outcome.exit_code == 2 and "'purpose' is not a tag" in outcome.err and "Traceback" not in outcome.err


def test_the_comparison_page_leaves_out_counter_rows_no_arm_s_agent_reports(tmp_path: Path) -> None:
    write_episode(tmp_path, "cx", steps=20)
    write_episode(tmp_path, "rnd", steps=20, agent="random", frames=False)
    page = build(tmp_path, "cx", "rnd").get("index.html").data.decode()
    assert 'data-row="decisions"' not in page and 'data-row="planner ms (median)"' not in page
    assert re.search(r'data-row="compaction limit"><th>compaction limit</th><td>\d+</td><td>·</td>', page)
    assert "· this arm&#39;s agent does not report it" in page
    random_only = build(tmp_path, "rnd").get("index.html").data.decode()
    assert 'data-row="failed turns"' not in random_only and "does not report it" not in random_only
    assert ">n/a<" not in random_only.split('id="episode-facts"', 1)[1]


@pytest.mark.slow
def test_a_real_running_episode_is_followed_until_it_finishes(tmp_path: Path) -> None:
    """A random arm on the embedded simulator, run in a subprocess: while it runs, its page is the running one and
    reloads; once its report is final, neither page reloads."""
    from run_helpers import Started, running_with_steps, wait_for
    from run_helpers import write_arm as write_run_arm

    project, state = tmp_path / "project", tmp_path / "state"
    write_run_arm(project, "live", agent="random", steps=300)
    run = Started(project, state, "run", "--arm", "live")
    try:
        wait_for(lambda: running_with_steps(project, "live"), "the run to log steps", timeout=300)
        env, _, _ = make_environment(project, {"MCU_ARMS_STATE_DIR": str(state)})  # where the run keeps its record
        site = Site.build(["live"], env, live=True)
        key = f"live-001-{TASK}"
        assert list(site.sources) == [key]
        index = site.get("index.html").data.decode()
        assert "running now" in index and 'http-equiv="refresh"' in index
        assert re.search(rf"episode 1 running: {TASK}, step \d+ of 300", index), index
        page = site.get(f"episodes/{key}/index.html").data.decode()
        assert 'id="running"' in page and 'http-equiv="refresh"' in page
        assert run.wait(timeout=900) == 0, run.output
        page = site.get(f"episodes/{key}/index.html").data.decode()  # the same page, asked again once it ended
        assert 'http-equiv="refresh"' not in page and 'id="running"' not in page
        assert site.episode(key).view.steps == 300
        index = Site.build(["live"], env, live=True).get("index.html").data.decode()
        assert 'http-equiv="refresh"' not in index and "running now" not in index
    finally:
        run.kill_if_running()
