"""Asking Slurm about this project's own jobs, and cancelling one: `squeue`, `sacct` and `scancel` by job id only.

Never by name or user: an id comes from an episode's records (`slurm.json`, the report), written when mcu-arms
submitted it. `squeue` answers for active jobs and, for `MinJobAge` seconds, for ended ones; `sacct` (when the site
keeps accounting) for older ones. A pending array task that is cancelled leaves no record of its own (Slurm drops it
from the array's parent record): while the parent still answers, a task missing from it was cancelled before it
started. Every call has a deadline: a slow controller makes an answer unknown, never a hang.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping
from datetime import datetime

from pydantic import BaseModel

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_RECORD_BYTES
from mcu_arms.contracts.reading import read_bounded
from mcu_arms.contracts.run_report import Failure, RunReport
from mcu_arms.contracts.slurm import (
    ACCOUNTING_UNAVAILABLE,
    TIME_LIMIT_STATES,
    SlurmAccounting,
    SlurmJob,
    SlurmState,
    is_active,
    parse_slurm_time,
    slurm_time,
    state_name,
)
from mcu_arms.contracts.states import RunStatus
from mcu_arms.layout import RunDir

QUERY_TIMEOUT_S = 20.0
SUBMIT_COMMANDS = ("sbatch", "squeue", "scancel")
UNKNOWN: SlurmState = "UNKNOWN"
SQUEUE_FORMAT = "%i|%T|%r|%N|%L|%e|%j"
# What a job gone without a final report amounts to, by Slurm's state: infrastructure, retried (the job was taken
# from the episode: requeued, preempted, its node lost, out of memory, ...) unless named here.
CANCELLED_STATES = frozenset({"CANCELLED"})
FOLDED_REASON = "cancelled while pending (no longer in its array's record)"


class JobStatus(BaseModel):
    """What Slurm says of one job: its state (`RUNNING`, `TIMEOUT`, ...), the reason it gives, and its node."""

    job_id: str
    state: SlurmState
    reason: str = ""
    node: str = ""
    time_left: str = ""  # squeue %L while it runs: "0:41", "1-02:00:00"
    ended: str = ""  # when it ended (squeue %e, sacct End; the controller's local time), once it has
    name: str = ""  # the job's name (squeue %j)
    source: str  # squeue, squeue (array) — a task missing from its array's record — or sacct

    def seconds_since_end(self, now: datetime | None = None) -> float | None:
        try:
            end = datetime.fromisoformat(self.ended)
        except ValueError:
            return None
        return ((now or datetime.now()) - end).total_seconds()


class SlurmAnswer(BaseModel):
    """Slurm's answer about some jobs. `answered` False: it could not be asked (no controller, no squeue), so a job
    missing from `jobs` may still run; True: a missing job is one Slurm no longer knows."""

    answered: bool
    jobs: dict[str, JobStatus] = {}


def missing_commands(env: Mapping[str, str], commands: Iterable[str] = SUBMIT_COMMANDS) -> list[str]:
    return [command for command in commands if shutil.which(command, path=env.get("PATH")) is None]


def _run(
    argv: list[str], env: Mapping[str, str], timeout_s: float = QUERY_TIMEOUT_S
) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=dict(env), stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _squeue(job_ids: list[str], env: Mapping[str, str]) -> SlurmAnswer:
    done = _run(["squeue", "-h", "-t", "all", "-r", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT], env)
    if done is None:
        return SlurmAnswer(answered=False)
    if done.returncode != 0:  # rc 1 with this message when no id is known any more (purged after MinJobAge)
        return SlurmAnswer(answered="Invalid job id" in done.stderr)
    found: dict[str, JobStatus] = {}
    for line in done.stdout.splitlines():
        fields = [field.strip() for field in line.split("|", 6)]
        if len(fields) == 7:
            job_id, state, reason, node, left, ended, name = fields
            if is_active(state_name(state)):
                ended = ""
            found[job_id] = JobStatus(
                job_id=job_id,
                state=state_name(state),
                reason=reason,
                node=node,
                time_left=left,
                ended=ended,
                name=name,
                source="squeue",
            )
    return SlurmAnswer(answered=True, jobs=found)


def _folded(task_ids: list[str], env: Mapping[str, str]) -> dict[str, JobStatus]:
    """Array tasks squeue does not know, whose array it still knows: each was cancelled while pending (Slurm keeps
    no record of such a task; the parent lists the tasks it still has)."""
    parents = sorted({task_id.split("_", 1)[0] for task_id in task_ids if "_" in task_id})
    if not parents:
        return {}
    answer = _squeue(parents, env)
    known = {job_id.split("_", 1)[0] for job_id in answer.jobs}
    return {
        task_id: JobStatus(job_id=task_id, state="CANCELLED", reason=FOLDED_REASON, source="squeue (array)")
        for task_id in task_ids
        if "_" in task_id and task_id.split("_", 1)[0] in known and task_id not in answer.jobs
    }


def _sacct(job_ids: list[str], env: Mapping[str, str]) -> dict[str, JobStatus]:
    """sacct's answer for jobs squeue has forgotten; nothing when the site keeps no accounting."""
    if shutil.which("sacct", path=env.get("PATH")) is None:
        return {}
    done = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,Reason,NodeList,End"], env)
    found: dict[str, JobStatus] = {}
    if done is None or done.returncode != 0:
        return found
    for line in done.stdout.splitlines():
        fields = line.split("|")
        if len(fields) == 5 and fields[0] in job_ids:
            found[fields[0]] = JobStatus(
                job_id=fields[0],
                state=state_name(fields[1]),
                reason=fields[2],
                node=fields[3],
                ended=fields[4],
                source="sacct",
            )
    return found


