"""`mcu-arms run CAMPAIGN --until-resolved`: its options refused where they mean nothing, and a real sequential run on
the embedded simulator (scripted vs random) that stops once the difference crosses its boundary, every episode
recording its look."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import invoke
from run_helpers import cli_env, write_arm

from mcu_arms.contracts.run_report import read_report
from mcu_arms.stats.sequential import sequential_experiment
from mcu_arms.supervise.until_resolved import sequential_seeds

CAMPAIGN = """name = "sequential"
max_parallel = 2
retries = 1

[baseline]
arm = "scripted_arm"

[[variants]]
name = "random_arm"
differs_in = ["agent"]
agent = "random"
"""


def _project(tmp_path: Path, steps: int = 150) -> Path:
    project = tmp_path / "project"
    (project / "campaigns").mkdir(parents=True)
    write_arm(project, "scripted_arm", agent="scripted", steps=steps)
    (project / "campaigns" / "sequential.toml").write_text(CAMPAIGN)
    return project


def test_seeds_are_the_campaigns_then_the_integers_after_them() -> None:
    assert sequential_seeds([5, 2, 9], 6) == [5, 2, 9, 10, 11, 12]
    assert sequential_seeds(None, 3) == [0, 1, 2]
    assert sequential_seeds([0, 1, 2, 3], 2) == [0, 1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["campaigns/sequential.toml", "--max-seeds", "8"], "--max-seeds sets how --until-resolved runs"),
        (["campaigns/sequential.toml", "--until-resolved", "--primary", "steps"], "'steps' is not a metric"),
        (["campaigns/sequential.toml", "--until-resolved", "--dry-run"], "decides each batch from the last one"),
        (["arms/scripted_arm.toml", "--until-resolved"], "runs one campaign"),
        (["campaigns/sequential.toml", "--until-resolved", "--seeds", "0-3"], "--until-resolved chooses the seeds"),
        (["arms/scripted_arm.toml", "--detach"], "--detach leaves Slurm jobs running"),
    ],
)
def test_options_that_mean_nothing_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    project = _project(tmp_path)
    done = invoke(project, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, "run", *args)
    assert done.exit_code == 2, done.out + done.err
    assert message in " ".join((done.out + done.err).split())
    assert not (project / "output").exists(), "nothing ran"


@pytest.mark.slow
def test_scripted_against_random_stops_when_resolved_and_every_episode_records_its_look(tmp_path: Path) -> None:
    """Six seeds at most, three a look: look 1 (3 pairs) can spend next to nothing, so it cannot stop; at look 2 the
    whole alpha is allowed and six same-sign pairs (p = 2/64) cross."""
    project = _project(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcu_arms",
            "run",
            "campaigns/sequential.toml",
            "--until-resolved",
            "--max-seeds",
            "6",
            "--batch",
            "3",
            "--json",
        ],
        cwd=project,
        env=cli_env(tmp_path / "state"),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["stopped"] == "resolved" and [look["seeds"] for look in result["looks"]] == [[0, 1, 2], [3, 4, 5]]
    first, last = (look["tests"]["random_arm"] for look in result["looks"])
    assert not first["rejected"] and first["looks"][0]["boundary"] is None
    assert last["rejected"] and last["looks"][-1]["n"] == 6 and last["looks"][-1]["mean_difference"] < 0
    assert "look 2 (6 seeds): random_arm − baseline" in done.stderr

    reports = [read_report(path) for path in sorted((project / "output").glob("*/episode_*/result.json"))]
    finished = [report for report in reports if report.status == "finished"]
    assert {(r.arm, r.settings.seed) for r in finished} == {
        (a, s) for a in ("scripted_arm", "random_arm") for s in range(6)
    }
    assert all(r.sequential is not None and r.sequential.look == (1 if r.settings.seed < 3 else 2) for r in reports)
    experiment = sequential_experiment([r.sequential for r in finished if r.arm == "random_arm"])
    assert experiment is not None and experiment.looks == [3, 6] and experiment.max_seeds == 6
    assert "a fixed-n p-value of these episodes overstates the evidence" in experiment.text
