"""Slurm without a cluster: the site options and where they come from, the plan, what a job is given (and never
given), and status, stop and reruns reading the run directory first and asking a stand-in squeue/sacct/scancel
(scripts that log how they were called) only about open reports. The cluster runs are in test_slurm_e2e.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from cli_support import invoke
from conftest import write_script
from run_helpers import write_arm

from mcu_arms.arms.campaign import select_arms
from mcu_arms.arms.plan import plan_specs
from mcu_arms.arms.prepare import prepare_episode
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import ProcessRecord, read_report
from mcu_arms.contracts.settings import Overrides
from mcu_arms.contracts.slurm import (
    EPISODE_SECRETS_ENV,
    Placement,
    SlurmJob,
    SlurmOptions,
    parse_sbatch_line,
    parse_slurm_time,
    slurm_time,
)
from mcu_arms.environment import Environment
from mcu_arms.layout import RunDir
from mcu_arms.process.private_record import episode_record, record_submitted
from mcu_arms.supervise.slurm import episode_tokens

CAMPAIGN = """name = "site"
seeds = [0]

[slurm]
time = "1:00:00"
stop_margin = 60
partition = "cpu"
qos = "long"
sbatch = ["--mail-type=END"]

[baseline]
arm = "base"

[[variants]]
name = "other"
differs_in = ["agent"]
agent = "noop"

