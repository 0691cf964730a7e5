"""`mcu-arms plan --dry-run` at the size limits: an arm and a campaign of 100,000 seeds are refused (target < 2 s as
a whole `mcu-arms` process), and planning is linear in the episodes it plans (the time per episode at 100 and at
1,000 seeds, and their ratio: ~1 when linear).

    python tests/bench/bench_plan_limits.py

Each is timed in-process (the CLI's own work, not the interpreter's start-up) and as a whole `mcu-arms` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from mcu_arms.cli import app

REFUSAL_TARGET_S = 2.0
ARM = """agent = "random"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = 5
{seeds}

[ports]
green = "auto"
purple = "auto"
"""


def _timed(project: Path, arm: str) -> tuple[float, float, int]:
    """(in-process seconds, whole-process seconds, exit code) of `plan --dry-run --arm ARM`."""
    os.chdir(project)
    started = time.perf_counter()
    outcome = CliRunner().invoke(app, ["plan", "--dry-run", "--arm", arm])
    inside = time.perf_counter() - started
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "plan", "--dry-run", "--arm", arm],
        cwd=project,
        capture_output=True,
        text=True,
    )
    whole = time.perf_counter() - started
    assert done.returncode == outcome.exit_code, (done.stderr, outcome.output)
    return inside, whole, outcome.exit_code


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        os.environ["MCU_ARMS_STATE_DIR"] = str(project / "state")
        (project / "arms").mkdir()
        many = "seeds = [" + ", ".join(str(seed) for seed in range(100_000)) + "]"
        (project / "arms" / "many.toml").write_text(ARM.format(seeds=many))
        (project / "arms" / "small.toml").write_text(ARM.format(seeds=""))
        (project / "arms" / "campaign.toml").write_text(f'name = "campaign"\n{many}\n\n[baseline]\narm = "small"\n')
        for name, what in (("many", "an arm"), ("campaign", "a campaign")):
            inside, whole, code = _timed(project, name)
            print(
                f"100,000 seeds in {what}: exit {code} (refused), {inside:.2f} s in-process, {whole:.2f} s as a "
                f"process -> ratio {whole / REFUSAL_TARGET_S:.2f} of the {REFUSAL_TARGET_S:g} s target"
            )
        per_episode = {}
        for count in (100, 1_000):
            (project / "arms" / f"r{count}.toml").write_text(ARM.format(seeds=f"replicates = {count}"))
            inside, whole, code = _timed(project, f"r{count}")
            per_episode[count] = inside / count
            print(
                f"{count} seeds: exit {code} (planned), {inside:.2f} s in-process "
                f"({per_episode[count] * 1000:.1f} ms an episode), {whole:.2f} s as a process"
            )
        print(
            f"time per episode at 1,000 vs 100 seeds -> ratio {per_episode[1_000] / per_episode[100]:.2f} "
            "(1 when planning is linear)"
        )


if __name__ == "__main__":
    main()
