"""Nothing on disk in `output/` can aim a signal or a command: `stop`, `status` and `run-episode` act only on what the
private record of what we started names (private_record.py), and only on what still carries its evidence.

Every case runs real processes; each bystander (a process the test started, named in a forged or stale report)
is asserted alive and untouched afterwards. The pid-1 case runs only inside a PID namespace the test makes."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from cli_support import invoke
from run_helpers import Started, cli_env, report, run_cli, running_with_steps, wait_for, write_arm

from mcu_arms.arms.plan import plan_arms
from mcu_arms.arms.prepare import prepare_episode
from mcu_arms.contracts.run_report import ProcessRecord, read_report
from mcu_arms.contracts.settings import Overrides
from mcu_arms.contracts.started import EPISODE_PLANS_ENV, EPISODE_TOKENS_ENV, StartedProcess, token_hash
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir
from mcu_arms.process.private_record import episode_record, forget_started, record_started, recorded_episodes
from mcu_arms.process.procs import OWNER_TOKEN_ENV, signal_refused
from mcu_arms.supervise.runner import new_report
from mcu_arms.supervise.slurm import episode_tokens

NOT_OURS = "names processes this project did not start"


@pytest.fixture
def bystander():
    """A `sleep` this test started and nothing in mcu-arms did: whatever a report says, nothing may signal it."""
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield process
    process.kill()
    process.wait(timeout=10)


def _environment(project: Path, env: dict[str, str]) -> Environment:
    return Environment(variables=env, cwd=project)


def _episode(project: Path, env: dict[str, str], arm: str, *, status: str = "started", **processes: ProcessRecord):
    """An episode of `arm` with a report in `status` naming `processes` (nothing started by mcu-arms)."""
    source = write_arm(project, arm, steps=20)
    environment = _environment(project, env)
    plan = prepare_episode(plan_arms([source], Overrides(), environment)[0])
    report = new_report(plan, environment, status=status, attempt=1)
    report.processes.update(processes)
    run_dir = RunDir(Path(plan.episode_dir))
    run_dir.write_report(report)
    return plan, run_dir


def _named(process: subprocess.Popen, role: str) -> ProcessRecord:
    """`process` under `role`, with its real create time: as a stale or forged report would name it."""
    return ProcessRecord(role=role, pid=process.pid, create_time=psutil.Process(process.pid).create_time(), log="x")


@contextmanager
def _recorded_green(env: dict[str, str], episode: int, run_dir: RunDir) -> Iterator[subprocess.Popen]:
    """A process of the test's own, holding an owner token and kept in the private record as arm g's green; killed
    at the end whatever the test did."""
    token = "f" * 32
    ours = subprocess.Popen(["sleep", "600"], env={**os.environ, OWNER_TOKEN_ENV: token}, start_new_session=True)
    try:
        started = StartedProcess(
            role="green", pid=ours.pid, create_time=psutil.Process(ours.pid).create_time(), token_hash=token_hash(token)
        )
        record_started(env, run_dir.path, "g", episode, started)
        yield ours
    finally:
        ours.kill()
        ours.wait(timeout=10)


def _untouched(process: subprocess.Popen) -> None:
    assert process.poll() is None, "a bystander named in a report was signalled"
    assert psutil.Process(process.pid).status() != psutil.STATUS_STOPPED


def test_a_stale_report_naming_a_bystander_in_every_role_gets_nothing_signalled(
    tmp_path: Path, env: dict, bystander
) -> None:
    project = tmp_path / "project"
    roles = {role: _named(bystander, role) for role in ("mcu-arms", "green", "purple", "client")}
    _, run_dir = _episode(project, env, "g", **roles)

    shown = json.loads(invoke(project, env, "status", "--json", "--arm", "g").out)["arms"][0]
    assert shown["state"] == "stale (supervisor gone)", "a live pid in a report is not our supervisor"
    assert all(not process["alive"] for process in shown["processes"]) and shown["live_elsewhere"] == []

    stopped = invoke(project, env, "stop", "--arm", "g", "--grace", "1")
    assert stopped.exit_code == 0, stopped.out + stopped.err
    assert NOT_OURS in stopped.out and f"green pid {bystander.pid}" in stopped.out
    assert "sent SIGTERM" not in stopped.out
    _untouched(bystander)
    assert "not ours to stop: this run's record is in another state directory" in stopped.out
    assert read_report(run_dir.report).status == "started", "without our private record, no verdict is written"


@pytest.mark.parametrize("pid", [-1, 0])
def test_a_report_with_a_pid_at_or_below_zero_is_one_line_naming_the_file(
    tmp_path: Path, env: dict, pid: int, bystander
) -> None:
    project = tmp_path / "project"
    _, run_dir = _episode(project, env, "g", green=_named(bystander, "green"))
    data = json.loads(run_dir.report.read_text())
    data["processes"]["green"]["pid"] = pid
    run_dir.report.write_text(json.dumps(data))

    shown = invoke(project, env, "status", "--json", "--arm", "g")
    assert shown.exit_code == 0 and "Traceback" not in shown.out + shown.err
    state = json.loads(shown.out)["arms"][0]
    assert state["state"] == "unreadable report"
    assert str(run_dir.report) in state["failure"] and "processes.green.pid" in state["failure"]

    stopped = invoke(project, env, "stop", "--arm", "g")
    assert stopped.exit_code == 0 and "Traceback" not in stopped.out + stopped.err
    assert str(run_dir.report) in stopped.out and "found through the private record" in stopped.out
    _untouched(bystander)


def test_stop_on_a_corrupt_report_says_so_and_still_stops_what_the_private_record_names(
    tmp_path: Path, env: dict, bystander
) -> None:
    """The private record, not the report, says what runs: a report torn up still leaves its processes findable."""
    project = tmp_path / "project"
    plan, run_dir = _episode(project, env, "g")
    with _recorded_green(env, plan.episode, run_dir) as ours:
        run_dir.report.write_text("{ torn")
        stopped = invoke(project, env, "stop", "--arm", "g", "--grace", "5")
        assert stopped.exit_code == 0, stopped.out + stopped.err
        assert "not a readable run report" in stopped.out and str(run_dir.report) in stopped.out
        assert "episode_001 green" in stopped.out
        assert ours.wait(timeout=10) == -signal.SIGTERM
        _untouched(bystander)
        assert episode_record(env, run_dir.path) is None, "what was stopped leaves the record"


def test_stop_on_a_read_only_state_dir_stops_all_the_same_and_says_the_record_was_not_updated(
    tmp_path: Path, env: dict, bystander, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a bare OSError traceback from dropping what was stopped from the record (a full or read-only state dir)."""
    project = tmp_path / "project"
    plan, run_dir = _episode(project, env, "g")

    def read_only(*_: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("mcu_arms.supervise.stop.forget_started", read_only)
    with _recorded_green(env, plan.episode, run_dir) as ours:
        stopped = invoke(project, env, "stop", "--arm", "g", "--grace", "5")
        shown = " ".join((stopped.out + stopped.err).split())
        assert stopped.exit_code == 0 and "Traceback" not in shown, shown
        assert "episode_001 green" in shown and ours.wait(timeout=10) == -signal.SIGTERM
        assert "the private record could not be updated" in shown and "Read-only file system" in shown
        _untouched(bystander)


def test_a_record_is_acted_on_only_while_the_process_still_carries_its_token(
    tmp_path: Path, env: dict, bystander
) -> None:
    """A pid recorded once and now someone else's (or a record edited to name another pid): no token, no signal."""
    project = tmp_path / "project"
    plan, run_dir = _episode(project, env, "g")
    record_started(
        env,
        run_dir.path,
        "g",
        plan.episode,
        StartedProcess(
            role="green",
            pid=bystander.pid,
            create_time=psutil.Process(bystander.pid).create_time(),
            token_hash=token_hash("a token the bystander does not hold"),
        ),
    )
    shown = json.loads(invoke(project, env, "status", "--json", "--arm", "g").out)["arms"][0]
    assert shown["live_elsewhere"] == []
    stopped = invoke(project, env, "stop", "--arm", "g", "--grace", "1")
    assert stopped.exit_code == 0, stopped.out + stopped.err
    _untouched(bystander)


def test_the_private_record_is_private_and_never_read_through_a_link(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"MCU_ARMS_STATE_DIR": str(state)}
    record_started(env, tmp_path / "ep", "g", 1, StartedProcess(role="green", pid=os.getpid(), create_time=1.0))
    records = state / "started"
    assert (records.stat().st_mode & 0o777) == 0o700
    assert all((path.stat().st_mode & 0o777) == 0o600 for path in records.iterdir())
    assert [record.arm for record in recorded_episodes(env)] == ["g"]
    forget_started(env, tmp_path / "ep", ["green"])
    assert list(records.iterdir()) == [], "the file goes with its last entry"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    shutil.rmtree(records)
    records.symlink_to(elsewhere)
    from mcu_arms.contracts.errors import UserError

    with pytest.raises(UserError, match="is a link or not a directory; it is never followed"):
        record_started(env, tmp_path / "ep", "g", 1, StartedProcess(role="green", pid=os.getpid(), create_time=1.0))
    assert list(elsewhere.iterdir()) == []
    records.unlink()
    records.mkdir(mode=0o777)
    os.chmod(records, 0o777)
    with pytest.raises(UserError, match="others can write it"):
        recorded_episodes(env)


def test_pid_1_this_process_and_its_ancestors_are_never_signalled() -> None:
    assert signal_refused(1) and signal_refused(0) and signal_refused(-1)
    assert signal_refused(os.getpid()) and signal_refused(os.getppid())
    child = subprocess.Popen(["sleep", "600"])
    try:
        assert signal_refused(child.pid) is None
    finally:
        child.kill()
        child.wait(timeout=10)


PID_ONE = """
import json, os, signal, subprocess, sys
from pathlib import Path
import psutil
from mcu_arms.contracts.started import StartedProcess, token_hash
from mcu_arms.process.private_record import record_started
from mcu_arms.contracts.run_report import read_report

assert os.getpid() == 1, "not the first process of its own PID namespace"
received = []
signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
project, state, run_dir = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
me = psutil.Process()
# The report AND the private record name pid 1, with its real create time and the owner token it holds: only the
# rule itself (never pid <= 1, never an ancestor) stands between `stop` and init.
report = json.loads((run_dir / "result.json").read_text())
for role in ("mcu-arms", "green"):
    report["processes"][role] = {"role": role, "pid": 1, "create_time": me.create_time(), "log": "x"}
(run_dir / "result.json").write_text(json.dumps(report))
env = {"MCU_ARMS_STATE_DIR": str(state)}
record_started(env, run_dir, "g", 1, StartedProcess(role="mcu-arms", pid=2, create_time=me.create_time()))
data = (state / "started")
for path in data.iterdir():
    record = json.loads(path.read_text())
    record["processes"] = {
        "mcu-arms": {"role": "mcu-arms", "pid": 1, "create_time": me.create_time()},
        "green": {"role": "green", "pid": 1, "create_time": me.create_time(),
                  "token_hash": token_hash(os.environ["MCU_ARMS_OWNER_TOKEN"])},
    }
    path.write_text(json.dumps(record))
done = subprocess.run([sys.executable, "-m", "mcu_arms", "stop", "--arm", "g", "--grace", "1"], cwd=project,
                      env={**os.environ, **env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=120)
print(json.dumps({"code": done.returncode, "out": done.stdout + done.stderr, "received": received}))
"""


def test_a_record_naming_pid_1_gets_it_no_signal_inside_a_pid_namespace_of_our_own(tmp_path: Path, env: dict) -> None:
    """Only inside a PID namespace this test makes, where pid 1 is the test's own process: never the host's."""
    if os.geteuid() != 0:
        pytest.skip("a PID namespace needs root here (unshare --pid); the host's pid 1 is never used instead")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: no PID namespace can be made")
    project = tmp_path / "project"
    _, run_dir = _episode(project, env, "g")
    state = Path(env["MCU_ARMS_STATE_DIR"])
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            "-c",
            PID_ONE,
            str(project),
            str(state),
            str(run_dir.path),
        ],
        env={**os.environ, OWNER_TOKEN_ENV: "e" * 32},
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0 and "unshare failed" in done.stderr:
        pytest.skip(f"this host refuses a PID namespace: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["received"] == [], "pid 1 was signalled"
    assert seen["code"] == 0, seen["out"]
    assert "sent SIGTERM" not in seen["out"] and "Traceback" not in seen["out"]


# run-episode --------------------------------------------------------------------------------------------------------


def _tree_hash(path: Path) -> dict[str, str]:
    return {
        str(file.relative_to(path)): hashlib.sha256(file.read_bytes()).hexdigest()
        for file in sorted(path.rglob("*"))
        if file.is_file()
    }


def _queued(project: Path, env: dict, arm: str) -> tuple[RunDir, dict[str, str]]:
    """A queued episode as `run` submits it (the job token in its environment, the hash in the episode and the
    private record)."""
    plan, run_dir = _episode(project, env, arm, status="queued")
    return run_dir, episode_tokens([plan], _environment(project, env))


def _run_episode(project: Path, env: dict, tokens: dict[str, str], path: Path):
    return invoke(project, {**env, **tokens}, "run-episode", str(path))


def test_run_episode_refuses_a_copy_a_link_a_forged_command_and_another_episodes_plan(
    tmp_path: Path, env: dict
) -> None:
    project = tmp_path / "project"
    marker = tmp_path / "MARKER"
    original, tokens = _queued(project, env, "a")
    before = _tree_hash(original.path)
    record_before = episode_record(env, original.path)

    copy = original.path.parent / "episode_051"
    shutil.copytree(original.path, copy)
    refused = _run_episode(project, env, tokens, copy)
    assert refused.exit_code == 2 and "its plan is the plan of another episode" in refused.err, refused.err
    copied_tokens = {
        EPISODE_TOKENS_ENV: json.dumps({str(copy): json.loads(tokens[EPISODE_TOKENS_ENV])[str(original.path)]})
    }
    plan = json.loads((copy / "plan.json").read_text())
    (copy / "plan.json").write_text(json.dumps(plan).replace(str(original.path), str(copy)))
    refused = _run_episode(project, env, copied_tokens, copy)
    assert refused.exit_code == 2 and "submitted as another episode" in refused.err, refused.err

    link = tmp_path / "link"
    link.symlink_to(original.path)
    refused = _run_episode(project, env, tokens, link)
    assert refused.exit_code == 2 and "is a symbolic link" in refused.err, refused.err

    second, second_tokens = _queued(project, env, "b")
    plan = json.loads(second.plan.read_text())
    good_plan = second.plan.read_text()
    plan["processes"][0]["argv"] = ["/bin/sh", "-c", f"touch {marker}"]
    second.plan.write_text(json.dumps(plan))
    refused = _run_episode(project, env, second_tokens, second.path)
    assert refused.exit_code == 2 and f"processes.{plan['processes'][0]['role']}.argv" in refused.err, refused.err

    plan = json.loads(good_plan)
    plan["processes"] = [process for process in plan["processes"] if process["role"] != "client"]
    plan["processes"][0]["argv"] = [arg for arg in plan["processes"][0]["argv"] if arg != "--port"]
    second.plan.write_text(json.dumps(plan))
    refused = _run_episode(project, env, second_tokens, second.path)
    assert refused.exit_code == 2 and "Traceback" not in refused.err, refused.err

    plan = json.loads(good_plan)
    plan["settings"]["steps"] = "many"
    second.plan.write_text(json.dumps(plan))
    refused = _run_episode(project, env, second_tokens, second.path)
    assert refused.exit_code == 2 and "settings.steps" in refused.err, refused.err

    plan = json.loads(good_plan)  # what no other check reads: the purple's environment and working directory
    purple = next(process for process in plan["processes"] if process["role"] == "purple")
    purple["env"]["LD_PRELOAD"] = str(marker)
    purple["cwd"] = str(tmp_path)
    second.plan.write_text(json.dumps(plan))
    refused = _run_episode(project, env, second_tokens, second.path)
    assert refused.exit_code == 2 and "plan.json is not the plan `mcu-arms run` submitted" in refused.err, refused.err
    second.plan.write_text(good_plan)
    no_digest = {key: value for key, value in second_tokens.items() if key != EPISODE_PLANS_ENV}
    refused = _run_episode(project, env, no_digest, second.path)
    assert refused.exit_code == 2 and "no plan digest for this episode" in refused.err, refused.err

    shutil.copy(original.plan, second.plan)  # the plan of another episode
    refused = _run_episode(project, env, second_tokens, second.path)
    assert refused.exit_code == 2 and "its plan is the plan of another episode" in refused.err, refused.err

    refused = _run_episode(project, env, {}, original.path)  # not the job it was given to: no token
    assert refused.exit_code == 2 and "no job token for this episode" in refused.err, refused.err

    assert not marker.exists(), "a command line from plan.json was executed"
    assert _tree_hash(original.path) == before, "the original episode changed"
    assert episode_record(env, original.path) == record_before
    assert read_report(second.report).status == "queued"


# a real arm beside a forged report ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_forged_report_naming_another_running_arms_cgroup_leaves_that_arm_running_to_its_end(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    write_arm(project, "y", agent="random", steps=120, step_timeout=5)
    run = Started(project, state, "run", "--arm", "y")
    try:
        running = wait_for(lambda: running_with_steps(project, "y"), "arm y to run")
        green = running["processes"]["green"]
        environment = _environment(project, cli_env(state))
        source = write_arm(project, "g2", steps=20)
        plan = prepare_episode(plan_arms([source], Overrides(), environment)[0])
        forged = new_report(plan, environment, status="started", attempt=1)
        forged.processes["green"] = ProcessRecord.model_validate({**green, "log": "logs/green.log"})
        RunDir(Path(plan.episode_dir)).write_report(forged)

        stopped = run_cli(project, state, "stop", "--arm", "g2", "--grace", "1")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert NOT_OURS in stopped.stdout, stopped.stdout
        if green["cgroup"]:  # where the host gives cgroups: the forged report names y's own, of the right shape
            assert f"cgroup {green['cgroup']}" in stopped.stdout
        assert psutil.Process(green["pid"]).is_running()
        assert run.wait(timeout=300) == 0, run.output
        final = report(project, "y")
        assert final["status"] == "finished", final.get("failure")
    finally:
        run.kill_if_running()
