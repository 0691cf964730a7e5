"""`mcu-arms run` end to end: real green, purple and client processes on the embedded simulator, real sockets."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from run_helpers import report, run_cli, write_arm

TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


@pytest.mark.slow
def test_one_arm_end_to_end_then_rerun_skips_and_a_changed_fingerprint_is_announced(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "solo", agent="random", steps=30)

    done = run_cli(project, state, "run", "--arm", "solo")
    assert done.returncode == 0, done.stdout + done.stderr

    episode = project / "output" / "solo" / "episode_001"
    data = report(project, "solo")
    assert data is not None and data["status"] == "finished", data
    assert data["evaluation_file"] == "green/evaluation.json"
    evaluation = json.loads((episode / data["evaluation_file"]).read_text())
    assert not (episode / "evaluation.json").exists(), "one evaluation file per episode"
    assert data["steps_run"] == 30
    assert data["score"] is not None and data["max_score"] == evaluation["results"][0]["total_max_score"]
    assert "Crafter" in data["simulator_label"]
    assert len(data["milestones"]) == len(
        evaluation["results"][0]["task_metrics"]["mine_diamond_from_scratch"]["milestones"]
    )
    assert data["provenance"]["packages"]["crafter"] == "1.8.3"
    assert data["failure"] is None and data["ready_at"] and data["finished_at"]
    assert any("iron_ingot has no Crafter analogue" in note for note in data["plan_notes"])
    assert "note: mine_diamond_from_scratch: iron_ingot has no Crafter analogue" in done.stdout
    assert "ALERT demo" not in done.stdout.replace("ALERT demo_", ""), "a known simulator gap is a note, not an alert"

    processes = data["processes"]
    assert set(processes) == {"mcu-arms", "green", "purple", "client"}
    for role in ("green", "purple", "client"):
        assert processes[role]["pid"] and processes[role]["create_time"], role
        assert processes[role]["exit_code"] is not None, role
    assert processes["client"]["exit_code"] == 0

    for role in ("green", "purple", "client"):
        link = project / "logs" / f"solo_{role}.log"
        assert link.is_symlink() and link.resolve() == (episode / "logs" / f"{role}.log").resolve()
        lines = link.read_text().splitlines()
        assert lines, f"{role} log is empty"
        assert all(TIMESTAMPED.match(line) for line in lines), f"{role} log has a line without a timestamp"
    assert (project / "logs" / "solo_result.json").resolve() == (episode / "result.json").resolve()
    assert "Running task: mine_diamond_from_scratch" in (episode / "logs" / "client.log").read_text()
    assert "solo" in done.stdout and "finished" in done.stdout
    assert "output/solo/episode_001/result.json" in done.stdout and str(project) not in done.stdout, "path not relative"

    again = run_cli(project, state, "run", "--arm", "solo")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "skipped, episode_001 already finished" in again.stdout
    assert not (project / "output" / "solo" / "episode_002").exists()

    changed = run_cli(project, state, "run", "--arm", "solo", "--steps", "20")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "fingerprint changed since episode_001" in changed.stdout
    assert "steps: 30 -> 20" in changed.stdout
    second = report(project, "solo", 2)
    assert second is not None and second["status"] == "finished" and second["steps_run"] == 20
    assert report(project, "solo", 1)["steps_run"] == 30, "an earlier episode was touched"
    assert (project / "logs" / "solo_result.json").resolve() == (
        project / "output" / "solo" / "episode_002" / "result.json"
    ).resolve()


@pytest.mark.slow
def test_three_arms_run_side_by_side(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "a_noop", agent="noop", steps=25)
    write_arm(project, "b_random", agent="random", steps=25, seed=1)
    write_arm(project, "c_random", agent="random", steps=25, seed=2)

    done = run_cli(
        project,
        state,
        "run",
        "--arm",
        "a_noop",
        "--arm",
        "b_random",
        "--arm",
        "c_random",
        "--max-parallel",
        "3",
        "--json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert [arm["status"] for arm in outcome["arms"]] == ["finished"] * 3

    reports = [report(project, arm) for arm in ("a_noop", "b_random", "c_random")]
    assert all(r is not None and r["status"] == "finished" and r["steps_run"] == 25 for r in reports)
    supervisors = {r["processes"]["mcu-arms"]["pid"] for r in reports}
    assert len(supervisors) == 1, "one mcu-arms process supervises every arm"
    pids = [p["pid"] for r in reports for p in r["processes"].values() if p["role"] != "mcu-arms"]
    assert len(set(pids)) == 9, "each arm has its own three processes"
    urls = {
        r["processes"][role]["argv"][r["processes"][role]["argv"].index("--port") + 1]
        for r in reports
        for role in ("green", "purple")
    }
    assert len(urls) == 6, "each arm has its own two ports"
    # Side by side: every arm was ready before any arm finished.
    assert max(r["ready_at"] for r in reports) <= min(r["finished_at"] for r in reports)
    assert reports[0]["settings"]["agent"] == "noop" and reports[1]["settings"]["seed"] == 1
    assert not os.path.exists(project / "output" / "a_noop" / "episode_002")


def test_an_episode_starts_both_servers_before_either_is_ready_and_stops_them_at_once_once_evaluated(
    tmp_path: Path,
) -> None:
    """The order the supervisor's own log records: green and purple both started before the first is ready; the
    client's exit read as it happens, then the three stopped at once; each exited 0 on its SIGTERM (a server ends
    without the interpreter's teardown, with its status and its last lines kept)."""
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "brisk", agent="random", steps=5)
    done = run_cli(project, state, "run", "--arm", "brisk")
    assert done.returncode == 0, done.stdout + done.stderr
    episode = project / "output" / "brisk" / "episode_001"
    events = [line.split(" ", 1)[1] for line in (episode / "logs" / "mcu-arms.log").read_text().splitlines()]

    def first(prefix: str) -> int:
        return next(index for index, text in enumerate(events) if text.startswith(prefix))

    first_ready = min(first("green ready"), first("purple ready"))
    assert first("green started") < first_ready and first("purple started") < first_ready, events
    assert first("client exited with code 0") < first("stopping green, purple, client at once"), events
    assert first("stopping green, purple, client at once") < first("children stopped in") < first("state finished")
    data = report(project, "brisk")
    assert data is not None and data["status"] == "finished"
    assert {role: data["processes"][role]["exit_code"] for role in ("green", "purple", "client")} == {
        "green": 0,
        "purple": 0,
        "client": 0,
    }
    assert "summary (final)" in (episode / "logs" / "purple.log").read_text()
    assert "Total Score" in (episode / "logs" / "client.log").read_text()
