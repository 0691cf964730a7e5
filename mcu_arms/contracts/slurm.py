"""Running episodes as Slurm jobs: the site options an arm runs with, the job an episode was submitted as, and
Slurm's own state names. Every default is stated here once.

An episode on Slurm is one job (an array task when several are submitted together). The login host writes the
episode's report `queued` before it submits; `mcu-arms run-episode` on the node takes the queued report over and
runs the arm as the local supervisor does, so the report goes `queued -> started -> finished | failed |
interrupted` in the shared run directory whichever host wrote each step.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Executor = Literal["local", "slurm"]
EXECUTORS: tuple[Executor, ...] = ("local", "slurm")
DEFAULT_EXECUTOR: Executor = "local"

# Seconds before its time limit at which an episode is told to stop (SIGTERM to every process of the job), so that
# it writes its report `failed (time limit)` itself. Slurm checks limits on a ~30 s tick, so the signal can come up
# to that much earlier than asked.
DEFAULT_STOP_MARGIN_S = 120
MIN_STOP_MARGIN_S = 10
# How far off Slurm's limit check may land (its tick), in seconds.
SLURM_TICK_S = 30
# Slurm may send the time-limit warning (--signal) up to this many seconds before it was asked to (sbatch(1)): a
# SIGTERM that comes within stop margin + this of the limit is the limit's warning.
SLURM_WARNING_EARLY_S = 60
# What the report and status say of accounting (State, Elapsed, MaxRSS, ExitCode) on a cluster that keeps none.
ACCOUNTING_UNAVAILABLE = "not available on this cluster"

# sbatch options mcu-arms sets itself, which an extra sbatch line may not set again.
RESERVED_SBATCH_OPTIONS = frozenset(
    {
        "array",
        "output",
        "error",
        "signal",
        "time",
        "job-name",
        "open-mode",
        "requeue",
        "no-requeue",
        "export",
        "wrap",
        "partition",
        "account",
        "mem",
        "gres",
        "cpus-per-task",
        "chdir",
        "parsable",
        "qos",
        "constraint",
        "exclude",
    }
)
# sbatch options that have a [slurm] key (and a --slurm-* flag) of their own.
OWN_KEYS = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "constraint": "constraint",
    "exclude": "exclude",
    "mem": "mem",
    "gres": "gres",
    "cpus-per-task": "cpus",
    "time": "time",
    "output": "log_dir",
    "error": "log_dir",
}
SBATCH_LINE = re.compile(r"^--([a-z][a-z0-9-]*)(?:=(.+))?$")
# What sbatch's --qos, --constraint and --exclude take: a name; node features joined by & | , (brackets, counts);
# a node list (node[01-03],gpu7).
SLURM_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
SLURM_CONSTRAINT_PATTERN = r"^[A-Za-z0-9_.&|,:*\[\]()-]+$"
SLURM_NODES_PATTERN = r"^[A-Za-z0-9_.,\[\]-]+$"

_TIME_FORMS = (
    re.compile(r"^(?P<minutes>\d+)$"),
    re.compile(r"^(?P<minutes>\d+):(?P<seconds>\d{1,2})$"),
    re.compile(r"^(?P<hours>\d+):(?P<minutes>\d{1,2}):(?P<seconds>\d{1,2})$"),
    re.compile(r"^(?P<days>\d+)-(?P<hours>\d{1,2})$"),
    re.compile(r"^(?P<days>\d+)-(?P<hours>\d{1,2}):(?P<minutes>\d{1,2})$"),
    re.compile(r"^(?P<days>\d+)-(?P<hours>\d{1,2}):(?P<minutes>\d{1,2}):(?P<seconds>\d{1,2})$"),
)
TIME_ALLOWED = 'a Slurm time: "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM" or "D-HH:MM:SS" (or minutes as a number)'


def parse_slurm_time(value: str | int) -> int:
    """A Slurm time limit in seconds, from any form sbatch --time accepts; ValueError naming the allowed forms."""
    text = str(value).strip()
    for form in _TIME_FORMS:
        match = form.match(text)
        if match:
            parts = {key: int(number) for key, number in match.groupdict().items() if number is not None}
            seconds = (
                parts.get("days", 0) * 86400
                + parts.get("hours", 0) * 3600
                + parts.get("minutes", 0) * 60
                + parts.get("seconds", 0)
            )
            if seconds <= 0:
                raise ValueError(f"{value!r} is no time at all")
            return seconds
    raise ValueError(f"{value!r} is not a Slurm time")


def slurm_time(seconds: int) -> str:
    """Seconds as Slurm writes a limit: `D-HH:MM:SS`, or `HH:MM:SS` under a day."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def parse_sbatch_line(line: str) -> tuple[str, str | bool]:
    """`--qos=long` -> ("qos", "long"), `--exclusive` -> ("exclusive", True); ValueError for anything else, or for
    an option mcu-arms sets itself (its own key says how to set it)."""
    match = SBATCH_LINE.match(line.strip())
    if match is None:
        raise ValueError(f"{line!r} is not an sbatch option written as --name=value or --flag")
    name, value = match.group(1), match.group(2)
    if name in RESERVED_SBATCH_OPTIONS:
        key = OWN_KEYS.get(name)
        if key is not None:
            raise ValueError(f"--{name} has its own key: [slurm] {key} (or --slurm-{key.replace('_', '-')})")
        raise ValueError(f"--{name} is set by mcu-arms")
    return name, value if value is not None else True