[variants.slurm]
gres = "mcslot:1"
"""


def _arm(project: Path, name: str, extra: str = "", **options: object) -> Path:
    path = write_arm(project, name, steps=20, **options)  # type: ignore[arg-type]
    path.write_text(path.read_text() + extra)
    return path


def _project(tmp_path: Path, arm_extra: str = "") -> Path:
    project = tmp_path / "project"
    _arm(project, "base", arm_extra)
    (project / "campaigns").mkdir()
    (project / "campaigns" / "site.toml").write_text(CAMPAIGN)
    return project


def _environment(project: Path, tmp_path: Path, **extra: str) -> Environment:
    env = {"PATH": os.environ["PATH"], "USER": "tester", "MCU_ARMS_STATE_DIR": str(tmp_path / "state"), **extra}
    return Environment(variables=env, cwd=project)


def _plans(project: Path, env: Environment, *sources: str, placement: Placement | None = None) -> list:
    selection = select_arms([project / source for source in sources], Overrides(), env.arms_dir)
    return plan_specs(selection.specs, Overrides(), env, placement or Placement(executor="slurm"))


def test_slurm_times_take_every_form_sbatch_takes() -> None:
    assert parse_slurm_time(90) == 90 * 60 and parse_slurm_time("90") == 90 * 60
    assert parse_slurm_time("10:30") == 10 * 60 + 30 and parse_slurm_time("2:00:00") == 7200
    assert parse_slurm_time("1-12") == 36 * 3600 and parse_slurm_time("2-00:00:00") == 2 * 86400
    assert slurm_time(2 * 86400 + 5) == "2-00:00:05" and slurm_time(61) == "00:01:01"
    for wrong in ("1h", "0", "1:2:3:4", "-5"):
        with pytest.raises(ValueError):
            parse_slurm_time(wrong)
    assert parse_sbatch_line("--mail-type=END") == ("mail-type", "END")
    assert parse_sbatch_line("--exclusive") == ("exclusive", True)
    with pytest.raises(ValueError, match="--array is set by mcu-arms"):
        parse_sbatch_line("--array=0-3")
    for option, key in (("qos", "qos"), ("constraint", "constraint"), ("exclude", "exclude"), ("output", "log_dir")):
        with pytest.raises(ValueError, match=rf"--{option} has its own key: \[slurm\] {key} \(or --slurm-"):
            parse_sbatch_line(f"--{option}=x")


@pytest.mark.parametrize(
    ("table", "key", "shown"),
    [
        ('time = "1h"', "slurm.time", "'1h' is not a Slurm time"),
        ('sbatch = ["--signal=USR1@60"]', "slurm.sbatch", "--signal is set by mcu-arms"),
        ('mem = "8 GB"', "slurm.mem", "a number with an optional K, M, G or T"),
        ("stop_margin = 1", "slurm.stop_margin", "seconds >= 10"),
        ('queue = "x"', "slurm.queue", "unknown key"),
        ('qos = "long qos"', "slurm.qos", "a QOS name (sbatch --qos)"),
        ('constraint = "avx2; rm"', "slurm.constraint", "node features as sbatch --constraint takes them"),
        ('exclude = "n1 n2"', "slurm.exclude", "nodes never to use"),
        ('log_dir = ""', "slurm.log_dir", "a directory (relative: to where mcu-arms runs)"),
        ('sbatch = ["--qos=long"]', "slurm.sbatch", "--qos has its own key: [slurm] qos (or --slurm-qos)"),
    ],
)
def test_a_bad_slurm_table_is_an_error_at_its_line(tmp_path: Path, env: dict, table: str, key: str, shown: str) -> None:
    project = _project(tmp_path, f"\n[slurm]\n{table}\n")
    done = invoke(project, env, "plan", "--dry-run", "--executor", "slurm", "arms/base.toml")
    assert done.exit_code == 2, done.out + done.err
    line = (project / "arms" / "base.toml").read_text().splitlines().index(table) + 1
    assert f"base.toml:{line}: key '{key}'" in done.err and shown in done.err


def test_a_campaigns_slurm_table_fills_what_each_arm_leaves_unset(tmp_path: Path) -> None:
    project = _project(tmp_path, '\n[slurm]\ntime = "30"\nconstraint = "avx2"\nsbatch = ["--exclusive"]\n')
    env = _environment(project, tmp_path)
    base, other = _plans(project, env, "campaigns/site.toml")
    assert base.slurm.time_s == 30 * 60, "the arm's own time wins over the campaign's"
    assert base.slurm.partition == "cpu" and base.slurm.stop_margin_s == 60
    assert (base.slurm.qos, base.slurm.constraint) == ("long", "avx2"), "a key of its own, from either file"
    assert base.slurm.sbatch == ["--mail-type=END", "--exclusive"], "the campaign's lines, then the arm's"
    assert other.slurm.gres == "mcslot:1" and base.slurm.gres is None, "a variant's own [slurm] is its own"
    assert base.fingerprint == _plans(project, env, "arms/base.toml", placement=Placement())[0].fingerprint, (
        "where an arm runs is not what it runs: the fingerprint ignores [slurm]"
    )
    flagged = Placement(
        executor="slurm",
        slurm={
            "time": "2-00:00:00",
            "partition": "gpu",
            "sbatch": ["--hold"],
            "qos": "short",
            "constraint": "ib",
            "exclude": "n[1-2]",
            "log_dir": "logs",
        },
    )
    base = _plans(project, env, "campaigns/site.toml", placement=flagged)[0]
    assert (base.slurm.time_s, base.slurm.partition) == (2 * 86400, "gpu") and base.slurm.sbatch[-1] == "--hold"
    assert (base.slurm.qos, base.slurm.constraint, base.slurm.exclude, base.slurm.log_dir) == (
        "short",
        "ib",
        "n[1-2]",
        "logs",
    ), "each flag wins over the files' key"


@pytest.mark.parametrize(
    ("flag", "good", "bad", "shown"),
    [
        ("--slurm-qos", "long", "long qos", "qos long"),
        ("--slurm-constraint", "avx2&ib", "avx2;rm", "constraint avx2&ib"),
        ("--slurm-exclude", "n[01-02],gpu7", "n1 n2", "exclude n[01-02],gpu7"),
        ("--slurm-log-dir", "slurm-logs", "", "log dir slurm-logs"),
    ],
)
def test_each_new_slurm_flag_reaches_the_plan_and_a_bad_value_names_the_flag(
    tmp_path: Path, env: dict, flag: str, good: str, bad: str, shown: str
) -> None:
    project = _project(tmp_path)
    planned = invoke(
        project, env, "plan", "--dry-run", "--verbose", "--executor", "slurm", flag, good, "campaigns/site.toml"
    )
    assert planned.exit_code == 0, planned.out + planned.err
    assert shown in planned.out
    refused = invoke(project, env, "plan", "--dry-run", "--executor", "slurm", flag, bad, "campaigns/site.toml")
    assert refused.exit_code == 2 and flag in refused.err, refused.err
    local = invoke(project, env, "plan", "--dry-run", flag, good, "arms/base.toml")
    assert local.exit_code == 2 and f"{flag} apply to Slurm runs only" in local.err


def test_doctor_checks_a_campaigns_arms_for_slurm_and_names_a_partition_that_does_not_exist(
    tmp_path: Path, env: dict
) -> None:
    project = _project(tmp_path)
    bin_dir, _ = _stand_in_slurm(tmp_path, "")
    write_script(
        bin_dir, "sinfo", 'case "$*" in *"-p ci"*|*"-N -o %N") echo "$(hostname -s)";; *"-o %R") echo ci;; esac'
    )
    env = {**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = invoke(project, env, "doctor", "campaigns/site.toml", "--executor", "slurm", "--json")
    assert done.exit_code == 1, done.out + done.err
    checks = {check["name"]: check for check in json.loads(done.out)["checks"]}
    partition = checks["partition cpu"]
    assert partition["status"] == "fail" and partition["needed_by"] == ["base", "other"], "the campaign's two arms"
    assert "sinfo knows no partition 'cpu'" in partition["detail"]
    assert "the partitions here are ci" in partition["detail"]
    assert "run directory (cpu)" not in checks, "no filesystem verdict for a partition that is not there"
    fixed = invoke(
        project, env, "doctor", "campaigns/site.toml", "--executor", "slurm", "--slurm-partition", "ci", "--json"
    )
    checks = {check["name"]: check for check in json.loads(fixed.out)["checks"]}
    seen = checks["run directory (ci)"]
    assert seen["status"] == "ok" and "the one node is this host" in seen["detail"]
    assert checks["sacct"]["status"] == "warn", "no accounting here: said, not failed"


def test_a_refused_submission_shows_sbatchs_own_words_and_fails_its_reports(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    bin_dir, _ = _stand_in_slurm(tmp_path, "")
    write_script(
        bin_dir, "sbatch", 'echo "sbatch: error: Batch job submission failed: Invalid qos specification" >&2; exit 1'
    )
    write_script(bin_dir, "sinfo", 'echo "$(hostname -s)"')  # one node, this host: the run directory is seen there
    env = {**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = invoke(project, env, "run", "--executor", "slurm", "--slurm-qos", "nosuch", "arms/base.toml")
    assert done.exit_code == 2, done.out + done.err
    assert "sbatch refused the job: sbatch: error: Batch job submission failed: Invalid qos specification" in done.err
    report = read_report(project / "output" / "base" / "episode_001" / "result.json")
    assert report.status == "failed" and "Invalid qos specification" in report.failure.reason, "nothing is lost"
    script = next((project / "output" / ".slurm-jobs").glob("*.sh")).read_text()
    assert "#SBATCH --qos=nosuch" in script.splitlines(), "the script it refused is kept to read"


def test_plan_shows_the_slurm_options_and_refuses_what_cannot_run_there(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path)
    shown = invoke(project, env, "plan", "--dry-run", "--verbose", "--executor", "slurm", "campaigns/site.toml")
    assert shown.exit_code == 0, shown.out + shown.err
    assert (
        "slurm: time 01:00:00, partition cpu, qos long, stop 60 s before the limit, sbatch --mail-type=END" in shown.out
    )
    assert "green, purple picked on the node when the episode starts" in shown.out
    data = json.loads(
        invoke(project, env, "plan", "--dry-run", "--json", "--executor", "slurm", "campaigns/site.toml").out
    )
    assert data["plans"][1]["executor"] == "slurm" and data["plans"][1]["slurm"]["gres"] == "mcslot:1"

    no_time = invoke(project, env, "plan", "--dry-run", "--executor", "slurm", "arms/base.toml")
    assert no_time.exit_code == 2 and "a Slurm job needs a time limit" in no_time.err and "slurm.time" in no_time.err
    local_flags = invoke(project, env, "plan", "--dry-run", "--slurm-partition", "cpu", "arms/base.toml")
    assert local_flags.exit_code == 2 and "--slurm-partition apply to Slurm runs only" in local_flags.err
    slurm_plan = ("plan", "--dry-run", "--executor", "slurm")
    margin = invoke(project, env, *slurm_plan, "--slurm-time", "1", "campaigns/site.toml")
    assert margin.exit_code == 2 and "slurm.stop_margin" in margin.err
    bad_flag = invoke(project, env, *slurm_plan, "--slurm-time", "soon", "arms/base.toml")
    assert bad_flag.exit_code == 2 and "--slurm-time" in bad_flag.err
    own = [
        entry.address
        for entries in psutil.net_if_addrs().values()
        for entry in entries
        if entry.family == socket.AF_INET and not entry.address.startswith("127.")
    ]
    if own:  # exposed on this host's own address, as a local run may be: on a node, the servers stay on loopback
        exposed_arm = _arm(project, "base", "[slurm]\ntime = 60\n")
        exposed_arm.write_text(
            exposed_arm.read_text().replace('purple = "auto"', f'purple = "auto"\nhost = "{own[0]}"\nexpose = true')
        )
        exposed = invoke(project, env, "plan", "--dry-run", "--executor", "slurm", "arms/base.toml")
        assert exposed.exit_code == 2 and "ports.host" in exposed.err and "loopback of the node" in exposed.err


def test_a_job_array_is_told_its_options_and_each_episode_its_own_logs(tmp_path: Path) -> None:
    from mcu_arms.supervise.runner import RunOptions
    from mcu_arms.supervise.slurm import job_name, job_script, sbatch_options

    options = SlurmOptions(
        time_s=3601,
        partition="cpu",
        account="lab",
        qos="long",
        constraint="avx2&ib",
        exclude="n[01-02]",
        mem="8G",
        gres="mcslot:1",
        cpus=2,
        array_throttle=5,
        sbatch=["--mail-type=END", "--exclusive"],
        setup=["module load jdk/8"],
        stop_margin_s=90,
    )
    chosen = sbatch_options(options, count=8, max_parallel=3, name="mcu-arms:a+b")
    assert chosen["time"] == "61", "minutes, rounded up as Slurm rounds them"
    assert chosen["array"] == "0-7%3", "the lower of the arms' throttle and --max-parallel"
    assert (chosen["partition"], chosen["account"], chosen["qos"], chosen["constraint"], chosen["exclude"]) == (
        "cpu",
        "lab",
        "long",
        "avx2&ib",
        "n[01-02]",
    )
    assert (chosen["gres"], chosen["cpus-per-task"], chosen["mem"]) == ("mcslot:1", "2", "8G")
    assert chosen["signal"] == "TERM@90" and chosen["requeue"] is True and chosen["export"] == "ALL"
    assert chosen["mail-type"] == "END" and chosen["exclusive"] is True

    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    env = _environment(project, tmp_path)
    plans = [
        prepare_episode(plan)
        for plan in _plans(
            project, env, "campaigns/site.toml", placement=Placement(executor="slurm", slurm={"time": "60"})
        )
    ]
    assert job_name(plans[:1]) == "mcu-arms:base:seed0" and job_name(plans) == "mcu-arms:base+other"
    script = job_script(plans, options, RunOptions(), "mcu-arms:base+other", tmp_path / "job.%A_%a.out", None)
    lines = script.splitlines()
    assert "#SBATCH --qos=long" in lines and "#SBATCH --exclude=n[01-02]" in lines and "#SBATCH --requeue" in lines
    assert f"#SBATCH --output={tmp_path / 'job.%A_%a.out'}" in lines and "module load jdk/8" in lines
    assert f"stdouts=({plans[0].episode_dir}/slurm-%A_%a.out {plans[1].episode_dir}/slurm-%A_%a.out)" in lines
    assert lines[-1].startswith(
        "exec srun --unbuffered --ntasks=1 --open-mode=append "
        '--output="${stdouts[${SLURM_ARRAY_TASK_ID}]}" '
        '--error="${stderrs[${SLURM_ARRAY_TASK_ID}]}" '
    )
    assert lines[-1].endswith('run-episode --ready-timeout 120 "${episodes[${SLURM_ARRAY_TASK_ID}]}"'), lines[-1]
    elsewhere = job_script(plans, options, RunOptions(), "n", tmp_path / "j.out", tmp_path / "logs")
    assert f"stderrs=({tmp_path}/logs/base.episode_001.slurm-%A_%a.err" in elsewhere, "--slurm-log-dir: one pair each"


def test_a_masked_value_reaches_the_job_in_its_environment_and_in_no_file(tmp_path: Path) -> None:
    from mcu_arms.supervise.episode import _private_plan
    from mcu_arms.supervise.slurm import episode_secrets

    secret = "sk-live-0123456789abcdef"
    project = _project(tmp_path, f'\n[env]\nPROVIDER_API_KEY = "{secret}"\n\n[slurm]\ntime = 60\n')
    env = _environment(project, tmp_path)
    plan = prepare_episode(_plans(project, env, "arms/base.toml")[0])
    run_dir = RunDir(Path(plan.episode_dir))
    assert secret not in run_dir.plan.read_text() and "PROVIDER_API_KEY" in run_dir.plan.read_text()
    carried = episode_secrets([plan])
    assert set(carried) == {EPISODE_SECRETS_ENV} and secret in carried[EPISODE_SECRETS_ENV]
    assert _private_plan(run_dir, _environment(project, tmp_path, **carried))[0] == plan
    assert _private_plan(run_dir, env)[0].settings.env["PROVIDER_API_KEY"] != secret, "without it, still masked"
    _arm(project, "plain", "\n[slurm]\ntime = 60\n")
    assert episode_secrets(_plans(project, env, "arms/plain.toml")) == {}, "nothing masked, nothing carried"


# --- status, stop and reruns against stand-in Slurm commands -------------------------------------------------------


def _stand_in_slurm(tmp_path: Path, squeue_lines: str) -> tuple[Path, Path]:
    """squeue printing `squeue_lines` (%i|%T|%r|%N|%L|%e), scancel and a sacct without accounting, each logging its
    arguments to calls.log."""
    bin_dir, calls = tmp_path / "slurm-bin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "squeue.out").write_text(squeue_lines)
    write_script(bin_dir, "squeue", f'echo "squeue $*" >> {calls}; cat {tmp_path / "squeue.out"}')
    write_script(bin_dir, "scancel", f'echo "scancel $*" >> {calls}')
    write_script(
        bin_dir, "sacct", f'echo "sacct $*" >> {calls}; echo "Slurm accounting storage is disabled" >&2; exit 1'
    )
    write_script(bin_dir, "sbatch", "exit 1")
    return bin_dir, calls


def _queued_episode(project: Path, env: Environment, job_id: str, *, status: str = "queued", node: str | None = None):
    from mcu_arms.supervise.runner import new_report

    plan = prepare_episode(_plans(project, env, "arms/base.toml")[0])
    run_dir = RunDir(Path(plan.episode_dir))
    job = SlurmJob(job_id=job_id, submitted_at="2026-12-01T00:00:00+00:00", submitted_from="login", time_limit_s=3600)
    (run_dir.slurm_job).write_text(job.model_dump_json())
    episode_tokens([plan], env)  # as `run` submits it: a token for its job, its hash in the episode and the record
    submission = episode_record(env.variables, run_dir.path).slurm
    record_submitted(
        env.variables, run_dir.path, plan.arm, plan.episode, submission.model_copy(update={"job_id": job_id})
    )
    report = new_report(plan, env, status="queued", attempt=1)
    if status != "queued":
        me = psutil.Process()
        supervisor = ProcessRecord(role="mcu-arms", pid=me.pid, create_time=me.create_time(), log="logs/mcu-arms.log")
        report = report.model_copy(
            update={
                "status": status,
                "slurm": job.model_copy(update={"node": node}),
                "processes": {"mcu-arms": supervisor},
            }
        )
    run_dir.write_report(report)
    return run_dir


def _calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_status_reads_the_report_first_and_asks_slurm_only_about_open_episodes(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    bin_dir, calls = _stand_in_slurm(tmp_path, "7_0|RUNNING|None|node17|0:40:00|N/A|mcu-arms:base:seed0\n")
    env = {**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    environment = _environment(project, tmp_path, PATH=env["PATH"])
    run_dir = _queued_episode(project, environment, "7_0", status="started", node="node17")

    shown = json.loads(invoke(project, env, "status", "--json").out)["arms"][0]
    assert shown["state"] == "started" and shown["slurm_job"] == "7_0 RUNNING on node17"
    assert shown["processes"] == [], "pids on another node are not this host's to check"
    assert _calls(calls) == [
        "squeue -h -t all -r -j 7_0 -o %i|%T|%r|%N|%L|%e|%j",
        "sacct -n -P -j 7_0 -o JobID,State,Elapsed,MaxRSS,ExitCode",
    ]

    (tmp_path / "squeue.out").write_text("7_0|TIMEOUT|TimeLimit|node17|0:00|2026-12-01T01:00:30|mcu-arms:base:seed0\n")
    shown = json.loads(invoke(project, env, "status", "--json").out)["arms"][0]
    assert shown["state"] == "failed (time limit)" and "killed at its time limit (01:00:00)" in shown["failure"]
    assert read_report(run_dir.report).status == "started", "status only reads"

    (tmp_path / "squeue.out").write_text(
        "7_0|OUT_OF_MEMORY|OutOfMemory|node17|0:00|2026-12-01T00:30:00|mcu-arms:base:seed0\n"
    )
    shown = json.loads(invoke(project, env, "status", "--json").out)["arms"][0]
    assert shown["state"] == "stale (job ended)" and "ended OUT_OF_MEMORY (OutOfMemory)" in shown["failure"]

    report = read_report(run_dir.report)
    run_dir.write_report(report.model_copy(update={"status": "finished"}))
    calls.unlink()
    shown = json.loads(invoke(project, env, "status", "--json").out)["arms"][0]
    assert shown["state"] == "finished" and shown["slurm_job"] == "7_0 on node17"
    assert [call.split()[0] for call in _calls(calls)] == ["sacct"], "a final report is the answer: squeue is not asked"
    assert shown["slurm"]["accounting"] == "not available on this cluster" and shown["slurm"]["state"] is None
    assert (shown["slurm"]["array_job_id"], shown["slurm"]["array_task"], shown["slurm"]["node"]) == ("7", 0, "node17")


def test_stop_cancels_only_the_arms_recorded_job_and_marks_one_that_never_started(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    _arm(project, "neighbour", "\n[slurm]\ntime = 60\n")
    bin_dir, calls = _stand_in_slurm(tmp_path, "7_1|CANCELLED|None||0:00|2026-12-01T00:00:05|mcu-arms:base:seed0\n")
    env = {**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    environment = _environment(project, tmp_path, PATH=env["PATH"], MCU_ARMS_STATE_DIR=env["MCU_ARMS_STATE_DIR"])
    run_dir = _queued_episode(project, environment, "7_1")

    stopped = invoke(project, env, "stop", "--arm", "base", "--json")
    assert stopped.exit_code == 0, stopped.out + stopped.err
    result = json.loads(stopped.out)["arms"][0]
    assert result["action"] == "cancelled" and result["stopped"] == ["episode_001 job 7_1"]
    assert [call for call in _calls(calls) if call.startswith("scancel")] == ["scancel 7_1"], "that one job only"
    assert json.loads(run_dir.stop_request.read_text())["requested_by"].startswith("mcu-arms stop")
    report = read_report(run_dir.report)
    assert report.status == "interrupted" and report.failure.kind == "stopped"
    assert "Slurm job 7_1 was cancelled before it started" in report.failure.reason
    assert report.failure.stopped_by.startswith("mcu-arms stop (pid "), "the report names who stopped it"
    assert report.slurm is not None and report.slurm.job_id == "7_1"


def test_a_pending_array_task_cancelled_is_read_from_its_arrays_record(tmp_path: Path) -> None:
    """Slurm keeps no record of a pending array task once it is cancelled: while its array answers, the task is
    known to have been cancelled (not lost to infrastructure), and the episode that asked for it is interrupted."""
    from mcu_arms.cluster.slurm import ended_without_report, job_states

    bin_dir, calls = _stand_in_slurm(tmp_path, "")
    write_script(
        bin_dir,
        "squeue",
        f'echo "squeue $*" >> {calls}; case "$*" in *"-j 7,8 "*) '
        'echo "7_3|PENDING|Priority||1:00:00|N/A|mcu-arms:base+other";; esac',
    )
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    answer = job_states(["7_2", "8_0"], env)
    assert answer.answered and set(answer.jobs) == {"7_2"}, "8's array is unknown too: nothing is said of 8_0"
    assert answer.jobs["7_2"].state == "CANCELLED" and answer.jobs["7_2"].source == "squeue (array)"
    job = SlurmJob(job_id="7_2", submitted_at="2026-12-01T00:00:00+00:00", submitted_from="login", time_limit_s=60)
    status, failure = ended_without_report(job, answer.jobs["7_2"])
    assert (status, failure.kind) == ("interrupted", "stopped") and "cancelled while pending" in failure.reason
    status, failure = ended_without_report(job, None, stopped_by="mcu-arms run (pid 9), interrupted by SIGINT")
    assert (status, failure.stopped_by) == ("interrupted", "mcu-arms run (pid 9), interrupted by SIGINT")
    requeued = answer.jobs["7_2"].model_copy(update={"state": "NODE_FAIL", "reason": "NodeDown", "node": "n1"})
    assert ended_without_report(job, requeued)[1].kind == "infrastructure", "a node failure is retried"


def test_a_rerun_finalises_an_episode_whose_job_died_at_its_time_limit_and_then_runs_it_again(tmp_path: Path) -> None:
    from mcu_arms.supervise.jobs import reconcile, refuse_live_jobs
    from mcu_arms.supervise.reruns import rerun_decision

    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    bin_dir, calls = _stand_in_slurm(tmp_path, "9_0|RUNNING|None|n1|0:10:00|N/A|mcu-arms:base:seed0\n")
    environment = _environment(project, tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}")
    run_dir = _queued_episode(project, environment, "9_0", status="started", node="n1")
    plan = _plans(project, environment, "arms/base.toml")[0]
    with pytest.raises(UserError, match="has Slurm job 9_0 RUNNING"):
        refuse_live_jobs([plan], environment)
    assert reconcile(environment, ["base"]) == [] and read_report(run_dir.report).status == "started"

    (tmp_path / "squeue.out").write_text("9_0|TIMEOUT|TimeLimit|n1|0:00|2026-12-01T01:00:20|mcu-arms:base:seed0\n")
    assert len(reconcile(environment, ["base"])) == 1
    report = read_report(run_dir.report)
    assert report.status == "failed" and report.failure.kind == "time_limit" and report.finished_at is not None
    refuse_live_jobs([plan], environment)  # nothing runs now
    decision = rerun_decision(plan, environment.output_dir / "base", rerun=False)
    assert decision.action == "retry" and "restarted from its first step as a new episode" in decision.message

    (tmp_path / "squeue.out").write_text("")  # a controller that does not answer: squeue fails, nothing is touched
    write_script(bin_dir, "squeue", "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1")
    other = _queued_episode(project, environment, "9_1", status="started", node="n1")
    assert reconcile(environment, ["base"]) == [] and read_report(other.report).status == "started"
    with pytest.raises(UserError, match="cannot be asked about now"):
        refuse_live_jobs([plan], environment)


@pytest.mark.parametrize(
    ("scontrol", "elapsed_s", "kind", "said"),
    [
        (
            "JobState=RUNNING Reason=None Restarts=0 RunTime=00:01:35 TimeLimit=00:02:00",
            0,
            "time_limit",
            "reached its time limit (00:02:00): Slurm's warning came after 00:01:35",
        ),
        (
            "JobState=SIGNALING Reason=None Restarts=0 RunTime=00:00:41 TimeLimit=00:02:00",
            0,
            "time_limit",
            "within 80 s of the limit",
        ),
        ("JobState=COMPLETING Reason=TimeLimit Restarts=0 RunTime=00:02:01 TimeLimit=00:02:00", 0, "time_limit", ""),
        (
            "JobState=COMPLETING Reason=None Restarts=0 RunTime=00:01:50 TimeLimit=00:02:00",
            0,
            "stopped",
            "cancelled outside it (scancel)",
        ),
        (
            "JobState=COMPLETING Reason=None Restarts=1 RunTime=00:00:30 TimeLimit=00:02:00",
            0,
            "infrastructure",
            "Slurm requeued job 7_0 after 00:00:30",
        ),
        ("JobState=RUNNING Reason=None Restarts=0 RunTime=00:00:05 TimeLimit=01:00:00", 0, "stopped", "SIGTERM after"),
        (None, 100, "time_limit", "reached its time limit"),  # Slurm silent: the episode's own clock decides
        (None, 10, "stopped", "Slurm could not be asked"),
    ],
)
def test_a_sigterm_is_read_with_what_slurm_and_the_clock_say(
    tmp_path: Path, scontrol: str | None, elapsed_s: float, kind: str, said: str
) -> None:
    from mcu_arms.supervise.episode import term_reading

    bin_dir, calls = _stand_in_slurm(tmp_path, "")
    write_script(
        bin_dir,
        "scontrol",
        f'echo "scontrol $*" >> {calls}; '
        + (f'echo "JobId=7 ArrayJobId=7 ArrayTaskId=0 {scontrol}"' if scontrol else "exit 1"),
    )
    job = SlurmJob(
        job_id="7_0",
        submitted_at="2026-12-01T00:00:00+00:00",
        submitted_from="login",
        time_limit_s=120,
        stop_margin_s=20,
    )
    reason, found = term_reading(job, elapsed_s, {"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert found == kind and said in reason, reason
    assert _calls(calls) == ["scontrol -o show job 7_0"], "the job it was submitted as, by id"


def test_sacct_figures_reach_status_where_the_cluster_keeps_accounting(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    bin_dir, calls = _stand_in_slurm(tmp_path, "")
    write_script(
        bin_dir,
        "sacct",
        f'echo "sacct $*" >> {calls}; printf "%s\\n" "7_0|COMPLETED|00:12:34||0:0" '
        '"7_0.batch|COMPLETED|00:12:34|1024K|0:0" "7_0.0|COMPLETED|00:12:30|2.5G|0:0"',
    )
    env = {**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run_dir = _queued_episode(
        project, _environment(project, tmp_path, PATH=env["PATH"]), "7_0", status="started", node="node17"
    )
    report = read_report(run_dir.report)
    run_dir.write_report(report.model_copy(update={"status": "finished"}))
    shown = json.loads(invoke(project, env, "status", "--json").out)["arms"][0]
    assert shown["slurm"]["accounting"] == {
        "state": "COMPLETED",
        "elapsed": "00:12:34",
        "max_rss": "2.5G",
        "exit_code": "0:0",
    }, "MaxRSS: the largest of the job's steps"
    table = invoke(project, env, "status").out
    assert "sacct COMPLETED, elapsed 00:12:34, MaxRSS 2.5G, exit 0:0" in table, table


def test_run_episode_refuses_what_is_not_its_to_run(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    environment = _environment(project, tmp_path)
    run_dir = _queued_episode(project, environment, "12_0")
    by_hand = invoke(project, env, "run-episode", str(run_dir.path))
    assert by_hand.exit_code == 2 and "submitted as Slurm job 12_0 and runs there" in by_hand.err
    other_job = invoke(
        project,
        {**env, "SLURM_JOB_ID": "31", "SLURM_ARRAY_JOB_ID": "30", "SLURM_ARRAY_TASK_ID": "1"},
        "run-episode",
        str(run_dir.path),
    )
    assert other_job.exit_code == 2 and "not here (job 30_1)" in other_job.err
    report = read_report(run_dir.report)
    run_dir.write_report(report.model_copy(update={"status": "finished"}))
    again = invoke(
        project,
        {**env, "SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "0"},
        "run-episode",
        str(run_dir.path),
    )
    assert again.exit_code == 2 and "the episode is finished, not queued" in again.err


def test_a_requeued_job_never_runs_its_episode_twice(tmp_path: Path, env: dict) -> None:
    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    run_dir = _queued_episode(project, _environment(project, tmp_path), "12_0", status="started", node="n1")
    restarted = {
        **env,
        "SLURM_JOB_ID": "13",
        "SLURM_ARRAY_JOB_ID": "12",
        "SLURM_ARRAY_TASK_ID": "0",
        "SLURM_RESTART_COUNT": "1",
    }
    lost = invoke(project, restarted, "run-episode", str(run_dir.path))
    assert lost.exit_code == 1, lost.out + lost.err
    report = read_report(run_dir.report)
    assert report.status == "failed" and report.failure.kind == "infrastructure", "its first start died with its node"
    assert "Slurm requeued job 12_0 after the node lost the episode (restart 1)" in report.failure.reason
    again = invoke(project, restarted, "run-episode", str(run_dir.path))
    assert again.exit_code == 0 and "requeued after its episode ended failed: nothing to run" in again.out
    assert read_report(run_dir.report) == report, "the ended episode is left as it was"


@pytest.mark.slow
def test_run_episode_runs_a_queued_episode_on_this_host_as_a_node_would(tmp_path: Path) -> None:
    from run_helpers import cli_env

    from mcu_arms.supervise.runner import new_report

    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    environment = _environment(project, tmp_path)
    plan = prepare_episode(_plans(project, environment, "arms/base.toml")[0])
    run_dir = RunDir(Path(plan.episode_dir))
    run_dir.write_report(new_report(plan, environment, status="queued", attempt=1))
    tokens = episode_tokens([plan], environment)
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run-episode", str(run_dir.path)],
        cwd=project,
        env={**cli_env(tmp_path / "state"), **tokens},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = read_report(run_dir.report)
    assert report.status == "finished" and report.steps_run == 20 and report.slurm is None
    ran = json.loads(run_dir.plan.read_text())
    servers = {process["role"]: process for process in ran["processes"] if process["port"]}
    assert set(servers) == {"green", "purple"} and all(process["listen_fd"] for process in servers.values())
    assert all(f"--port {process['port']}" in " ".join(process["argv"]) for process in servers.values()), (
        "each server was told the port of the socket it was handed"
    )
    assert f"127.0.0.1:{servers['green']['port']}" in run_dir.scenario.read_text()


@pytest.mark.slow
def test_a_job_cancelled_from_outside_ends_interrupted_even_when_its_client_dies_first(tmp_path: Path) -> None:
    """scancel: Slurm sends SIGTERM to every process of the job at once. Here the client, green and purple get it
    just before the supervisor (the order in which a client's death is seen before the supervisor's own signal), and
    the episode still ends as the signal is read (cancelled outside mcu-arms), never `failed` for a killed client,
    however long Slurm takes to answer what the signal was (here 2 s)."""
    from run_helpers import cli_env, wait_for

    from mcu_arms.supervise.runner import new_report

    project = tmp_path / "project"
    _arm(project, "long", "\n[slurm]\ntime = 60\n")
    arm = project / "arms" / "long.toml"
    arm.write_text(arm.read_text().replace("steps = 20", "steps = 3000"))
    environment = _environment(project, tmp_path)
    plan = prepare_episode(_plans(project, environment, "arms/long.toml")[0])
    run_dir = RunDir(Path(plan.episode_dir))
    job = SlurmJob(job_id="7_0", submitted_at="2026-12-01T00:00:00+00:00", submitted_from="login", time_limit_s=3600)
    run_dir.slurm_job.write_text(job.model_dump_json())
    tokens = episode_tokens([plan], environment)
    submission = episode_record(environment.variables, run_dir.path).slurm
    record_submitted(
        environment.variables, run_dir.path, plan.arm, plan.episode, submission.model_copy(update={"job_id": "7_0"})
    )
    run_dir.write_report(new_report(plan, environment, status="queued", attempt=1))
    bin_dir, _calls_log = _stand_in_slurm(tmp_path, "")
    write_script(
        bin_dir,
        "scontrol",
        'sleep 2; echo "JobId=7 ArrayJobId=7 ArrayTaskId=0 JobState=RUNNING Reason=None Restarts=0 RunTime=00:00:30 '
        'TimeLimit=01:00:00"',
    )
    in_job = {"SLURM_JOB_ID": "8", "SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "0"}
    env = {**cli_env(tmp_path / "state"), **tokens, **in_job, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    episode = subprocess.Popen(
        [sys.executable, "-m", "mcu_arms", "run-episode", str(run_dir.path)],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        stepping = lambda: any(p.stat().st_size for p in run_dir.path.glob("green/*/steps.jsonl"))  # noqa: E731
        wait_for(lambda: stepping() or episode.poll() is not None, "the episode to step", timeout=180)
        assert episode.poll() is None, episode.communicate()[0]
        supervisor = psutil.Process(episode.pid)
        for process in [*supervisor.children(recursive=True), supervisor]:  # what this test started, by handle
            process.send_signal(signal.SIGTERM)
        output = episode.communicate(timeout=120)[0]
    finally:
        if episode.poll() is None:
            episode.kill()
            episode.wait()
    report = read_report(run_dir.report)
    assert episode.returncode == 130, output
    assert report.status == "interrupted" and report.failure.kind == "stopped", report.failure
    assert "was ended by SIGTERM" in report.failure.reason and "cancelled outside it" in report.failure.reason


def test_a_server_serves_on_the_socket_it_was_handed_and_a_busy_fixed_port_aborts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcu_arms.a2a_transport import bind_socket
    from mcu_arms.isolation.listeners import claim_listener, claimed_listeners
    from mcu_arms.process.procs import LISTEN_FD_ENV

    env = {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}
    (tmp_path / "state").mkdir()  # the port registry is read (another mcu-arms's reservations are passed over)
    with claimed_listeners("127.0.0.1", {"green": None, "purple": None}, env) as sockets:
        ports = {role: sock.getsockname()[1] for role, sock in sockets.items()}
        assert len(set(ports.values())) == 2
        with pytest.raises(UserError, match=f"port {ports['green']} on 127.0.0.1 is in use by pid {os.getpid()}"):
            claim_listener("127.0.0.1", ports["green"], set())
        monkeypatch.setenv(LISTEN_FD_ENV, str(sockets["green"].fileno()))
        served = bind_socket("127.0.0.1", ports["green"])
        assert served.getsockname() == sockets["green"].getsockname() and LISTEN_FD_ENV not in os.environ
        with socket.create_connection(("127.0.0.1", ports["green"]), timeout=5):
            pass  # it listens already: no one could take the port before the server started
        served.detach()


def test_a_minestudio_episode_gets_a_private_display_and_its_xvfb_is_stopped(tmp_path: Path) -> None:
    from mcu_arms.isolation.display import private_display

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "xvfb.pids"
    xvfb_script = bin_dir / "Xvfb"  # bash: the descriptor Xvfb is given may be above 9
    xvfb_script.write_text(
        f'#!/bin/bash\necho $$ >> {pids}\nwhile [ $# -gt 0 ]; do [ "$1" = -displayfd ] && fd=$2; '
        "shift; done\necho 42 >&$fd\nexec sleep 600\n"
    )
    xvfb_script.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    with private_display(env, tmp_path / "scratch") as variables:
        assert variables["DISPLAY"] == ":42"
        ran = subprocess.run(
            ["xvfb-run", "-a", "-s", "-screen 0 640x360x24", "sh", "-c", "echo on $DISPLAY"],
            env={**os.environ, **variables},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert ran.stdout.strip() == "on :42", "MineStudio's `xvfb-run -a java ...` runs on the private display"
        xvfb = int(pids.read_text())
        assert Path(f"/proc/{xvfb}").exists()
    assert not Path(f"/proc/{xvfb}").exists() or "zombie" in Path(f"/proc/{xvfb}/status").read_text().lower()
    assert not list((tmp_path / "scratch").iterdir()), "its shim and log are removed"


def test_a_node_checks_the_episode_as_planned_before_it_starts(tmp_path: Path) -> None:
    """run-episode makes `run`'s host checks on the node from the plan alone (the arm file may be a campaign's)."""
    from mcu_arms.arms.plan import plan_arms
    from mcu_arms.doctor import plan_preflight

    project = _project(tmp_path, "\n[slurm]\ntime = 60\n")
    env = _environment(project, tmp_path)
    assert plan_preflight(_plans(project, env, "arms/base.toml")[0], env.variables) == []
    minecraft = project / "arms" / "blocky.toml"
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # a port nothing answers on: the server the arm names is not up
    minecraft.write_text(
        (Path(__file__).resolve().parents[1] / "arms" / "planned_mineflayer.toml")
        .read_text()
        .replace("port = 25565", f"port = {port}")
    )
    blocked = plan_preflight(plan_arms([minecraft], Overrides(), env)[0], env.variables)
    assert any(f"127.0.0.1:{port}" in problem for problem in blocked), blocked


def test_a_child_slow_to_exit_keeps_the_rest_of_the_grace_when_its_leader_exits_at_once(tmp_path: Path) -> None:
    """The "still running ... after SIGTERM were killed" alert comes only from a process that really outlived its
    grace: a child still shutting down when its group's leader exits is given the rest of the grace, not half a
    second."""
    from run_helpers import wait_for

    from mcu_arms.process.procs import stop_process_group

    ready = tmp_path / "ready"
    child = (
        f"import signal, time, pathlib; signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.5), exit(0))); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    )
    leader = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "{child}" & trap "exit 0" TERM; wait'], start_new_session=True
    )
    wait_for(ready.exists, "the child to take SIGTERM")
    outcome = stop_process_group(leader.pid, psutil.Process(leader.pid).create_time(), grace_s=6.0, popen=leader)
    assert (outcome.terminated, outcome.killed, outcome.survivors) == (2, 0, []), outcome