def job_states(job_ids: Iterable[str], env: Mapping[str, str]) -> SlurmAnswer:
    """Each job's status, from squeue, else sacct."""
    wanted = sorted(set(job_ids))
    if not wanted:
        return SlurmAnswer(answered=True)
    if missing_commands(env, ("squeue",)):
        return SlurmAnswer(answered=False)
    answer = _squeue(wanted, env)
    rest = [job_id for job_id in wanted if job_id not in answer.jobs]
    if answer.answered and rest:
        answer.jobs.update(_sacct(rest, env))
        answer.jobs.update(_folded([job_id for job_id in rest if job_id not in answer.jobs], env))
    return answer


class JobDetail(BaseModel):
    """`scontrol show job`'s view of a job now: what the episode asks when a SIGTERM comes, to tell its time limit's
    warning (still RUNNING, or Reason=TimeLimit) from a cancel (COMPLETING) and a requeue (Restarts went up)."""

    state: SlurmState
    reason: str = ""
    restarts: int = 0
    run_time_s: int | None = None  # how long it has run, by Slurm's clock
    time_limit_s: int | None = None


def _seconds(value: str | None) -> int | None:
    """`00:01:05`, `1-00:00:00` -> seconds; None for UNLIMITED and the like (0 for a zero time)."""
    try:
        return parse_slurm_time(value) if value else None
    except ValueError:
        return 0 if value and set(value) <= set("0:-") else None


def job_detail(job_id: str, env: Mapping[str, str], timeout_s: float) -> JobDetail | None:
    """None when Slurm cannot say within `timeout_s`."""
    done = _run(["scontrol", "-o", "show", "job", job_id], env, timeout_s)
    if done is None or done.returncode != 0:
        return None
    fields = dict(token.split("=", 1) for token in done.stdout.split() if "=" in token)
    restarts = fields.get("Restarts", "0")
    return JobDetail(
        state=state_name(fields.get("JobState", "")),
        reason=fields.get("Reason", ""),
        restarts=int(restarts) if restarts.isdigit() else 0,
        run_time_s=_seconds(fields.get("RunTime")),
        time_limit_s=_seconds(fields.get("TimeLimit")),
    )


def job_accounting(job_ids: Iterable[str], env: Mapping[str, str]) -> dict[str, SlurmAccounting] | None:
    """sacct's State, Elapsed, MaxRSS (the largest of the job's steps) and ExitCode per job; None when the cluster
    keeps no accounting (or sacct does not answer)."""
    wanted = sorted(set(job_ids))
    if missing_commands(env, ("sacct",)):
        return None
    done = _run(["sacct", "-n", "-P", "-j", ",".join(wanted) or "1", "-o", "JobID,State,Elapsed,MaxRSS,ExitCode"], env)
    if done is None or done.returncode != 0:
        return None
    found: dict[str, SlurmAccounting] = {}
    peaks: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        fields = line.split("|")
        if len(fields) != 5:
            continue
        job_id, step = fields[0].split(".", 1)[0], "." in fields[0]
        if fields[3]:
            peaks.setdefault(job_id, []).append(fields[3])
        if not step and job_id in wanted:
            found[job_id] = SlurmAccounting(state=state_name(fields[1]), elapsed=fields[2], exit_code=fields[4])
    for job_id, record in found.items():
        if peaks.get(job_id):
            record.max_rss = max(peaks[job_id], key=_bytes)
    return found


def _bytes(size: str) -> float:
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    try:
        return float(size[:-1]) * units[size[-1]] if size[-1:] in units else float(size)
    except ValueError:
        return 0.0


def accounting_text(accounting: SlurmAccounting | str | None) -> str | None:
    """One line: `COMPLETED, elapsed 00:12:34, MaxRSS 1.2G, exit 0:0`, or why there is none."""
    if accounting is None or isinstance(accounting, str):
        return accounting
    rss = f", MaxRSS {accounting.max_rss}" if accounting.max_rss else ""
    return f"{accounting.state}, elapsed {accounting.elapsed}{rss}, exit {accounting.exit_code}"


def accounting_or_why(job_ids: Iterable[str], env: Mapping[str, str]) -> dict[str, SlurmAccounting | str]:
    """Each job's accounting, or ACCOUNTING_UNAVAILABLE for every job when the cluster keeps none."""
    wanted = list(job_ids)
    found = job_accounting(wanted, env) if wanted else {}
    if found is None:
        return dict.fromkeys(wanted, ACCOUNTING_UNAVAILABLE)
    return dict(found)