# The options set one value each, by the arm file or the command line (which wins), in the order a plan shows them.
SINGLE_OPTIONS: tuple[str, ...] = (
    "partition",
    "account",
    "qos",
    "constraint",
    "exclude",
    "mem",
    "gres",
    "cpus",
    "array_throttle",
    "log_dir",
)


class SlurmOptions(BaseModel):
    """Where and how an arm's episodes run on Slurm, as resolved from the campaign, the arm file and the command
    line. Placement only: none of it is in the fingerprint."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = None
    account: str | None = None
    time_s: int = Field(gt=0)  # the job's time limit
    mem: str | None = None  # as sbatch --mem takes it: "8G", "16000M"
    gres: str | None = None  # e.g. "mcslot:1" (a per-node cap on episodes) or "gpu:1"
    cpus: int | None = Field(default=None, ge=1)  # --cpus-per-task
    qos: str | None = None  # --qos
    constraint: str | None = None  # --constraint: node features, e.g. "avx2&ib"
    exclude: str | None = None  # --exclude: nodes never to use, e.g. "node[01-03]"
    array_throttle: int | None = Field(default=None, ge=1)  # at most this many of one array's episodes at once
    log_dir: str | None = None  # the jobs' stdout/stderr go here instead of into each episode directory
    sbatch: list[str] = Field(default_factory=list)  # extra sbatch options, "--name=value" or "--flag"
    setup: list[str] = Field(default_factory=list)  # shell lines the job runs before the episode (module load ...)
    stop_margin_s: int = Field(default=DEFAULT_STOP_MARGIN_S, ge=MIN_STOP_MARGIN_S)

    @property
    def time_minutes(self) -> int:
        """The limit in whole minutes (what sbatch's --time=MINUTES takes), rounded up as Slurm rounds it."""
        return math.ceil(self.time_s / 60)

    def submission_key(self) -> str:
        """Episodes with the same key can share one job array."""
        return self.model_dump_json()

    def shown(self) -> str:
        """One line for the plan: every option that is set."""
        parts = [f"time {slurm_time(self.time_minutes * 60)}"]
        for name in SINGLE_OPTIONS:
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name.replace('_', ' ')} {value}")
        parts.append(f"stop {self.stop_margin_s} s before the limit")
        parts += [f"sbatch {line}" for line in self.sbatch]
        parts += [f"setup `{line}`" for line in self.setup]
        return ", ".join(parts)


class SlurmSettings(BaseModel):
    """What a [slurm] table (an arm's, over its campaign's) and the --slurm-* flags (over both) set; None: not set.
    The flags set no `setup` nor `stop_margin`, and their `sbatch` lines are added to the files'. Unknown keys and
    wrong TOML types are errors (`cpus = "4"` is not coerced)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    partition: str | None = Field(default=None, min_length=1)
    account: str | None = Field(default=None, min_length=1)
    time: str | int | None = None
    mem: str | None = Field(default=None, pattern=r"^[0-9]+[KMGT]?$")
    gres: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_]+(:[A-Za-z0-9_]+)?(:[0-9]+)?(,[A-Za-z0-9_:]+)*$")
    cpus: int | None = Field(default=None, ge=1)
    qos: str | None = Field(default=None, pattern=SLURM_NAME_PATTERN)
    constraint: str | None = Field(default=None, pattern=SLURM_CONSTRAINT_PATTERN)
    exclude: str | None = Field(default=None, pattern=SLURM_NODES_PATTERN)
    array_throttle: int | None = Field(default=None, ge=1)
    log_dir: str | None = Field(default=None, min_length=1)
    sbatch: list[str] = Field(default_factory=list)
    setup: list[str] = Field(default_factory=list)
    stop_margin: int | None = Field(default=None, ge=MIN_STOP_MARGIN_S)

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            parse_slurm_time(value)
        return value

    @field_validator("sbatch")
    @classmethod
    def _sbatch_lines(cls, value: list[str]) -> list[str]:
        for line in value:
            parse_sbatch_line(line)
        return value

    def given(self) -> dict[str, object]:
        return {key: value for key, value in self.model_dump().items() if value not in (None, [])}


class Placement(BaseModel):
    """Where a command was asked to run its episodes."""

    executor: Executor = DEFAULT_EXECUTOR
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)


class SlurmAccounting(BaseModel):
    """What sacct says of an episode's job once it ran (MaxRSS: the largest of its steps)."""

    state: str
    elapsed: str  # "00:12:34"
    max_rss: str | None = None  # "1234567K"
    exit_code: str  # "0:0" (exit code:signal)


