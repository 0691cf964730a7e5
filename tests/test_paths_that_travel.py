"""Paths that travel: the output root and arms dir chosen by option or environment, an episode that still resolves
every path of its report after it was moved, and file modes decided by what each file holds."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from cli_support import invoke
from run_helpers import cli_env, run_cli, write_arm

from mcu_arms.contracts.run_report import read_report
from mcu_arms.layout import RunDir


def _stored_paths(report_path: Path) -> dict[str, str]:
    """Every path the report stores, by where it is stored."""
    report = read_report(report_path)
    paths = {f"logs.{role}": path for role, path in report.logs.items()}
    paths |= {f"output_dirs.{role}": path for role, path in report.output_dirs.items()}
    paths |= {f"processes.{role}.log": record.log for role, record in report.processes.items()}
    if report.evaluation_file:
        paths["evaluation_file"] = report.evaluation_file
    if report.agent is not None:  # a file name in the purple's output dir
        paths["agent.report_file"] = str(Path(report.output_dirs["purple"]) / report.agent.report_file)
    return paths


def _modes(episode: Path) -> dict[str, int]:
    return {
        str(path.relative_to(episode)): stat.S_IMODE(path.stat().st_mode)
        for path in episode.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


@pytest.mark.slow
def test_a_run_under_an_output_dir_records_it_and_its_moved_episode_still_resolves_every_path(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "solo", agent="scripted", steps=40)
    umask = os.umask(0o022)  # what the files' own modes are judged against: open() gives 0644 under it
    try:
        done = run_cli(project, state, "--output-dir", "results", "run", "--arm", "solo")
    finally:
        os.umask(umask)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / "output").exists()
    episode = project / "results" / "solo" / "episode_001"
    report = read_report(episode / "result.json")
    assert report.status == "finished" and report.output_root == str(project / "results")
    assert "results/solo/episode_001/result.json" in done.stdout

    # results, reports, plans and logs are all readable like their neighbours: none is left 0600 by a temp file; only
    # what holds the agent's conversation is private (issue 12): the purple's log, and its files under purple/ (0700)
    modes = _modes(episode)
    assert {
        "result.json",
        "plan.json",
        "scenario.toml",
        "events.jsonl",
        "green/evaluation.json",
        "purple/scripted_report.json",
        "logs/green.log",
    } <= set(modes)
    private = {"logs/purple.log": 0o600}
    assert {name: mode for name, mode in modes.items() if mode != private.get(name, 0o644)} == {}
    assert stat.S_IMODE((episode / "purple").stat().st_mode) == 0o700

    archive = tmp_path / "elsewhere" / "archive"
    archive.parent.mkdir()
    shutil.move(project / "results", archive)
    moved = RunDir(archive / "solo" / "episode_001")
    stored = _stored_paths(moved.report)
    assert {"logs.green", "output_dirs.green", "evaluation_file", "agent.report_file"} <= set(stored)
    assert {key: path for key, path in stored.items() if Path(path).is_absolute()} == {}
    assert {key: path for key, path in stored.items() if not moved.resolve(path).exists()} == {}
    evaluation = json.loads(moved.resolve(report.evaluation_file or "").read_text())
    assert evaluation["results"][0]["total_max_score"] == report.max_score

    env = {**cli_env(state), "MCU_ARMS_OUTPUT_DIR": str(archive)}
    shown = invoke(project, env, "status", "--json")
    assert shown.exit_code == 0, shown.err
    assert [(arm["arm"], arm["state"]) for arm in json.loads(shown.out)["arms"]] == [("solo", "finished")]
    compared = invoke(project, env, "compare", "--json", "solo")
    assert compared.exit_code == 0, compared.err
    assert json.loads(compared.out)["arms"][0]["metrics"]["score"]["mean"] == report.score


def _episode_dir(project: Path, env: dict[str, str], *args: str) -> Path:
    outcome = invoke(project, env, *args, "plan", "--dry-run", "--json", "--arm", "solo")
    assert outcome.exit_code == 0, outcome.err
    return Path(json.loads(outcome.out)["plans"][0]["episode_dir"])


def test_the_output_root_and_arms_dir_come_from_the_option_then_the_environment_then_the_project(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    write_arm(project, "solo")
    env = {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}
    assert _episode_dir(project, env) == project / "output" / "solo" / "episode_001"
    from_env = {**env, "MCU_ARMS_OUTPUT_DIR": str(tmp_path / "runs")}
    assert _episode_dir(project, from_env) == tmp_path / "runs" / "solo" / "episode_001"
    assert _episode_dir(project, from_env, "--output-dir", "mine") == project / "mine" / "solo" / "episode_001"

    shutil.move(project / "arms", tmp_path / "shared-arms")
    missing = invoke(project, env, "plan", "--dry-run", "--arm", "solo")
    assert missing.exit_code == 2 and "no arm named 'solo'" in missing.err
    assert _episode_dir(project, {**env, "MCU_ARMS_ARMS_DIR": str(tmp_path / "shared-arms")}).name == "episode_001"
    assert _episode_dir(project, env, "--arms-dir", "../shared-arms").name == "episode_001"