def time_left(job_id: str, env: Mapping[str, str]) -> float | None:
    """Seconds the running job has left before its time limit, as squeue says (None when it cannot say)."""
    done = _run(["squeue", "-h", "-j", job_id, "-o", "%L"], env) if not missing_commands(env, ("squeue",)) else None
    if done is None or done.returncode != 0:
        return None
    try:
        return float(parse_slurm_time(done.stdout.strip()))
    except ValueError:  # UNLIMITED, NOT_SET, INVALID
        return None


def cancel_job(job_id: str, env: Mapping[str, str]) -> str | None:
    """`scancel JOB_ID` (that one job, or array task, only); returns what went wrong, or None."""
    if missing_commands(env, ("scancel",)):
        return "scancel is not on PATH"
    done = _run(["scancel", job_id], env)
    if done is None:
        return f"scancel {job_id} did not answer within {QUERY_TIMEOUT_S:g} s"
    if done.returncode != 0:
        return f"scancel {job_id}: {(done.stderr or done.stdout).strip() or f'exit code {done.returncode}'}"
    return None


def partition_nodes(partition: str | None, env: Mapping[str, str]) -> list[str] | None:
    """The short host names of the nodes a job may land on (the partition's, or every node), None when sinfo cannot
    say."""
    argv = ["sinfo", "-h", "-N", "-o", "%N"] + (["-p", partition] if partition else [])
    done = _run(argv, env) if not missing_commands(env, ("sinfo",)) else None
    if done is None or done.returncode != 0:
        return None
    return sorted({line.strip() for line in done.stdout.splitlines() if line.strip()})


def partition_names(env: Mapping[str, str]) -> list[str]:
    """The cluster's partition names (empty when sinfo cannot say)."""
    done = _run(["sinfo", "-h", "-o", "%R"], env) if not missing_commands(env, ("sinfo",)) else None
    if done is None or done.returncode != 0:
        return []
    return sorted({line.strip() for line in done.stdout.splitlines() if line.strip()})


def accounting_answers(env: Mapping[str, str]) -> bool:
    """Does sacct answer here (a site without slurmdbd says "accounting storage is disabled")?"""
    if missing_commands(env, ("sacct",)):
        return False
    done = _run(["sacct", "-n", "-X", "-j", "1"], env)
    return done is not None and done.returncode == 0


def this_host() -> str:
    return socket.gethostname().split(".")[0]


def episode_job(run_dir: RunDir, report: RunReport | None) -> SlurmJob | None:
    """The Slurm job an episode was submitted as: the report's record once the episode started, else the
    submitter's slurm.json (None: not a Slurm episode, or one whose submission never completed)."""
    if report is not None and report.slurm is not None:
        return report.slurm
    try:
        return SlurmJob.model_validate_json(read_bounded(run_dir.slurm_job, MAX_RECORD_BYTES, "Slurm job record"))
    except (UserError, ValueError):
        return None


def ended_without_report(
    job: SlurmJob, status: JobStatus | None, stopped_by: str | None = None
) -> tuple[RunStatus, Failure]:
    """What an episode whose job ended before it wrote its final report amounts to: `interrupted` when someone
    stopped it (`stopped_by`: a stop request in the episode) or Slurm says it was cancelled, `failed` with kind
    time_limit when Slurm ended it at its time limit, else `failed` (infrastructure, retried: requeued, preempted,
    its node failed, out of memory, mcu-arms was killed)."""
    state = status.state if status else UNKNOWN
    said = f"{state}{f' ({status.reason})' if status and status.reason not in ('', 'None') else ''}"
    node = (status.node if status else "") or job.node
    where = f" on {node}" if node else ""
    if stopped_by is not None:
        how = "cancelled before it started" if status is None or not (status.node or job.node) else "cancelled"
        reason = f"stopped by {stopped_by}: Slurm job {job.job_id}{where} was {how}"
        return "interrupted", Failure(process=None, kind="stopped", reason=reason, stopped_by=stopped_by)
    if state in TIME_LIMIT_STATES or (status is not None and status.reason == "TimeLimit"):
        reason = f"Slurm job {job.job_id}{where} was killed at its time limit ({slurm_time(job.time_limit_s)}) before "
        return "failed", Failure(process=None, kind="time_limit", reason=reason + "the episode could write its report")
    if state in CANCELLED_STATES:
        how = FOLDED_REASON if status is not None and status.reason == FOLDED_REASON else "cancelled"
        reason = (
            f"Slurm job {job.job_id}{where} was {how} (scancel outside mcu-arms) before the episode wrote its report"
        )
        return "interrupted", Failure(process=None, kind="stopped", reason=reason)
    known = "" if status else " (neither squeue nor sacct knows it any more)"
    reason = f"Slurm job {job.job_id}{where} ended {said}{known} without the episode's final report"
    return "failed", Failure(process=None, reason=reason)
