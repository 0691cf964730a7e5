"""A run that went wrong never reads "finished": infrastructure failures are refused, counted, alerted and fail the
arm; the record survives a full disk; a stop that races a finished evaluation keeps it; Ctrl-C never prints a
traceback. Real processes throughout (the CLI, green, purple and client as subprocesses)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_support import summary_rows
from run_helpers import cli_env, report, run_cli, wait_for, write_arm

from mcu_arms.arms.plan import plan_arms
from mcu_arms.contracts.settings import Overrides
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir

TESTS = Path(__file__).resolve().parent
FAKE_CODEX_DIR = TESTS / "fake_codex"


def _env_without_codex(state: Path) -> dict[str, str]:
    env = cli_env(state)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "codex").exists())
    return env


def _codex_arm(project: Path, name: str, root: Path, auth: Path, *, mode: str = "ok", steps: int = 30) -> Path:
    path = write_arm(project, name, agent="worldmodel", steps=steps, step_timeout=6)
    text = path.read_text().replace('simulator = "embedded"', 'simulator = "embedded"\nsession_turns = 1')
    path.write_text(text + f'\n[codex]\nroot = "{root}"\nauth = "{auth}"\n\n[env]\nFAKE_CODEX_MODE = "{mode}"\n')
    return path


@pytest.fixture
def codex_root():
    root = Path(tempfile.mkdtemp(prefix="mcu-codex-loud-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_a_codex_arm_without_codex_is_refused_before_anything_starts(tmp_path: Path, codex_root: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    auth = tmp_path / "auth.json"
    auth.write_text("{}")
    _codex_arm(project, "nocodex", codex_root, auth)
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--arm", "nocodex"],
        cwd=project,
        env=_env_without_codex(state),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot run these arms; nothing was started" in done.stderr and "codex not on PATH" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / "output").exists() and not (codex_root / "nocodex").exists()
    shown = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "plan", "--dry-run", "--json", "--arm", "nocodex"],
        cwd=project,
        env=_env_without_codex(state),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert any("codex not on PATH" in problem for problem in json.loads(shown.stdout)["plans"][0]["blocked"])


@pytest.mark.slow
def test_a_codex_arm_whose_every_turn_fails_is_failed_loudly_and_compare_says_not_trustworthy(
    tmp_path: Path, codex_root: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    auth = tmp_path / "auth.json"
    auth.write_text("{}")
    _codex_arm(project, "allfail", codex_root, auth, mode="fail", steps=40)
    env = cli_env(state)
    env["PATH"] = f"{FAKE_CODEX_DIR}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--arm", "allfail"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    data = report(project, "allfail")
    assert data["status"] == "failed" and data["failure"]["reason"].startswith("infrastructure:")
    in_a_row = re.search(r"(\d+) infrastructure noops in a row", data["failure"]["reason"])
    assert in_a_row and int(in_a_row.group(1)) >= 20, data["failure"]  # stopped as soon as the supervisor saw it
    assert data["infrastructure"]["failed_turn"] >= 20
    assert data["agent"]["failed_turns"] >= 20 and data["agent"]["kind"] == "worldmodel"
    assert "ALERT" in done.stdout and "infrastructure" in done.stdout
    said = 'the agent said: {}x "codex failed: stream error: unexpected status 500 Internal Server Error"'
    assert said.format(data["agent"]["failed_turns"]) in done.stdout, "the model's own reason in the final table"
    status = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "status", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert said.format(data["agent"]["failed_turns"]) in json.loads(status.stdout)["arms"][0]["failure"]
    compared = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "compare", "allfail", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compared.returncode == 3, compared.stdout + compared.stderr
    verdict = json.loads(compared.stdout)["verdict"]
    assert not verdict["trustworthy"] and "allfail failed for infrastructure reasons" in verdict["text"]
    again = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--dry-run", "--arm", "allfail"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert summary_rows(again.stdout)["allfail"][0] == "retry", again.stdout


def _stand_ins(plan, **argvs: list[str]):
    return plan.model_copy(
        update={"processes": [p.model_copy(update={"argv": argvs.get(p.role, p.argv)}) for p in plan.processes]}
    )


def _run_plans(tmp_path: Path, project: Path, plans: list):
    import io

    from rich.console import Console

    from mcu_arms.supervise.executors import run_arms
    from mcu_arms.supervise.runner import RunOptions

    out = io.StringIO()
    env = Environment(
        console=Console(file=out, width=200),
        err_console=Console(file=io.StringIO()),
        variables={**os.environ, "MCU_ARMS_STATE_DIR": str(tmp_path / "state")},
        cwd=project,
    )
    outcome = run_arms(plans, env, RunOptions(stop_grace_s=2), env.console)
    return outcome, [json.loads(RunDir(Path(plan.episode_dir)).report.read_text()) for plan in plans], out.getvalue()


def _plan(tmp_path: Path, name: str, **arm):
    project = tmp_path / "project"
    write_arm(project, name, **arm)
    env = Environment(variables={"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, cwd=project)
    return plan_arms([project / "arms" / f"{name}.toml"], Overrides(), env)[0], project


@pytest.mark.slow
def test_an_init_refused_fails_the_arm_and_the_rerun_retries_it(tmp_path: Path) -> None:
    plan, project = _plan(tmp_path, "refused", steps=200)
    purple = [sys.executable, str(TESTS / "stand_in_purple.py"), "--port", str(plan.purple_port), "--refuse-init"]
    outcome, reports, printed = _run_plans(tmp_path, project, [_stand_ins(plan, purple=purple)])
    data = reports[0]
    assert outcome.exit_code == 1 and data["status"] == "failed", printed
    assert "init failed (refused: refusing on purpose)" in data["failure"]["reason"]
    assert data["failure"]["reason"].startswith("infrastructure:")
    again = run_cli(project, tmp_path / "state", "run", "--dry-run", "--arm", "refused")
    will, why = summary_rows(again.stdout)["refused"]
    assert will == "retry" and "ended failed" in why, again.stdout


@pytest.mark.slow
def test_a_reply_that_crashes_the_parser_is_a_counted_transport_noop_and_the_task_goes_on(tmp_path: Path) -> None:
    plan, project = _plan(tmp_path, "nested", steps=40)
    purple = [sys.executable, str(TESTS / "stand_in_purple.py"), "--port", str(plan.purple_port), "--nest-step", "3"]
    outcome, reports, printed = _run_plans(tmp_path, project, [_stand_ins(plan, purple=purple)])
    data = reports[0]
    assert data["status"] == "finished", printed
    assert data["steps_run"] == 40 and data["score"] is not None, "the task was scored to its end"
    assert data["infrastructure"] == {"transport_error": 1}
    evaluation = json.loads((RunDir(Path(plan.episode_dir)).path / data["evaluation_file"]).read_text())
    metrics = evaluation["results"][0]["task_metrics"]["mine_diamond_from_scratch"]
    assert "RecursionError" in metrics["noops"]["transport_error"]["first_reasons"][0]


@pytest.mark.slow
def test_a_stop_that_races_a_complete_evaluation_keeps_it_finished(tmp_path: Path) -> None:
    """The client has the evaluation on disk when the stop arrives: the arm is `finished`, not `interrupted`."""
    plan, project = _plan(tmp_path, "raced", steps=5)
    finished_run = _plan(tmp_path / "donor", "donor", steps=5)  # a real evaluation to copy, from a real run
    donor_plan, donor_project = finished_run
    _, donor_reports, _ = _run_plans(tmp_path / "donor", donor_project, [donor_plan])
    evaluation = RunDir(Path(donor_plan.episode_dir)).path / donor_reports[0]["evaluation_file"]
    target = RunDir(Path(plan.episode_dir)).evaluation
    writes_then_waits = (
        f"import pathlib, shutil, sys; t = pathlib.Path({str(target)!r}); t.parent.mkdir(parents=True, exist_ok=True); "
        f"shutil.copy({str(evaluation)!r}, t); sys.stdin.read()"
    )
    stop = RunDir(Path(plan.episode_dir)).stop_request

    import threading

    def stop_once_written() -> None:
        wait_for(target.exists, "the evaluation on disk", timeout=120)
        stop.write_text(json.dumps({"requested_by": "the race test"}))

    racer = threading.Thread(target=stop_once_written, daemon=True)
    racer.start()
    outcome, reports, printed = _run_plans(
        tmp_path, project, [_stand_ins(plan, client=[sys.executable, "-c", writes_then_waits])]
    )
    racer.join(timeout=10)
    assert reports[0]["status"] == "finished", printed
    assert reports[0]["evaluation_file"] == "green/evaluation.json" and outcome.exit_code == 0


@pytest.mark.slow
def test_a_full_disk_fails_the_arm_with_its_record_kept_and_no_torn_line(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs for output/")
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "full", steps=3000)
    arm = project / "arms" / "full.toml"
    arm.write_text(arm.read_text().replace("save_frames = false", "save_frames = true"))
    output = project / "output"
    output.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1500k", "tmpfs", str(output)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        done = run_cli(project, state, "run", "--arm", "full", timeout=300)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        kept = report(project, "full") or json.loads(next((state / "lost-reports").glob("full-*.json")).read_text())
        assert kept["status"] == "failed", kept
        assert "No space left on device" in json.dumps(kept), kept["failure"]
        assert not [p for p in output.rglob("*") if p.name.endswith(".tmp")], "a temporary file was left"
        for steps in output.rglob("steps.jsonl"):
            data = steps.read_bytes()
            assert not data or data.endswith(b"\n"), f"{steps} ends in a torn line"
            for line in data.splitlines():
                json.loads(line)
    finally:
        subprocess.run(["umount", str(output)], check=False)


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.3, 0.8, 2.0])
def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(tmp_path: Path, delay_s: float) -> None:
    """From the moment mcu-arms' own code runs (the interpreter's first few tens of milliseconds are Python's):
    while the CLI imports, while it plans, while the arm starts and while it runs."""
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "interrupted", steps=2000)
    running = subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", "run", "--arm", "interrupted"],
        cwd=project,
        env=cli_env(state),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        running.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=120)
    assert running.returncode == 130, out + err
    assert "Traceback" not in out + err
