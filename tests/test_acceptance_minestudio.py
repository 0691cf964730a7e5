"""`mcu-arms acceptance minestudio` on the stand-in, as CI runs it: a real subprocess of the CLI on a host whose
java, Xvfb and engine are stand-ins. Every engine check runs; those that hold say "stand-in", never "passed"; the
report is written in a folder of its own; on a host that lacks the engine the import check fails and says what is
missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcu_arms.green.scoring import CRITERIA

pytestmark = pytest.mark.slow


def _acceptance(env: dict[str, str], out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", "acceptance", "minestudio", "--out", str(out), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_on_the_stand_in_every_engine_check_runs_and_none_says_passed(
    minestudio_host: dict[str, Any], tmp_path: Path, model_service: str
) -> None:
    from model_service import FakeModelService

    FakeModelService.answer = json.dumps({"scores": dict.fromkeys(CRITERIA, 5)})
    env = {
        **minestudio_host["env"],
        "HOME": str(tmp_path / "home"),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": model_service,
        "FAKE_MINESTUDIO_SPAWN_ENGINE": "1",
    }
    done = _acceptance(env, tmp_path / "acceptance")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["stand_in"] is True and report["minestudio_version"] == "1.1.6+fake"
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses.pop("import (as the green imports it) and host requirements") == "passed"
    assert statuses.pop("STEVE-1 offline load and same-seed actions") == "skipped"  # no weights, torch or GPU here
    assert set(statuses.values()) == {"stand-in"}, report["checks"]
    assert len(statuses) == 5
    evidence = {check["name"]: "\n".join(check["evidence"]) for check in report["checks"]}
    video = evidence["video at MCU's resolution (RecordCallback 640x360, graded)"]
    assert "41 frames at 640x360" in video and "'source': 'render_recording'" in video and "'width': 640" in video
    assert (
        "engine processes seen: 4; still running after close: none"
        in evidence["a crashed engine is replaced and nothing of it is left running"]
    )
    assert (
        "camera [0, 90] turned yaw by +90.0" in evidence["raw smoke: image shape, info keys, stat names, camera sign"]
    )
    [run_dir] = (tmp_path / "acceptance").iterdir()
    assert json.loads((run_dir / "report.json").read_text())["checks"] == report["checks"]
    assert "STAND-IN" in (run_dir / "report.txt").read_text() and (run_dir / "recording" / "episode_1.mp4").is_file()


def test_a_host_without_the_engine_fails_the_first_check_and_skips_the_rest(tmp_path: Path) -> None:
    fake = Path(__file__).resolve().parent / "fake_minestudio"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": str(fake),
        "MINESTUDIO_DIR": str(tmp_path / "no-engine"),
    }
    done = _acceptance(env, tmp_path / "acceptance")
    assert done.returncode == 1
    first, *rest = json.loads(done.stdout)["checks"]
    assert first["status"] == "failed" and any("mcprec-6.13.jar" in line for line in first["evidence"])
    assert {check["status"] for check in rest} == {"skipped"}