class SlurmJob(BaseModel):
    """The Slurm job an episode runs as. `job_id` is the id to ask Slurm about and to cancel: `ARRAY_TASK` for an
    array task (`12_0`; every episode is submitted as a task of an array, one task or many). Written by the
    submitting host (`slurm.json` in the episode) and copied into the report by the episode itself, with the node it
    landed on."""

    job_id: str
    submitted_at: str
    submitted_from: str  # the submitting host
    time_limit_s: int
    stop_margin_s: int = DEFAULT_STOP_MARGIN_S
    name: str | None = None  # the job's name in squeue: `mcu-arms:ARM:seedN`, or the array's `mcu-arms:A+B`
    log: str | None = None  # the job script's own output (its setup lines), relative to the episode when inside it
    stdout: str | None = None  # the episode's stdout on the node, relative to the episode when inside it
    stderr: str | None = None  # the episode's stderr on the node, relative to the episode when inside it
    node: str | None = None  # where it runs: set by the episode when it starts
    raw_job_id: str | None = None  # SLURM_JOB_ID on the node (an array task has its own plain id too)
    restarts: int = 0  # SLURM_RESTART_COUNT when the episode started: a requeue counts up from it
    accounting: SlurmAccounting | str | None = None  # sacct's figures, or ACCOUNTING_UNAVAILABLE

    @property
    def array_job_id(self) -> str | None:
        return self.job_id.split("_", 1)[0] if "_" in self.job_id else None

    @property
    def array_task(self) -> int | None:
        return int(self.job_id.split("_", 1)[1]) if "_" in self.job_id else None


# Slurm's job states (squeue %T, sacct State). Active: the job may still run, or runs now.
SlurmState = str
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
    }
)
TIME_LIMIT_STATES = frozenset({"TIMEOUT", "DEADLINE"})


def state_name(raw: str) -> SlurmState:
    """`CANCELLED by 0` (sacct) -> `CANCELLED`."""
    return raw.strip().split(" ")[0].upper() if raw.strip() else "UNKNOWN"


def is_active(state: SlurmState) -> bool:
    return state in ACTIVE_STATES


# The real values of what an episode's plan.json masks (secret-looking [env] values and the like), for the node that
# runs it: JSON {episode_dir: [[path, value], ...]} in the job's environment (sbatch passes the submitting
# environment on), never in a file of the shared run directory, nor on a command line.
EPISODE_SECRETS_ENV = "MCU_ARMS_EPISODE_SECRETS"
PatchPath = list[str | int]


def masked_values(full: Any, public: Any, path: tuple[str | int, ...] = ()) -> list[tuple[PatchPath, Any]]:
    """Where `public` (a plan as saved, secrets masked) differs from `full` (the plan itself), and the real value
    there."""
    if isinstance(full, dict) and isinstance(public, dict):
        found: list[tuple[PatchPath, Any]] = []
        for key, value in full.items():
            found += masked_values(value, public[key], (*path, key)) if key in public else [([*path, key], value)]
        return found
    if isinstance(full, list) and isinstance(public, list) and len(full) == len(public):
        return [
            entry
            for index, pair in enumerate(zip(full, public, strict=True))
            for entry in masked_values(*pair, (*path, index))
        ]
    return [] if full == public else [(list(path), full)]


def unmasked(public: Any, patch: list[tuple[PatchPath, Any]]) -> Any:
    """`public` with each masked value put back (the inverse of `masked_values`)."""
    data = copy.deepcopy(public)
    for path, value in patch:
        if not path:
            return value
        target = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
    return data
