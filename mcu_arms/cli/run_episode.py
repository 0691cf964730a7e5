"""`mcu-arms run-episode RUN_DIR`: run one queued episode here (what each Slurm job runs on its node)."""

from __future__ import annotations

from pathlib import Path

import typer

from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.process.process_exit import skip_teardown

RUN_EPISODE_HELP = """Run one queued episode here: what each job of `run --executor slurm` runs on its node.

RUN_DIR is an episode directory whose report is `queued` (output/ARM/episode_NNN). The episode is checked against \
this host (JDK 8, Xvfb, codex, CUDA, local disks), its servers get free ports here on loopback, its CODEX_HOME is \
built on this host's disk, and the same supervisor as `run` runs it, writing result.json in RUN_DIR. A queued episode \
submitted as a Slurm job runs only in that job; one that is not queued is refused (an episode runs once). SIGTERM \
stops it: `failed (time limit)` when it comes within the job's stop margin of its time limit, else `interrupted`.

Exit codes: 0 finished, 1 failed, 130 interrupted, 2 a user error (not a queued episode, or not this job's).
"""


def register(app: typer.Typer) -> None:
    @app.command("run-episode", help=RUN_EPISODE_HELP)
    @reports_user_errors
    def run_episode(
        ctx: typer.Context,
        run_dir: Path = typer.Argument(..., help="The episode directory (output/ARM/episode_NNN)."),
        ready_timeout: float | None = typer.Option(
            None, "--ready-timeout", min=1.0, help="Seconds green and purple get to become ready [as for `run`]."
        ),
    ) -> None:
        from mcu_arms.supervise.episode import run_episode as run_here

        skip_teardown()
        timeout = {} if ready_timeout is None else {"ready_timeout_s": ready_timeout}
        raise typer.Exit(run_here(run_dir, environment(ctx), **timeout))
