"""A prolong arm and a worldmodel arm end to end: `python -m mcu_arms run` starts real green, purple and client
processes on the embedded simulator; the purple runs the stand-in codex (tests/fake_codex) inside the arm's own
CODEX_HOME under a root in /var/tmp. Then `mcu-arms compare` reads both runs, purple reports included."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

FAKE_CODEX_DIR = Path(__file__).parent / "fake_codex"
STEPS = 20

ARM = """agent = "{agent}"
task = "mine_diamond_from_scratch"
simulator = "embedded"
seed = 3
steps = {steps}
step_timeout = {step_timeout}
session_turns = {session_turns}
compact = {compact}
save_frames = false

[ports]
green = "auto"
purple = "auto"

[env]
FAKE_CODEX_MODE = "{mode}"
"""


@pytest.fixture
def codex_root():
    root = Path(tempfile.mkdtemp(prefix="mcu-codex-e2e-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _cli(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", *args], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_prolong_and_worldmodel_arms_run_end_to_end_and_compare(tmp_path, codex_root):
    project = tmp_path / "project"
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "cx_pl.toml").write_text(
        ARM.format(agent="prolong", steps=STEPS, session_turns=1, compact="false", step_timeout=6, mode="hang-once")
    )
    (project / "arms" / "cx_wm.toml").write_text(
        ARM.format(agent="worldmodel", steps=STEPS, session_turns=2, compact="false", step_timeout=15, mode="ok")
    )
    auth = codex_root / "credential" / "auth.json"
    auth.parent.mkdir()
    auth.write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-test-not-a-key"}')
    auth.chmod(0o600)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FAKE_CODEX", "CODEX_", "MCU_"))}
    env.pop("OPENAI_API_KEY", None)
    env.update(
        PATH=f"{FAKE_CODEX_DIR}{os.pathsep}{env.get('PATH', '')}",
        MCU_CODEX_ROOT=str(codex_root / "homes"),
        MCU_CODEX_AUTH=str(auth),
        MCU_ARMS_STATE_DIR=str(tmp_path / "state"),
        COLUMNS="200",
    )

    done = _cli(project, env, "run", "--arm", "cx_pl", "--arm", "cx_wm", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert [arm["status"] for arm in outcome["arms"]] == ["finished", "finished"]

    for arm, kind, session_turns in (("cx_pl", "prolong", 1), ("cx_wm", "worldmodel", 2)):
        episode = project / "output" / arm / "episode_001"
        report = json.loads((episode / "purple" / f"{kind}_report.json").read_text())
        assert report["kind"] == kind and report["settings"]["session_turns"] == session_turns
        hung = kind == "prolong"  # its first turn hangs: stopped, a noop, and the arm carries on
        assert report["turns"] >= STEPS // 4 and report["failed_turns"] == int(hung), report
        assert report["compactions"] == 0 and report["overflow_resets"] == 0
        assert report["compaction_limit"] == json.loads((episode / "plan.json").read_text())["compaction"]["limit"]
        assert report["settings"]["codex_version"] == "codex-cli 0.0.0-fake"
        audit = report["settings"]["codex_home_audit"]
        assert audit["auth_is_symlink"] and audit["auth_target"] == str(auth) and audit["stubs_empty"]
        assert audit["private_mode"] and not audit["under_tmp"]
        (episode_report,) = report["episodes"]
        assert episode_report["actions_replayed"] == STEPS - hung
        assert episode_report["noops"] == ({"failed_turn": 1} if hung else {})
        task_dir = Path(episode_report["task_dir"])
        assert task_dir.parent == episode / "purple"
        assert len((task_dir / "logs.txt").read_text().splitlines()) > STEPS
        assert (task_dir / "memory").is_dir() == (kind == "worldmodel")

        run_report = json.loads((episode / "result.json").read_text())
        assert run_report["agent"]["turns"] == report["turns"]
        assert run_report["steps_run"] == STEPS
        purple_log = (episode / "logs" / "purple.log").read_text()
        assert "payload" in purple_log
        if hung:
            assert purple_log.count("wrote no actions.json (rc=124); timed out after") == 1
            grandchild = int((task_dir / "fake_codex_grandchild.pid").read_text())
            assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE
        else:
            assert "wrote no actions.json" not in purple_log

        calls = [
            json.loads(line)
            for line in (codex_root / "homes" / arm / "fake_codex_calls.jsonl").read_text().splitlines()
        ]
        assert len(calls) == report["turns"] and all(call["stdin_is_devnull"] for call in calls)
        resumed = [call["resume"] for call in calls if call["resume"]]
        if session_turns == 1:
            assert resumed == []
        else:
            assert resumed and set(resumed) <= {call["thread_id"] for call in calls}

    compared = _cli(project, env, "compare", "cx_pl", "cx_wm", "--json")
    assert compared.returncode in (0, 1), compared.stdout + compared.stderr
    comparison = json.loads(compared.stdout)
    text = json.dumps(comparison)
    assert "cx_pl" in text and "cx_wm" in text
    arms = {arm["arm"]: arm for arm in comparison["arms"]}
    facts = {name: arm["latest"] for name, arm in arms.items()}  # one episode's counters
    assert facts["cx_wm"]["purple_report"] is True and facts["cx_pl"]["purple_report"] is True
    assert facts["cx_wm"]["failed_turns"] == 0 and facts["cx_wm"]["overflow_resets"] == 0
    assert facts["cx_pl"]["failed_turns"] == 1
