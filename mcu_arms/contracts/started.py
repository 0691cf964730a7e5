"""The private record of what this project started: the only thing `stop`, `status`, the scheduler and `run-episode`
take as naming a process, a cgroup or a Slurm job of ours.

It lives in the user's state dir (mcu_arms/process/private_record.py keeps it, 0700, never through a link), never in
`output/`: `output/` is shared, archived, restored and synced, so what it says is for people, `compare` and the
viewer, and anyone who can write a file there could otherwise aim a signal. Tokens are kept as hashes only.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

# The environment variable that carries an episode's job token into its Slurm job (JSON: episode dir -> token).
EPISODE_TOKENS_ENV = "MCU_ARMS_EPISODE_TOKENS"
# Beside it, the digest of the plan.json the submitting run wrote (JSON: episode dir -> plan_digest): what the job
# runs is that plan, not one written into the episode since.
EPISODE_PLANS_ENV = "MCU_ARMS_EPISODE_PLANS"


def token_hash(token: str) -> str:
    """What the private record keeps of a token: enough to recognise it, nothing to reuse."""
    return hashlib.sha256(token.encode()).hexdigest()


def episode_token_hash(token: str, episode_dir: str) -> str:
    """A job token bound to the one episode directory it was issued for: the same token presented for a copy of the
    episode elsewhere does not match."""
    return hashlib.sha256(f"{episode_dir}\0{token}".encode()).hexdigest()


def plan_digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


class StartedProcess(BaseModel):
    """One process we started, as recorded when it started. `token_hash` is its owner token's (None: the supervising
    `mcu-arms run` itself, recognised by pid and create time); `cgroup` and `cgroup_marker` its own cgroup and the
    marker written into it at creation."""

    model_config = ConfigDict(extra="forbid")

    role: str
    pid: int = Field(gt=0)  # pid 1 may be recorded (a PID namespace's first process) but is never signalled
    create_time: float
    token_hash: str | None = None
    cgroup: str | None = None
    cgroup_marker: str | None = None


class SubmittedJob(BaseModel):
    """An episode given to Slurm: the hash its job's token must match, and the job id once sbatch answered."""

    model_config = ConfigDict(extra="forbid")

    token_hash: str
    job_id: str | None = None


class EpisodeRecord(BaseModel):
    """Everything we started for one episode directory (resolved), kept until it is gone."""

    model_config = ConfigDict(extra="forbid")

    episode_dir: str
    arm: str
    episode: int
    processes: dict[str, StartedProcess] = Field(default_factory=dict)
    slurm: SubmittedJob | None = None
