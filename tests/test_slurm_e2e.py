"""`run --executor slurm` on a real single-node Slurm cluster (slurm_support.py): a two-arm embedded campaign
submitted as a job array, watched while it runs, compared, rerun as a no-op; one arm stopped by cancelling its job
only; an episode stopped at its job's time limit and started over by the rerun. Every job is cancelled at the end of
each test, by the ids its episodes recorded."""

from __future__ import annotations

import json
import os
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
    done = subprocess.run(["squeue", "-h", "-t", "all", "-r", "-j", job, "-o", "%T"], capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    return done.stdout.strip()


def _status(project: Path, state: Path, *args: str) -> dict[str, dict]:
    done = run_cli(project, state, "status", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {arm["arm"]: arm for arm in json.loads(done.stdout)["arms"]}


def test_a_two_arm_campaign_runs_as_slurm_jobs_is_watched_compared_and_rerun_as_a_no_op(project: Path,
                                                                                        tmp_path: Path) -> None:
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
        wait_for(lambda: steps_logged(project, "walker") >= 20 and steps_logged(project, "patient") >= 20,
                 "both episodes to take steps", timeout=180)  # fmt: skip
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


def test_an_episode_at_its_time_limit_fails_so_and_the_rerun_starts_it_over(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    long = write_arm(project, "long", agent="noop", steps=7000)
    long.write_text(long.read_text() + "\n[slurm]\ntime = 1\nstop_margin = 25\n")
    limited = run_cli(project, state, "run", "--arm", "long", "--executor", "slurm", timeout=300)
    assert limited.returncode == 1, limited.stdout + limited.stderr
    report = _report(project, "long", 1)
    assert report["status"] == "failed" and report["failure"]["kind"] == "time_limit", report["failure"]
    assert 0 < report["steps_run"] < 7000 and "reached its time limit (00:01:00" in report["failure"]["reason"]
    assert _status(project, state, "--arm", "long")["long"]["state"] == "failed (time limit)"

    rerun = run_cli(project, state, "run", "--arm", "long", "--executor", "slurm", "--slurm-time", "10", timeout=420)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "restarted from its first step as a new episode: episode_001 hit its Slurm time limit" in rerun.stdout
    assert _report(project, "long", 2)["status"] == "finished" and _report(project, "long", 2)["steps_run"] == 7000
    assert os.path.exists(project / "output" / "long" / "episode_001" / "result.json"), "nothing was overwritten"
