"""What every child of a run starts with: the environment it is built on, and the variable that marks it ours."""

from __future__ import annotations

from collections.abc import Mapping

# Set to a fresh token in each child's environment: every descendant inherits it, so the ones that left the child's
# process group or outlived it (reparented away) are still found, and proven ours, when the child is stopped.
OWNER_TOKEN_ENV = "MCU_ARMS_OWNER_TOKEN"
# Given to every child unless its environment says otherwise: one BLAS thread per process. Episodes run side by side,
# a process per role, and numpy's OpenBLAS would start a spinning thread per core in each (measured: two scripted
# episodes at once on two cores, 73 ms a step instead of 13; one episode alone, 14 instead of 12.5).
CHILD_ENV_DEFAULTS = {"OPENBLAS_NUM_THREADS": "1"}


def inherited_environment(base_env: Mapping[str, str]) -> dict[str, str]:
    """What every child's environment is built on (a child adds its plan's, its secrets and its token)."""
    return {**CHILD_ENV_DEFAULTS, **base_env}
