"""`run --notify CMD` (supervise/notify.py) in the fast tier: the user's command runs in the run's directory with the
outcome in its environment, and its failure is reported, never raised."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli_support import make_environment

from mcu_arms.supervise.notify import run_notify, run_status
from mcu_arms.supervise.outcomes import RunOutcome


def test_the_command_gets_the_status_and_summary_in_its_environment(tmp_path: Path) -> None:
    env, _, _ = make_environment(tmp_path, {"PATH": os.environ["PATH"]})
    command = 'printf "%s\\n%s" "$MCU_ARMS_RUN_STATUS" "$MCU_ARMS_RUN_SUMMARY" > told.txt'
    assert run_notify(command, RunOutcome(arms=[]), env) == []
    status, summary = (tmp_path / "told.txt").read_text().split("\n")
    assert status == "finished" and json.loads(summary) == []


def test_an_interrupted_run_is_told_as_interrupted() -> None:
    assert run_status(RunOutcome(arms=[], interrupted_by="SIGTERM")) == "interrupted"


def test_a_failing_command_is_reported_with_its_code_and_last_line(tmp_path: Path) -> None:
    env, _, _ = make_environment(tmp_path, {"PATH": os.environ["PATH"]})
    problems = run_notify("echo first >&2; echo 'mail: no such host' >&2; exit 3", RunOutcome(arms=[]), env)
    assert problems == ["--notify command exited with code 3: mail: no such host"]
