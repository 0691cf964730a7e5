"""Everything under output/ is untrusted input for its readers too (docs/concepts/reading-output.md).

The project is tests/fixtures/tracking_campaign (real reports of a two-arm campaign, two episodes each); one episode
at a time is made hostile: a path that leads out, a number that is not one, a control sequence, a file or a line far
past its bound. Every reader (status, compare and its exports, report --html, view) must go on, with that episode
listed as excluded and named, and nothing outside the episode read or copied.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from cli_support import invoke
from tracking_support import FIXTURE

from mcu_arms.contracts.limits import MAX_LINE_BYTES, MAX_REPORT_BYTES
from mcu_arms.contracts.run_report import read_report
from mcu_arms.process.child_env import OWNER_TOKEN_ENV

CAMPAIGN = "campaigns/tiny.toml"
HOSTILE = Path("output/scripted_arm/episode_002")
SECRET = "the-secret-outside-the-episode"
GIGABYTE = 1 << 30
# Run by `unshare`: a tmpfs of its own on the state dir ($1), then the rest of the arguments in its place.
MOUNT_AND_EXEC = 'mount -t tmpfs -o size=512k,mode=0700 tmpfs "$1" && shift && exec "$@"'
CAUSE = {"full": "No space left on device", "read-only": "Read-only file system"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(FIXTURE, copy)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "id_rsa").write_text(json.dumps({"secret": SECRET}))
    return copy


def env_for(project: Path) -> dict[str, str]:
    return {"MCU_ARMS_STATE_DIR": str(project / "state"), "COLUMNS": "200"}


def edit_report(project: Path, **changes: object) -> None:
    path = project / HOSTILE / "result.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def raw_report(project: Path, key: str, literal: str) -> None:
    """Set a top-level number as a raw JSON literal (NaN, Infinity, 1e400: what json.dumps would not write)."""
    path = project / HOSTILE / "result.json"
    data = json.loads(path.read_text())
    data[key] = "@@"
    path.write_text(json.dumps(data).replace('"@@"', literal))


def excluded_reasons(project: Path) -> list[str]:
    shown = invoke(project, env_for(project), "compare", CAMPAIGN, "--json")
    assert shown.exit_code == 0, shown.out + shown.err
    data = json.loads(shown.out)
    return [f"{flag['arm']} {flag['message']}" for flag in data["flags"] if flag["kind"] == "unreadable_run"]


def assert_every_reader_goes_on(project: Path, says: str) -> None:
    """compare (text, --json, --markdown), report --html and view each answer, naming the excluded episode."""
    env = env_for(project)
    reasons = excluded_reasons(project)
    assert any(r.startswith("scripted_arm episode 2 skipped, unreadable") and says in r for r in reasons), reasons
    for args in (["compare", CAMPAIGN], ["compare", CAMPAIGN, "--markdown"]):
        shown = invoke(project, env, *args)
        assert shown.exit_code == 0, shown.out + shown.err
        assert "scripted_arm episode 2 skipped, unreadable" in shown.out.replace("\n", " ")
        assert "\x1b" not in shown.out + shown.err
    bundle = invoke(project, env, "report", "--html", "bundle", *["scripted_arm", "random_arm"])
    assert bundle.exit_code == 0, bundle.out + bundle.err
    assert says in (project / "bundle" / "index.html").read_text()
    from mcu_arms.environment import Environment
    from mcu_arms.view.site import Site

    site = Site.build(["scripted_arm", "random_arm"], Environment(cwd=project, variables=env))
    index = site.get("index.html")
    assert index is not None and index.data is not None and b"scripted_arm" in index.data


@pytest.mark.parametrize(
    ("stored", "says"),
    [("/etc/hostname", "an absolute path"), ("../../../secret/id_rsa", "climbs out")],
)
def test_a_report_naming_a_path_out_of_its_episode_is_unreadable_for_every_reader(
    project: Path, stored: str, says: str
) -> None:
    edit_report(project, evaluation_file=stored)
    assert_every_reader_goes_on(project, says)
    assert SECRET not in (project / "bundle" / "index.html").read_text()


def test_an_evaluation_that_is_a_link_out_of_the_episode_is_unreadable(project: Path) -> None:
    evaluation = project / HOSTILE / "green" / "evaluation.json"
    evaluation.unlink()
    evaluation.symlink_to(project.parent / "secret" / "id_rsa")
    assert_every_reader_goes_on(project, "link")
    green = project / HOSTILE / "green"
    shutil.rmtree(green)
    green.symlink_to(project.parent / "secret", target_is_directory=True)  # a folder on the way that leads out
    (project / "bundle").rename(project / "bundle-1")
    assert_every_reader_goes_on(project, "leads out of the episode")


@pytest.mark.parametrize(
    ("key", "literal", "says"),
    [
        ("score", "NaN", "not a number mcu-arms reads"),
        ("score", "Infinity", "not a number mcu-arms reads"),
        ("wall_s", "-Infinity", "not a number mcu-arms reads"),
        ("score", "1e400", "not a finite number"),
        ("score", "1e300", "out of range"),
        ("score", "-5", "negative"),
        ("steps_run", "-1", "negative"),
        ("max_score", "123456789012345678901234567890", "out of range"),
    ],
)
def test_a_number_that_is_not_one_excludes_its_episode_and_nothing_crashes(
    project: Path, key: str, literal: str, says: str
) -> None:
    raw_report(project, key, literal)
    assert_every_reader_goes_on(project, says)
    status = invoke(project, env_for(project), "status", "--json", "--arm", "scripted_arm")
    assert status.exit_code == 0, status.out + status.err


def test_a_count_below_zero_excludes_its_episode(project: Path) -> None:
    edit_report(project, infrastructure={"timeout": -3})
    assert_every_reader_goes_on(project, "a count of -3")


def test_a_control_sequence_in_an_alert_reaches_no_terminal(project: Path) -> None:
    edit_report(project, alerts=["\x1b]0;pwned\x07 title changed", "\x1b[2J cleared"], notes=["\x9b31m"])
    env = env_for(project)
    for args in (["compare", CAMPAIGN], ["compare", CAMPAIGN, "--markdown"], ["compare", CAMPAIGN, "--json"]):
        shown = invoke(project, env, *args)
        assert shown.exit_code == 0, shown.out + shown.err
        text = shown.out + shown.err
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    shown = invoke(project, env, "compare", CAMPAIGN, "--markdown").out
    assert "\\x1b]0;pwned\\x07 title changed" in shown, "the text is kept, made visible"
    status = invoke(project, env, "status", "--arm", "scripted_arm")
    assert status.exit_code == 0 and "\x1b" not in status.out + status.err


def test_a_gigabyte_report_is_refused_from_its_size(project: Path) -> None:
    path = project / HOSTILE / "result.json"
    with path.open("r+b") as handle:
        handle.truncate(GIGABYTE)  # sparse: the test writes nothing
    reasons = excluded_reasons(project)
    assert any(
        r.startswith("scripted_arm episode 2 skipped, unreadable")
        and f"over the {MAX_REPORT_BYTES >> 20} MiB read" in r
        for r in reasons
    ), reasons
    status = invoke(project, env_for(project), "status", "--arm", "scripted_arm")
    assert status.exit_code == 0, status.out + status.err
    assert "unreadable" in status.out


def write_step_log(project: Path, long_line_bytes: int) -> Path:
    """A step log in a used episode: two valid steps, then one line `long_line_bytes` long (sparse: NUL bytes)."""
    log = project / "output/random_arm/episode_001/green/collect_wood/steps.jsonl"
    log.parent.mkdir(parents=True)
    step = {"step": 0, "t": 1.0, "received": "{}", "applied": {}, "agent_ms": 1.0, "sim_ms": 1.0}
    with log.open("wb") as handle:
        handle.write(json.dumps(step).encode() + b"\n" + json.dumps({**step, "step": 1}).encode() + b"\n")
        handle.truncate(handle.tell() + long_line_bytes)
    return log


def test_a_gigabyte_step_log_line_is_refused_and_the_export_goes_on(project: Path) -> None:
    log = write_step_log(project, GIGABYTE)
    env = env_for(project)
    shown = invoke(project, env, "compare", CAMPAIGN, "--export", "tables")
    assert shown.exit_code == 0, shown.out + shown.err
    assert f"line 3 is longer than the {MAX_LINE_BYTES >> 20} MiB a line may be" in shown.err
    assert str(log) in shown.err.replace("\n", "")
    steps = (project / "tables" / "steps.csv").read_text().splitlines()
    assert len(steps) == 3, "the two steps before the long line are kept"
    assert sorted(p.name for p in (project / "tables").iterdir()) == sorted(
        name for name in os.listdir(project / "tables") if not name.startswith(".")
    ), "no staging folder is left"
    bundle = invoke(project, env, "report", "--html", "bundle", "scripted_arm", "random_arm")
    assert bundle.exit_code == 0, bundle.out + bundle.err
    assert "excluded:" in bundle.out and "longer than" in bundle.out


def _limited(project: Path, file_bytes: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`mcu-arms ARGS` in a process that may write no file larger than `file_bytes` (a full disk, portably)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", *args],
        cwd=project,
        env={**os.environ, **env_for(project)},
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=300,
    )


def test_an_export_that_fails_leaves_nothing_and_a_rerun_is_not_blocked(project: Path) -> None:
    failed = _limited(project, 2048, "compare", CAMPAIGN, "--export", "tables")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "cannot write the export" in failed.stderr and "nothing was left behind" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert list((project / "tables").iterdir()) == [], "no half-written file and no staging folder"
    again = invoke(project, env_for(project), "compare", CAMPAIGN, "--export", "tables")
    assert again.exit_code == 0, again.out + again.err
    assert (project / "tables" / "analysis.json").is_file()


def test_a_bundle_that_cannot_be_written_names_its_directory_and_leaves_nothing(project: Path) -> None:
    failed = _limited(project, 64 * 1024, "report", "--html", "bundle", "scripted_arm", "random_arm")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{project / 'bundle'}: flag '--html': cannot write the bundle" in lines[0], lines
    assert "plotly" not in failed.stderr and "nothing was left behind" in failed.stderr
    assert sorted(path.name for path in project.iterdir()) == ["arms", "campaigns", "output"], "no partial bundle"
    again = invoke(project, env_for(project), "report", "--html", "bundle", "scripted_arm", "random_arm")
    assert again.exit_code == 0, again.out + again.err


def test_stop_without_our_private_record_leaves_a_live_report_as_it_is(project: Path) -> None:
    """A `started` report whose run this state dir has no record of (run from another state dir): not ours to judge."""
    edit_report(project, status="started", finished_at=None)
    before = (project / HOSTILE / "result.json").read_bytes()
    other_state = {**env_for(project), "MCU_ARMS_STATE_DIR": str(project / "another-state")}
    stopped = invoke(project, other_state, "stop", "--arm", "scripted_arm", "--grace", "1")
    assert stopped.exit_code == 0, stopped.out + stopped.err
    assert "not ours to stop: this run's record is in another state directory (or unreadable)" in stopped.out
    assert (project / HOSTILE / "result.json").read_bytes() == before
    assert read_report(project / HOSTILE / "result.json").status == "started"


def test_a_full_state_dir_at_start_is_one_line_naming_what_could_not_be_written(tmp_path: Path) -> None:
    """A state dir that takes no byte more (a file-size limit of 0: a full disk, portably): `run` stops before it
    starts anything, with one line naming the file, and leaves no episode behind."""
    from run_helpers import write_arm

    project = tmp_path / "project"
    write_arm(project, "full", steps=5)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--arm", "full"],
        cwd=project,
        env={**os.environ, "MCU_ARMS_STATE_DIR": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / "state") in lines[0], done.stderr
    assert "cannot write who holds the lock: File too large" in lines[0]
    assert "Traceback" not in done.stderr and "OSError" not in done.stderr
    assert not list(project.glob("output/*/episode_*")), "nothing was started"


def _why_no_mount_namespace(probe: Path) -> str | None:
    """Why this test cannot give a run a state dir of its own size (a tmpfs in a mount namespace), or None."""
    if os.geteuid() != 0:
        return "mounting a tmpfs in a mount namespace needs root"
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return "unshare and nsenter (util-linux) are not installed"
    probe.mkdir()
    tried = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe],
        capture_output=True,
        text=True,
    )
    return f"cannot mount a tmpfs in a mount namespace here: {tried.stderr.strip()}" if tried.returncode else None


def _tokens_still_carried(tokens: set[str]) -> list[int]:
    """Pids of running processes whose environment carries one of these owner tokens."""
    carrying = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(OWNER_TOKEN_ENV) in tokens and process.status() != psutil.STATUS_ZOMBIE:
                carrying.append(process.pid)
        except psutil.Error:
            continue
    return carrying


@pytest.mark.parametrize("becomes", ["full", "read-only"])
def test_a_state_dir_that_becomes_unwritable_mid_run_is_one_line_and_leaves_nothing_running(
    tmp_path: Path, becomes: str
) -> None:
    """The run's state dir is a tmpfs of its own (a mount namespace made for it) that fills up, or turns read-only,
    once the green has started: the next child's private record cannot be written. The run stops what it
    started (it once alerted "stopping children failed: KeyError: 'green'" and left a stale record) and says so in one
    line naming the state dir."""
    from run_helpers import Started, alive, report, wait_for, write_arm

    if why := _why_no_mount_namespace(tmp_path / "probe"):
        pytest.skip(why)
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "filled", agent="scripted", steps=5)
    state.mkdir()
    own_state = ("unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT_AND_EXEC, "sh", str(state))
    run = Started(project, state, "run", "--arm", "filled", wrapper=own_state)
    try:
        wait_for(
            lambda: run.popen.poll() is not None or "green" in (report(project, "filled") or {}).get("processes", {}),
            "the green to start (its private record written)",
        )
        run.popen.send_signal(signal.SIGSTOP)  # held while its state dir changes: it starts no client meanwhile
        try:
            assert run.popen.poll() is None, run.output
            family = run.remember_family()
            seen_state = Path(f"/proc/{run.popen.pid}/root") / state.relative_to("/")  # the run's own mount of it
            if becomes == "full":
                with pytest.raises(OSError, match=CAUSE["full"]), (seen_state / "filler").open("wb") as filler:
                    while True:
                        filler.write(b"\0" * 65536)
                        filler.flush()
            else:
                # A read-only bind of it over itself: the arm lock, held open for writing, keeps `remount,ro` busy.
                read_only = ["mount", "--bind", "-o", "ro", str(state), str(state)]
                subprocess.run(["nsenter", "--target", str(run.popen.pid), "--mount", *read_only], check=True)
        finally:
            run.popen.send_signal(signal.SIGCONT)
        code = run.wait(timeout=120)
    finally:
        run.kill_if_running()
    shown = run.output
    assert code != 0, shown
    assert "Traceback" not in shown and "KeyError" not in shown and "Error:" not in shown, shown
    naming = [line for line in shown.splitlines() if str(state) in line and not line.startswith("│")]
    assert len(naming) == 1, shown  # (the summary table restates it in its reason column)
    assert f"cannot keep the private record of what runs: {state / 'started'}: {CAUSE[becomes]}" in naming[0]
    final = report(project, "filled")
    assert final is not None and final["status"] == "failed", final
    tokens = {process["owner_token"] for process in final["processes"].values() if process.get("owner_token")}
    assert tokens and family, "the green, at least, was started and carries its token"
    assert alive(family) == [] and _tokens_still_carried(tokens) == [], shown


@pytest.mark.parametrize(
    ("line", "key", "allowed"),
    [
        ("retries = 1000000000", "retries", "an integer from 0 to 10"),
        ("max_parallel = 1000000000", "max_parallel", "an integer from 1 to 1000"),
    ],
)
def test_a_campaign_count_past_its_bound_is_one_line_at_file_line_key(
    tmp_path: Path, line: str, key: str, allowed: str
) -> None:
    from run_helpers import write_arm

    project = tmp_path / "project"
    write_arm(project, "base", agent="scripted", steps=5)
    (project / "campaigns").mkdir()
    text = f'name = "c"\nseeds = [0]\n{line}\n[baseline]\narm = "base"\n'
    (project / "campaigns" / "c.toml").write_text(text)
    shown = invoke(project, env_for(project), "plan", "--dry-run", "campaigns/c.toml")
    assert shown.exit_code == 2, shown.out + shown.err
    assert f"campaigns/c.toml:3: key '{key}'" in shown.err and f"(allowed: {allowed})" in shown.err
    assert len(shown.err.strip().splitlines()) == 1


def test_a_refused_campaign_run_writes_no_campaign_record(tmp_path: Path) -> None:
    """Another `run` holds the arm: this one is refused before it starts, and `status --campaign` must not show a
    run that never ran (it once read "0 of N done" after every episode had finished)."""
    from run_helpers import write_arm

    from mcu_arms.isolation.locks import try_lock, unlock
    from mcu_arms.layout import arm_lock

    project = tmp_path / "project"
    write_arm(project, "base", agent="scripted", steps=5)
    (project / "campaigns").mkdir()
    (project / "campaigns" / "c.toml").write_text('name = "c"\nseeds = [0]\n[baseline]\narm = "base"\n')
    env = env_for(project)
    lock = arm_lock(env, project / "output" / "base")
    lock.parent.mkdir(parents=True)
    held = try_lock(lock)
    assert held is not None
    try:
        refused = invoke(project, env, "run", "campaigns/c.toml")
    finally:
        unlock(held)
    assert refused.exit_code == 2, refused.out + refused.err
    assert not list(project.glob("output/.campaigns/c/*.json")), "a refused run left a campaign record"


def _sequential(project: Path, episode: str, **look: object) -> None:
    path = project / "output/scripted_arm" / episode / "result.json"
    data = json.loads(path.read_text())
    data["sequential"] = {"primary": "score", "batch": 1, "alpha": 0.05, "comparisons": 1, **look}
    path.write_text(json.dumps(data))


def test_sequential_looks_past_their_own_maximum_make_the_experiment_unreadable(project: Path) -> None:
    for episode in ("episode_001", "episode_002"):
        _sequential(project, episode, look=1, max_seeds=1)  # two seeds in looks that allow one
    shown = invoke(project, env_for(project), "compare", CAMPAIGN, "--json")
    assert shown.exit_code == 0, shown.out + shown.err
    flags = {flag["kind"]: flag["message"] for flag in json.loads(shown.out)["flags"]}
    assert "more than their own maximum of 1 seeds" in flags["unreadable_experiment"]
    assert "sequential" not in flags, "no boundary is computed from a design its own episodes break"


def test_a_look_that_starts_past_its_maximum_makes_its_episode_unreadable(project: Path) -> None:
    _sequential(project, "episode_002", look=5, max_seeds=2)
    assert_every_reader_goes_on(project, "starts past its own maximum of 2 seeds")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_output_dir_deleted_under_a_run_is_named_as_the_cause(tmp_path: Path) -> None:
    """The client is the first to notice (it exits 1 when it cannot write its events): the failure names the
    deleted directory first, never only "client exited with code 1"."""
    from run_helpers import Started, running_with_steps, wait_for, write_arm

    project = tmp_path / "project"
    write_arm(project, "gone", agent="random", steps=5000, step_timeout=5)
    run = Started(project, tmp_path / "state", "run", "--arm", "gone")
    try:
        wait_for(lambda: running_with_steps(project, "gone"), "the arm to run")
        shutil.rmtree(project / "output")
        assert run.wait(timeout=300) != 0
    finally:
        run.kill_if_running()
    shown = "".join(run.out + run.err).replace("\n", " ")
    assert "the episode directory output/gone/episode_001 was deleted (or moved) while the episode ran" in shown, shown


def test_a_directory_name_holding_a_control_sequence_reaches_no_terminal(project: Path) -> None:
    hostile = "x\x1b]0;pwned\x07"
    shutil.copytree(project / HOSTILE, project / "output" / hostile / "episode_001")
    env = env_for(project)
    for args in (["status"], ["status", "--arm", hostile], ["compare", hostile], ["compare", "nonexistent\x1b[2J"]):
        shown = invoke(project, env, *args)
        assert "\x1b" not in shown.out + shown.err and "\x07" not in shown.out + shown.err, args


def test_a_tail_skips_a_line_past_its_bound_without_holding_it(tmp_path: Path) -> None:
    """The live readers (status, the run's own progress) tail logs as they grow: a line past MAX_LINE_BYTES is
    counted invalid and skipped as it arrives, and the lines after it are read."""
    from mcu_arms.contracts.steps import JsonlTail, StepProgress

    log = tmp_path / "steps.jsonl"
    step = json.dumps({"step": 0, "t": 1.0}).encode()
    log.write_bytes(step + b"\n" + b"x" * (MAX_LINE_BYTES + 10))
    tail = JsonlTail(log, StepProgress)
    read = []
    while chunk := tail.poll():
        read += chunk
    read += tail.poll()
    with log.open("ab") as handle:
        handle.write(b"x" * MAX_LINE_BYTES + b"\n" + json.dumps({"step": 1, "t": 2.0}).encode() + b"\n")
    while (more := tail.poll()) or tail.offset < log.stat().st_size:
        read += more
    assert [record.step for record in read] == [0, 1] and tail.invalid == 1
