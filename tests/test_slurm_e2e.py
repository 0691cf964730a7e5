"""`run --executor slurm` on a real single-node Slurm cluster (slurm_support.py): a two-arm embedded campaign
submitted as a job array, watched while it runs, compared, rerun as a no-op; one arm stopped by cancelling its job
only; an episode stopped at its job's time limit (five times in a row) and its rerun told what limit would fit;
pending array tasks stopped (by `stop --arm` and Ctrl-C) and never resubmitted whatever `retries` says; a requeued
job retried as infrastructure. Every job is cancelled at the end of each test, by the ids its episodes recorded."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from run_helpers import Started, run_cli, steps_logged, wait_for, write_arm

CAMPAIGN = """name = "cluster"
seeds = [0]
retries = 0

[slurm]
time = "10:00"
gres = "mcslot:1"
stop_margin = 20

[baseline]
arm = "walker"

[[variants]]
name = "patient"
differs_in = ["step_timeout"]
step_timeout = 20
"""

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path: Path, slurm_conf: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project whose `mcu-arms` finds the cluster (SLURM_CONF); its jobs are cancelled at the end, by id."""
    monkeypatch.setenv("SLURM_CONF", slurm_conf)
    project = tmp_path / "project"
    write_arm(project, "walker", steps=400)
    (project / "campaigns").mkdir()
    (project / "campaigns" / "cluster.toml").write_text(CAMPAIGN)
    yield project
    for record in project.glob("output/*/episode_*/slurm.json"):
        subprocess.run(["scancel", json.loads(record.read_text())["job_id"]], capture_output=True, timeout=30)


def _report(project: Path, arm: str, episode: int) -> dict | None:
    try:
        return json.loads((project / "output" / arm / f"episode_{episode:03d}" / "result.json").read_text())
    except (OSError, ValueError):
        return None


