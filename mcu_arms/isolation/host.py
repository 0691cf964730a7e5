"""Facts about this host that decide whether an arm can run safely here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

from mcu_arms.contracts.simulators import simulator_descriptor

NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb", "smb3", "smbfs", "afs", "ceph", "glusterfs", "lustre", "9p")
# Filesystems a cluster's nodes mount from one place, so that a path means the same files on each.
SHARED_FILESYSTEMS = NETWORK_FILESYSTEMS + ("gpfs", "beegfs", "wekafs", "pvfs2", "orangefs", "panfs", "virtiofs")


def filesystem_type(path: Path, partitions: Iterable[Any] | None = None) -> str:
    """The type of the filesystem holding `path` (or its nearest existing parent): the longest mount containing it."""
    probe = Path(os.path.realpath(path))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    best, fstype = "", "unknown"
    for partition in psutil.disk_partitions(all=True) if partitions is None else partitions:
        mount = partition.mountpoint
        inside = str(probe) == mount or str(probe).startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best):
            best, fstype = mount, partition.fstype
    return fstype


def network_filesystem_reason(path: Path, partitions: Iterable[Any] | None = None) -> str | None:
    """Why `path` is unsafe for sqlite (a network or FUSE filesystem), or None when it is local disk."""
    fstype = filesystem_type(path, partitions)
    if fstype in NETWORK_FILESYSTEMS or fstype.startswith("fuse"):
        return (
            f'{path} is on a {fstype} filesystem: sqlite fails there ("cannot rollback - no transaction is '
            'active"); use local disk'
        )
    return None


def shared_filesystem(path: Path, partitions: Iterable[Any] | None = None) -> tuple[bool, str]:
    """(whether the nodes of a cluster can see `path` as this host does, the filesystem type) by its type alone."""
    fstype = filesystem_type(path, partitions)
    return fstype in SHARED_FILESYSTEMS or fstype.startswith("fuse"), fstype


def host_parallelism(plans: Iterable[Any]) -> int:
    """How many of these episodes this host can run at once, by what their simulators' descriptors say one costs:
    its cores, and where a simulator caps how many share a host (MineStudio: Xvfb + llvmpipe render on the CPU),
    that cap and the memory of the costliest one for each."""
    costs = [simulator_descriptor(plan.settings.simulator).cost for plan in plans]
    cores = (os.cpu_count() or 1) // max((cost.cores for cost in costs), default=1)
    capped = [cost for cost in costs if cost.most_per_host is not None]
    if not capped:
        return max(1, cores)
    memory = psutil.virtual_memory().available // max(cost.memory_bytes for cost in capped)
    return max(1, min(cores, memory, *(cost.most_per_host or cores for cost in capped)))


def unwritable_reason(path: Path) -> str | None:
    """Why this user cannot create or write `path` (a directory a tool will `makedirs` and write into), or None."""
    probe = Path(os.path.realpath(path))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return (
            f"{probe} is not writable by this user"
            if probe == Path(os.path.realpath(path))
            else (f"{path} does not exist and its parent {probe} is not writable by this user")
        )
    return None
