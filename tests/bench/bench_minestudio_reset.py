"""What each MineStudio reset mode costs, on the stand-in of MineStudio 1.1.6 (tests/fake_minestudio): Minecraft
cannot run here, so the engine-independent costs are counted (world generations, env steps the engine has to run
per reset) and the stand-in's wall time is printed beside them only as the backend's own overhead. On a real engine
a world generation costs seconds to tens of seconds and an env step tens of milliseconds; measure those there.

Run on demand: `python tests/bench/bench_minestudio_reset.py [tasks]`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import namedtuple
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "fake_minestudio"), str(TESTS)]

Partition = namedtuple("Partition", "device mountpoint fstype opts")


def host(folder: Path) -> dict[str, str]:
    from conftest import write_script

    from mcu_arms.green.sims.minestudio import ENGINE_JAR

    bin_dir = folder / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "java", "echo 'openjdk version \"1.8.0_392\"' >&2")
    for tool in ("xvfb-run", "Xvfb", "xauth"):
        write_script(bin_dir, tool, "exit 0")
    (folder / "MineStudio" / ENGINE_JAR).parent.mkdir(parents=True)
    (folder / "MineStudio" / ENGINE_JAR).write_bytes(b"jar")
    return {"PATH": str(bin_dir), "MINESTUDIO_DIR": str(folder / "MineStudio")}


def run(env: dict[str, str], reset_mode: str, tasks: int) -> dict[str, float]:
    from minestudio.simulator import reset_control

    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import noop_action
    from mcu_arms.green.sims.minestudio import MineStudioSimulator

    control = reset_control()
    simulator = MineStudioSimulator(
        env, reset_mode=reset_mode, obs_size=(64, 64), partitions=[Partition("/dev/sda1", "/", "ext4", "rw")]
    )
    reset_ms, steps_per_reset = [], []
    init = ("/give @s minecraft:oak_planks 10", "/summon minecraft:sheep ~2 ~ ~")
    for index in range(tasks):
        task = TaskSpec(name=f"task_{index}", category="mining", text="t", init_commands=init)
        before = control.envs[0].steps_taken if control.envs else 0
        started = time.perf_counter()
        simulator.reset(task, seed=0)
        reset_ms.append((time.perf_counter() - started) * 1000)
        steps_per_reset.append(control.envs[0].steps_taken - before)
        for _ in range(50):
            simulator.step(noop_action() | {"forward": 1, "attack": 1})
    worlds = control.envs[0].hard_resets
    simulator.close()
    return {
        "worlds": worlds,
        "env_steps_per_reset": statistics.fmean(steps_per_reset),
        "first_reset_ms": reset_ms[0],
        "later_reset_ms": statistics.median(reset_ms[1:]),
    }


def main() -> None:
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as folder:
        env = host(Path(folder))
        results = {mode: run(env, mode, tasks) for mode in ("hard", "seeded_fast")}
    print(f"{tasks} tasks, 50 steps each, on the MineStudio stand-in (no engine: counts are what a real one pays)")
    print(f"{'mode':12} {'worlds generated':>17} {'env steps/reset':>16} {'first reset ms':>15} {'later reset ms':>15}")
    for mode, result in results.items():
        print(
            f"{mode:12} {result['worlds']:>17} {result['env_steps_per_reset']:>16.1f} "
            f"{result['first_reset_ms']:>15.2f} {result['later_reset_ms']:>15.2f}"
        )
    hard, fast = results["hard"], results["seeded_fast"]
    print(
        f"hard generates {hard['worlds'] / fast['worlds']:.0f}x the worlds; seeded_fast runs "
        f"{fast['env_steps_per_reset'] - hard['env_steps_per_reset']:.0f} more env steps per reset"
    )


if __name__ == "__main__":
    main()
