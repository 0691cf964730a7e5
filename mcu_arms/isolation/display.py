"""A private X display for one MineStudio episode: its own Xvfb, which picks a free display number itself.

MineStudio 1.1.6 always renders under `xvfb-run -a`, which probes for a free display number by lock file and so can
hand two episodes starting on one node at the same moment the same number. Here Xvfb is started with `-displayfd`
(it takes a number no other server holds and writes it back on a pipe), and the green gets DISPLAY and, first on
its PATH, an `xvfb-run` that runs its command on that display instead of starting another server. The Xvfb is this
episode's child, in its own process group, stopped by pid when the episode ends.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psutil

from mcu_arms.contracts.errors import UserError
from mcu_arms.process.procs import stop_process_group

DISPLAY_WAIT_S = 30.0
SCREEN = "1280x720x24"
# Runs the command on the display already in DISPLAY; xvfb-run's own options (-a, -n N, -s ARGS, ...) are dropped.
XVFB_RUN_SHIM = """#!/bin/sh
# Written by mcu-arms: this episode's own Xvfb is already up on $DISPLAY; run the command there.
while [ $# -gt 0 ]; do
  case $1 in
    -n|-s|-f|-e|-p|-w|--server-num|--server-args|--auth-file|--error-file|--xauth-protocol|--wait) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""


def _display_number(read_fd: int, process: subprocess.Popen, log: Path) -> str:
    """The number Xvfb writes on the -displayfd pipe once it listens (bounded wait)."""
    deadline = time.monotonic() + DISPLAY_WAIT_S
    text = b""
    while not text.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
            raise UserError(
                f"Xvfb gave no display within {DISPLAY_WAIT_S:g} s (exit code {process.poll()}): {' | '.join(tail)}",
                key="Xvfb",
            )
        ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(read_fd, 64)
            if not chunk:
                continue
            text += chunk
    return text.decode().strip()


@contextmanager
def private_display(env: Mapping[str, str], scratch: Path) -> Iterator[dict[str, str]]:
    """Start a private Xvfb; yields the variables the green runs with (DISPLAY, and PATH with the xvfb-run that uses
    it). `scratch` is a directory on this host's disk for the shim and Xvfb's log."""
    xvfb = shutil.which("Xvfb", path=env.get("PATH"))
    if xvfb is None:
        raise UserError("Xvfb is not on PATH", key="Xvfb", allowed="apt-get install xvfb xauth")
    scratch.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="display-", dir=scratch))
    log = folder / "Xvfb.log"
    read_fd, write_fd = os.pipe()
    try:
        with log.open("ab") as output:
            process = subprocess.Popen(
                [xvfb, "-displayfd", str(write_fd), "-nolisten", "tcp", "-screen", "0", SCREEN, "-noreset"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                pass_fds=(write_fd,),
                start_new_session=True,
                env=dict(env),
            )
        os.close(write_fd)
        write_fd = -1
        try:
            created: float | None = psutil.Process(process.pid).create_time()
        except psutil.Error:  # it exited at once: _display_number says how
            created = None
        try:
            number = _display_number(read_fd, process, log)
            shim = folder / "bin" / "xvfb-run"
            shim.parent.mkdir()
            shim.write_text(XVFB_RUN_SHIM)
            shim.chmod(0o755)
            yield {"DISPLAY": f":{number}", "PATH": f"{shim.parent}{os.pathsep}{env.get('PATH', '')}"}
        finally:
            stop_process_group(process.pid, created, grace_s=5.0, popen=process)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
        shutil.rmtree(folder, ignore_errors=True)
