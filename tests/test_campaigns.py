"""Replicates and campaigns: seeds as the replicate axis, campaign files that are checked before anything starts, a
real campaign on the embedded simulator (two agents x three seeds, two at a time, one infrastructure failure
retried), rerun as a no-op, and `compare` with intervals, k/n, the verdict at n, figures and the tidy export."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from cli_support import invoke, summary_rows
from run_helpers import cli_env, wait_for, write_arm

from mcu_arms.arms.campaign import load_campaign
from mcu_arms.arms.plan import plan_arms
from mcu_arms.cli.options import parse_seeds
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import Overrides
from mcu_arms.environment import Environment

CAMPAIGN = """name = "agents"
seeds = [0, 1, 2]
max_parallel = 2
retries = 1

[baseline]
arm = "scripted_arm"

[[variants]]
name = "random_arm"
differs_in = ["agent"]
agent = "random"
"""


def _project(tmp_path: Path, steps: int = 250) -> Path:
    project = tmp_path / "project"
    (project / "arms").mkdir(parents=True)
    (project / "campaigns").mkdir()
    write_arm(project, "scripted_arm", agent="scripted", steps=steps)
    (project / "campaigns" / "agents.toml").write_text(CAMPAIGN)
    return project


def test_seeds_parse_from_ranges_and_lists() -> None:
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4] and parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(UserError, match="not a list of seeds"):
        parse_seeds("3-1")


def test_an_arm_with_seeds_plans_one_episode_per_seed_with_one_fingerprint(tmp_path: Path) -> None:
    project = _project(tmp_path)
    arm = project / "arms" / "scripted_arm.toml"
    arm.write_text("replicates = 3\n" + arm.read_text())  # overridden by --seeds below
    env = Environment(variables={"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, cwd=project)
    plans = plan_arms([arm], Overrides(seeds=[4, 5, 6]), env)
    assert [plan.settings.seed for plan in plans] == [4, 5, 6]
    assert [plan.episode for plan in plans] == [1, 2, 3] and len({plan.fingerprint for plan in plans}) == 1
    assert [plan.label for plan in plans] == ["scripted_arm s4", "scripted_arm s5", "scripted_arm s6"]
    assert len({(plan.green_port, plan.purple_port) for plan in plans}) == 3


def test_a_campaign_names_its_arms_and_the_seeds_every_one_runs(tmp_path: Path) -> None:
    project = _project(tmp_path)
    campaign = load_campaign(project / "campaigns" / "agents.toml", project / "arms")
    assert campaign.arm_names() == ["scripted_arm", "random_arm"] and campaign.seeds == [0, 1, 2]
    assert campaign.variants[0].spec.agent == "random" and campaign.variants[0].spec.steps == 250
    shown = invoke(
        project, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, "plan", "--dry-run", "--json", "campaigns/agents.toml"
    )
    assert shown.exit_code == 0, shown.err
    episodes = [(p["arm"], p["settings"]["seed"]) for p in json.loads(shown.out)["plans"]]
    assert episodes == [("scripted_arm", s) for s in (0, 1, 2)] + [("random_arm", s) for s in (0, 1, 2)]


def test_a_campaign_over_arms_that_name_their_seed_takes_the_cli_overrides(tmp_path: Path) -> None:
    project = _project(tmp_path)
    arm = project / "arms" / "scripted_arm.toml"
    arm.write_text(arm.read_text().replace("seed = 0", "seed = 7"))  # the campaign's seeds replace it
    shown = invoke(
        project,
        {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")},
        "plan",
        "--dry-run",
        "--json",
        "campaigns/agents.toml",
        "--steps",
        "40",
    )
    assert shown.exit_code == 0, shown.err
    plans = json.loads(shown.out)["plans"]
    assert [(p["settings"]["seed"], p["settings"]["steps"]) for p in plans] == [(s, 40) for s in (0, 1, 2)] * 2


@pytest.mark.parametrize(
    ("variant", "message", "line"),
    [
        ('differs_in = ["agent"]\nagent = "random"\nstep_timeout = 30', "differ in agent, step_timeout", 11),
        ('differs_in = ["seed"]\nagent = "scripted"', "differ in nothing", 11),
        ('agent = "random"', "differs_in", 9),
        ('differs_in = ["agent"]\nagent = "wizard"', "'wizard' is not allowed", 12),
    ],
)
def test_a_variant_must_differ_in_exactly_what_it_claims(tmp_path: Path, variant: str, message: str, line: int) -> None:
    project = _project(tmp_path)
    path = project / "campaigns" / "agents.toml"
    path.write_text(CAMPAIGN.split("[[variants]]")[0] + f'[[variants]]\nname = "other"\n{variant}\n')
    with pytest.raises(UserError) as raised:
        load_campaign(path, project / "arms")
    assert message in raised.value.render() and f"agents.toml:{line}" in raised.value.render(), raised.value.render()


def _recorded(project: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((project / "output").glob("*/episode_*/result.json"))]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # six real episodes, a retry, a rerun and five compares: past 600 s on a loaded 2-core host
def test_a_campaign_runs_two_at_a_time_retries_an_infrastructure_failure_and_reruns_as_a_no_op(tmp_path: Path) -> None:
    project = _project(tmp_path)
    state = tmp_path / "state"
    started = time.monotonic()
    running = subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", "run", "campaigns/agents.toml"],
        cwd=project,
        env=cli_env(state),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def a_running_green() -> dict | None:
            live = [r for r in _recorded(project) if r["status"] == "started" and "client" in r["processes"]]
            return live[0] if live else None

        victim = wait_for(a_running_green, "an episode to run", timeout=180)
        green = victim["processes"]["green"]
        process = psutil.Process(green["pid"])
        assert abs(process.create_time() - green["create_time"]) < 0.01, "the recorded green is the one we started"
        process.send_signal(signal.SIGKILL)  # an infrastructure failure: the evaluator dies mid-episode

        def campaign_with_a_pace() -> dict | None:
            """status --campaign while the campaign runs: once an episode has ended, the ones still queued and an
            ETA."""
            shown = invoke(
                project, {"MCU_ARMS_STATE_DIR": str(state)}, "status", "--campaign", "campaigns/agents.toml", "--json"
            )
            (campaign,) = json.loads(shown.out)["campaigns"]
            tally = campaign["tally"]
            return campaign if tally["ended"] >= 1 and tally["queued"] >= 1 else None

        during = wait_for(campaign_with_a_pace, "an episode to end while others are queued", timeout=180)
        assert len(during["cells"]) == 6 and during["supervisor_alive"]
        states = [cell["state"] for cell in during["cells"]]
        assert "queued" in states and states.count("running") <= 2, states
        text = invoke(project, {"MCU_ARMS_STATE_DIR": str(state)}, "status", "--campaign", "campaigns/agents.toml").out
        assert " of 6 done" in text and "queued" in text and "ETA" in text, text
        out, _ = running.communicate(timeout=600)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 0, out
    assert "6 of 6 done, 0 running, 0 queued, 0 failed, 1 retried" in out, "the live view's summary, last at the end"
    reports = _recorded(project)
    failed = [r for r in reports if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["failure"]["process"] == "green"
    assert failed[0]["failure"]["kind"] == "infrastructure"
    retry = [
        r
        for r in reports
        if r["arm"] == failed[0]["arm"] and r["settings"]["seed"] == failed[0]["settings"]["seed"] and r["attempt"] == 2
    ]
    assert len(retry) == 1 and retry[0]["status"] == "finished", "the failed episode was retried and finished"
    finished = {(r["arm"], r["settings"]["seed"]) for r in reports if r["status"] == "finished"}
    assert finished == {(arm, seed) for arm in ("scripted_arm", "random_arm") for seed in (0, 1, 2)}
    windows = sorted((r["started_at"], r["finished_at"]) for r in reports)
    most_at_once = max(sum(1 for s, f in windows if s <= moment < f) for moment, _ in windows)
    assert most_at_once <= 2, "--max-parallel 2 (the campaign's) was exceeded"
    wall = time.monotonic() - started

    again = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "campaigns/agents.toml", "--json"],
        cwd=project,
        env=cli_env(state),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert [arm["status"] for arm in json.loads(again.stdout)["arms"]] == ["skipped"] * 6
    assert len(_recorded(project)) == len(reports), "the rerun ran nothing"
    dry = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--dry-run", "campaigns/agents.toml"],
        cwd=project,
        env=cli_env(state),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert [will for will, _ in summary_rows(dry.stdout).values()] == ["skip"] * 6, dry.stdout

    compared = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcu_arms",
            "compare",
            "campaigns/agents.toml",
            "--plot",
            "plots/agents.png",
            "--export",
            "export",
        ],
        cwd=project,
        env=cli_env(state),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compared.returncode == 0, compared.stdout + compared.stderr
    text = compared.stdout
    assert "comparable: differs only in agent" in text
    assert "n = 3 (seeds 0, 1, 2)" in text and "(n = 3)" in text, "intervals over the replicates"
    assert "score: random_arm − scripted_arm = " in text and "(paired, n = 3)" in text, "paired by seed: embedded"
    assert "/3 · " in text, "milestones as k/n with their Kaplan–Meier median steps"
    assert "Holm" in text and "steps (Kaplan–Meier median)" in text and "log-rank" in text
    for suffix, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<?xml")):
        drawn = subprocess.run(
            [
                sys.executable,
                "-m",
                "mcu_arms",
                "compare",
                "campaigns/agents.toml",
                "--plot",
                f"plots/agents.{suffix}",
                "--json",
            ],
            cwd=project,
            env=cli_env(state),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert drawn.returncode == 0, drawn.stderr
        assert (project / "plots" / f"agents.{suffix}").read_bytes().startswith(magic), suffix
    with (project / "export" / "tidy.csv").open() as handle:
        tidy = list(csv.DictReader(handle))
    scores = [row for row in tidy if row["metric"] == "score"]
    assert {(row["arm"], int(row["seed"])) for row in scores} == finished
    import pandas as pd

    from mcu_arms.results import steps
    from mcu_arms.results import tidy as load_tidy

    frame = load_tidy(["campaigns/agents.toml"], project=project)
    assert set(frame.arm) == {"scripted_arm", "random_arm"} and len(frame[frame.metric == "score"]) == 6
    assert pd.read_parquet(project / "export" / "tidy.parquet").shape == frame.shape
    per_step = steps(["campaigns/agents.toml"], project=project)
    assert len(per_step) == 6 * 250 and {"agent_ms", "health", "noop_cause"} <= set(per_step.columns)
    exported = (project / "export" / "tidy.csv").read_bytes()
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcu_arms",
            "compare",
            "campaigns/agents.toml",
            "--plot",
            "plots/again.png",
            "--export",
            "export",
        ],
        cwd=project,
        env=cli_env(state),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "never written over" in refused.stderr, refused.stderr
    assert (project / "export" / "tidy.csv").read_bytes() == exported and not (project / "plots" / "again.png").exists()
    status = invoke(
        project, {"MCU_ARMS_STATE_DIR": str(state)}, "status", "--campaign", "campaigns/agents.toml", "--json"
    )
    (campaign,) = json.loads(status.out)["campaigns"]
    latest = {(cell["arm"], cell["seed"]): cell["state"] for cell in campaign["cells"]}
    assert latest == {episode: "done" for episode in finished}, "each seed's latest episode, the retried one too"
    assert campaign["tally"]["done"] == campaign["tally"]["total"] == 6
    print(f"campaign of 6 episodes with one retry: {wall:.1f} s")


def test_status_and_compare_take_a_campaign_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    shown = invoke(project, {}, "compare", "campaigns/agents.toml", "--json")
    assert shown.exit_code == 1, "no arm has a finished episode: never 0"
    arms = json.loads(shown.out)["arms"]
    assert [arm["arm"] for arm in arms] == ["scripted_arm", "random_arm"] and {a["status"] for a in arms} == {"no run"}
    assert json.loads(shown.out)["baseline"] == "scripted_arm"