def _job_state(project: Path, arm: str, episode: int) -> str:
    job = json.loads((project / "output" / arm / f"episode_{episode:03d}" / "slurm.json").read_text())["job_id"]
    done = subprocess.run(
        ["squeue", "-h", "-t", "all", "-r", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip()


def _status(project: Path, state: Path, *args: str) -> dict[str, dict]:
    done = run_cli(project, state, "status", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {arm["arm"]: arm for arm in json.loads(done.stdout)["arms"]}


def test_a_two_arm_campaign_runs_as_slurm_jobs_is_watched_compared_and_rerun_as_a_no_op(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    run = Started(project, state, "run", "campaigns/cluster.toml", "--executor", "slurm")
    try:

        def both_running() -> dict[str, dict] | None:
            shown = _status(project, state, "--campaign", "campaigns/cluster.toml")
            running = all(arm.get("state") == "started" and (arm.get("step") or 0) > 0 for arm in shown.values())
            return shown if len(shown) == 2 and running else None

        shown = wait_for(both_running, "both episodes to run on the cluster", timeout=180)
        for arm in ("walker", "patient"):
            assert " RUNNING on " in shown[arm]["slurm_job"], shown[arm]
        assert run.wait(timeout=300) == 0, run.output
    finally:
        run.kill_if_running()
    assert "queued as Slurm job" in run.output and "state finished" in run.output
    for arm in ("walker", "patient"):
        report = _report(project, arm, 1)
        assert report["status"] == "finished" and report["steps_run"] == 400
        assert report["slurm"]["node"] and report["slurm"]["job_id"].endswith(("_0", "_1")), "one array, two tasks"
        assert _job_state(project, arm, 1) in ("COMPLETED", "FAILED", "")  # ended (FAILED only if exit code != 0)

    compared = run_cli(project, state, "compare", "campaigns/cluster.toml", "--json")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    result = json.loads(compared.stdout)
    assert {arm["arm"]: arm["status"] for arm in result["arms"]} == {"walker": "finished", "patient": "finished"}

    again = run_cli(project, state, "run", "campaigns/cluster.toml", "--executor", "slurm", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert [arm["status"] for arm in json.loads(again.stdout)["arms"]] == ["skipped", "skipped"]
    assert sorted(p.name for p in project.glob("output/*/episode_*")) == ["episode_001", "episode_001"], (
        "the rerun submitted nothing"
    )


def test_stopping_one_arm_cancels_its_job_only_and_ctrl_c_cancels_the_rest(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    run = Started(project, state, "run", "campaigns/cluster.toml", "--executor", "slurm", "--steps", "20000")
    try:
        wait_for(
            lambda: steps_logged(project, "walker") >= 20 and steps_logged(project, "patient") >= 20,
            "both episodes to take steps",
            timeout=180,
        )
        stopped = run_cli(project, state, "stop", "--arm", "walker", "--json")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        result = json.loads(stopped.stdout)["arms"][0]
        assert result["action"] == "cancelled" and len(result["stopped"]) == 1
        walker = wait_for(lambda: (r := _report(project, "walker", 1)) and r["status"] != "started" and r, "walker")
        assert walker["status"] == "interrupted" and "stopped by mcu-arms stop" in walker["failure"]["reason"]
        assert _job_state(project, "patient", 1) == "RUNNING", "stopping one arm cancelled the other's job"
        assert _report(project, "patient", 1)["status"] == "started"

        run.popen.send_signal(signal.SIGINT)  # the watching run cancels its own remaining job
        assert run.wait(timeout=180) == 130, run.output
    finally:
        run.kill_if_running()
    patient = _report(project, "patient", 1)
    assert patient["status"] == "interrupted" and "interrupted by SIGINT" in patient["failure"]["reason"]
    assert "cancelled Slurm job" in run.output
    wait_for(lambda: _job_state(project, "patient", 1) not in ("RUNNING", "COMPLETING"), "the cancelled job to end")


TIME_LIMITED_RUNS = 5


@pytest.mark.timeout(TIME_LIMITED_RUNS * 300)
def test_an_episode_at_its_time_limit_fails_so_every_time_and_the_rerun_says_what_limit_fits(
    project: Path, tmp_path: Path
) -> None:
    """Slurm's warning SIGTERM reaches every process of the job up to a minute before it was asked for (here, 20 s
    before a 2-minute limit): each run must read it as the time limit, however early in that window it lands."""
    state = tmp_path / "state"
    long = write_arm(project, "long", agent="noop", steps=50000)
    long.write_text(long.read_text() + "\n[slurm]\ntime = 2\nstop_margin = 20\n")
    for attempt in range(1, TIME_LIMITED_RUNS + 1):
        limited = run_cli(project, state, "run", "--arm", "long", "--executor", "slurm", timeout=400)
        assert limited.returncode == 1, f"run {attempt}: " + limited.stdout + limited.stderr
        report = _report(project, "long", attempt)
        assert report["status"] == "failed" and report["failure"]["kind"] == "time_limit", (attempt, report["failure"])
        assert "reached its time limit (00:02:00)" in report["failure"]["reason"], report["failure"]["reason"]
        assert _status(project, state, "--arm", "long")["long"]["state"] == "failed (time limit)"
        if attempt > 1:  # each run is the rerun of the one before
            said = limited.stdout
            assert f"episode_{attempt - 1:03d} hit its Slurm time limit after 00:0" in said, said
            assert "would fit" in said and "the limit now set (00:02:00) is too short" in said, said
    assert sorted(p.name for p in (project / "output" / "long").glob("episode_*")) == [
        f"episode_{n:03d}" for n in range(1, TIME_LIMITED_RUNS + 1)
    ], "nothing was overwritten"


PENDING_CAMPAIGN = """name = "queue"
seeds = [0, 1]
retries = 2

[slurm]
time = "10:00"
gres = "mcslot:2"
stop_margin = 20

[baseline]
arm = "alpha"

[[variants]]
name = "beta"
differs_in = ["step_timeout"]
step_timeout = 20
"""


def _job_ids(project: Path, arm: str) -> list[str]:
    records = sorted(project.glob(f"output/{arm}/episode_*/slurm.json"))
    return [json.loads(record.read_text())["job_id"] for record in records]


def _active(job_ids: list[str]) -> list[str]:
    done = subprocess.run(
        ["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i"], capture_output=True, text=True, timeout=30
    )
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def test_pending_array_tasks_stopped_are_cancelled_and_never_resubmitted(project: Path, tmp_path: Path) -> None:
    """Four episodes in one array, one at a time (each takes both mcslots): `stop --arm beta` while beta's tasks wait,
    then Ctrl-C while alpha's second waits. Each ends `interrupted (cancelled)`, naming who stopped it; with
    retries = 2, nothing is resubmitted."""
    state = tmp_path / "state"
    write_arm(project, "alpha", agent="noop", steps=50000)
    (project / "campaigns" / "queue.toml").write_text(PENDING_CAMPAIGN)
    run = Started(project, state, "run", "campaigns/queue.toml", "--executor", "slurm")
    try:

        def one_running() -> dict | None:
            shown = {
                (arm["arm"], arm["seed"]): arm
                for arm in json.loads(
                    run_cli(project, state, "status", "--json", "--campaign", "campaigns/queue.toml").stdout
                )["arms"]
            }
            running = [arm for arm in shown.values() if arm["state"] == "started" and (arm.get("step") or 0) > 0]
            return shown if len(shown) == 4 and len(running) == 1 else None

        shown = wait_for(one_running, "one episode to run and three to wait", timeout=180)
        waiting = [arm for arm in shown.values() if arm["state"] == "queued"]
        assert len(waiting) == 3
        for arm in waiting:
            job = arm["slurm"]
            assert job["state"] == "PENDING" and job["reason"] in ("Resources", "Priority"), job
            assert f"PENDING ({job['reason']})" in arm["slurm_job"], "why it waits"
            assert job["name"] == "mcu-arms:alpha+beta" and job["array_task"] is not None
        started = next(arm for arm in shown.values() if arm["state"] == "started")
        assert started["arm"] == "alpha", "the array runs its tasks in order: alpha's first seed first"
        assert Path(started["slurm"]["stdout"]).is_file() and Path(started["slurm"]["stderr"]).is_file()
        assert started["slurm"]["stdout"].startswith(started["episode_dir"]), "the episode's logs are in the episode"
        assert started["slurm"]["accounting"] == "not available on this cluster"
        table = run_cli(project, state, "status", "--campaign", "campaigns/queue.toml").stdout
        assert "PENDING (" in table and "name mcu-arms:alpha+beta" in table and "stdout " in table, table
        beta_jobs = _job_ids(project, "beta")

        stopped = run_cli(project, state, "stop", "--arm", "beta", "--json")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        for seed in (1, 2):
            report = _report(project, "beta", seed)
            assert report["status"] == "interrupted" and report["failure"]["kind"] == "stopped", report["failure"]
            assert report["failure"]["stopped_by"].startswith("mcu-arms stop (pid "), report["failure"]
        assert _active(beta_jobs) == [], "beta's tasks are gone from the queue"
        beta = _status(project, state, "--arm", "beta")["beta"]
        assert beta["state"] == "interrupted (cancelled)", beta
        wait_for(lambda: run.output.count("interrupted: stopped by mcu-arms stop") >= 2, "the watch to see beta end")
        alpha_jobs = _job_ids(project, "alpha")
        run.popen.send_signal(signal.SIGINT)  # alpha's first runs, its second waits
        assert run.wait(timeout=180) == 130, run.output
    finally:
        run.kill_if_running()
    for seed in (1, 2):
        report = _report(project, "alpha", seed)
        assert report["status"] == "interrupted", report
        assert "interrupted by SIGINT" in report["failure"]["stopped_by"], report["failure"]
    assert _active(alpha_jobs + beta_jobs) == [], "nothing of this run is left in the queue"
    queue = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, timeout=30).stdout
    assert "mcu-arms:" not in queue, f"nothing was resubmitted: {queue}"
    assert "retrying" not in run.output, run.output
    for arm in ("alpha", "beta"):
        assert sorted(p.name for p in (project / "output" / arm).glob("episode_*")) == ["episode_001", "episode_002"], (
            "nothing was resubmitted"
        )
    assert _status(project, state, "--arm", "alpha")["alpha"]["state"] == "interrupted (cancelled)"


def test_a_requeued_job_is_retried_as_infrastructure(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    (project / "campaigns" / "one.toml").write_text(
        'name = "one"\nseeds = [0]\nretries = 1\n\n[slurm]\ntime = "10:00"\nstop_margin = 20\n\n'
        '[baseline]\narm = "walker"\n'
    )
    run = Started(project, state, "run", "campaigns/one.toml", "--executor", "slurm", "--steps", "50000")
    try:
        wait_for(lambda: steps_logged(project, "walker") >= 20, "the episode to take steps", timeout=180)
        job = json.loads((project / "output" / "walker" / "episode_001" / "slurm.json").read_text())["job_id"]
        requeued = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=30)
        assert requeued.returncode == 0, requeued.stderr
        first = wait_for(
            lambda: (r := _report(project, "walker", 1)) and r["status"] != "started" and r,
            "the requeued episode to end",
            timeout=120,
        )
        assert first["status"] == "failed" and first["failure"]["kind"] == "infrastructure", first["failure"]
        assert f"Slurm requeued job {job}" in first["failure"]["reason"]
        second = wait_for(
            lambda: (r := _report(project, "walker", 2)) and r["status"] == "started" and r,
            "the retry to start",
            timeout=180,
        )
        assert second["attempt"] == 2
        wait_for(lambda: _active([job]) == [], "the requeued job to be cancelled (the retry is a new episode)")
        run.popen.send_signal(signal.SIGINT)
        assert run.wait(timeout=180) == 130, run.output
    finally:
        run.kill_if_running()
    assert "retrying: attempt 2 of 2" in run.output and "requeued by Slurm" in run.output, run.output


def test_doctor_takes_the_campaign_and_a_refused_submission_shows_sbatchs_words(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    doctor = run_cli(project, state, "doctor", "campaigns/cluster.toml", "--executor", "slurm", "--json")
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["run directory"]["status"] == "ok" and checks["run directory"]["needed_by"] == ["walker", "patient"]
    assert checks["sacct"]["status"] == "warn", "this cluster keeps no accounting"
    nosuch = run_cli(
        project,
        state,
        "doctor",
        "campaigns/cluster.toml",
        "--executor",
        "slurm",
        "--slurm-partition",
        "nosuch",
        "--json",
    )
    assert nosuch.returncode == 1
    partition = {check["name"]: check for check in json.loads(nosuch.stdout)["checks"]}["partition nosuch"]
    assert partition["status"] == "fail" and "the partitions here are ci" in partition["detail"]
    refused_here = run_cli(
        project, state, "run", "campaigns/cluster.toml", "--executor", "slurm", "--slurm-partition", "nosuch"
    )
    assert refused_here.returncode == 2 and "partition nosuch" in refused_here.stderr, refused_here.stderr

    refused = run_cli(
        project, state, "run", "campaigns/cluster.toml", "--executor", "slurm", "--slurm-gres", "mcslot:9"
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "sbatch refused the job: sbatch: error:" in refused.stderr, refused.stderr
    report = _report(project, "walker", 1)
    assert report["status"] == "failed" and "sbatch: error:" in report["failure"]["reason"]
