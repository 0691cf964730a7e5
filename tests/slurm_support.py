"""A Slurm cluster for the tests that need one: the one .ci/run started (MCU_ARMS_TEST_SLURM_CONF names its
slurm.conf), else one started here for the session when this is root and Slurm is installed (stopped by pid at the
end, by the same script), else the tests skip, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from server_procs import free_port

SLURM_CONF_ENV = "MCU_ARMS_TEST_SLURM_CONF"
CLUSTER_SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "slurm-cluster.sh"
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "srun")
START_TIMEOUT_S = 120


def _answers(conf: str) -> bool:
    try:
        done = subprocess.run(
            ["scontrol", "ping"], env={**os.environ, "SLURM_CONF": conf}, capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "UP" in done.stdout


@contextmanager
def slurm_cluster(scratch: Path) -> Iterator[str]:
    """Yields the SLURM_CONF of a running single-node cluster (partition `ci`, GRES mcslot:2)."""
    given = os.environ.get(SLURM_CONF_ENV)
    if given:
        if not _answers(given):
            pytest.fail(f"{SLURM_CONF_ENV}={given}, but its slurmctld does not answer `scontrol ping`")
        yield given
        return
    if os.geteuid() != 0:
        pytest.skip(f"no Slurm cluster: set {SLURM_CONF_ENV} (.ci/run starts one), or run as root to start one")
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        pytest.skip(
            f"no Slurm cluster: {', '.join(missing)} not installed (apt-get install slurm-wlm munge; .ci/run does it)"
        )
    directory = scratch / "slurm"
    knobs = {"CTLD_PORT": str(free_port()), "SLURMD_PORT": str(free_port()), "KILLWAIT": "10"}
    env = {**os.environ, **knobs}
    try:
        started = subprocess.run(
            [str(CLUSTER_SCRIPT), "start", str(directory)],
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
        if started.returncode != 0:
            pytest.fail(f"the test cluster did not start:\n{started.stdout}{started.stderr}")
        yield str(directory / "slurm.conf")
    finally:
        subprocess.run([str(CLUSTER_SCRIPT), "stop", str(directory)], env=env, capture_output=True, timeout=120)
