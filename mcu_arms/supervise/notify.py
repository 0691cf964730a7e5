"""`run --notify CMD`: tell the user a long run ended (a shell command of theirs: mail, a chat hook, a desktop note).

The command gets the outcome in its environment: MCU_ARMS_RUN_STATUS (finished | failed | interrupted) and
MCU_ARMS_RUN_SUMMARY (JSON: per episode, its arm, seed, status, score and failure). It is the user's own command;
its failure is reported, never fatal, and it may run for a minute at most.
"""

from __future__ import annotations

import json
import subprocess

from mcu_arms.environment import Environment
from mcu_arms.supervise.outcomes import EXIT_FAILED, EXIT_OK, RunOutcome

NOTIFY_TIMEOUT_S = 60.0


def run_status(outcome: RunOutcome) -> str:
    return {EXIT_OK: "finished", EXIT_FAILED: "failed"}.get(outcome.exit_code, "interrupted")


def run_notify(command: str, outcome: RunOutcome, env: Environment) -> list[str]:
    """Run `command`; returns what went wrong with it (empty: it ran and exited 0)."""
    summary = [
        {
            "arm": arm.arm,
            "seed": arm.seed,
            "episode": arm.episode,
            "attempt": arm.attempt,
            "status": arm.status,
            "score": arm.score,
            "failure": arm.failure.reason if arm.failure else None,
        }
        for arm in outcome.arms
    ]
    variables = {"MCU_ARMS_RUN_STATUS": run_status(outcome), "MCU_ARMS_RUN_SUMMARY": json.dumps(summary)}
    try:
        done = subprocess.run(
            command,
            shell=True,
            env={**env.variables, **variables},
            cwd=env.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=NOTIFY_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return [f"--notify command did not finish within {NOTIFY_TIMEOUT_S:g} s"]
    except OSError as error:
        return [f"--notify command could not run: {error.strerror or error}"]
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return [f"--notify command exited with code {done.returncode}: {tail[0]}"]
    return []
