"""Benchmark of the embedded (Crafter) simulator: construction, reset (first and later) and steps per second, with
and without the structured state (`observe = "state"` reads one GameState per step; the target is >= 400 steps/s).

Run on demand: `python tests/bench/bench_embedded.py [steps]`. The same worlds are also made by crafter's own
generator (opensimplex called per point: pure Python, or numba's kernel where numba is installed), so the speed-up
of the crafter world generator's grid noise is a ratio measured in one run.
"""

from __future__ import annotations

import importlib.util
import json
import random
import statistics
import subprocess
import sys
import time

RESET_SCRIPT = """
import json, time
t0 = time.perf_counter()
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator
from mcu_arms.contracts.tasks import TaskSpec
sim = EmbeddedSimulator()
task = TaskSpec(name="bench", category="crafting", text="bench")
t1 = time.perf_counter()
sim.reset(task, seed=0)
t2 = time.perf_counter()
later = []
for seed in range(1, 6):
    start = time.perf_counter()
    sim.reset(task, seed=seed)
    later.append(time.perf_counter() - start)
print(json.dumps({"construct_s": t1 - t0, "first_reset_s": t2 - t1, "later_resets_s": later}))
"""


def time_resets() -> dict:
    result = subprocess.run(
        [sys.executable, "-c", RESET_SCRIPT], capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(result.stdout)


def time_world_generators(seeds: range) -> tuple[float, float]:
    """Median seconds a world of ours and of crafter's own generator, alternating on the same seeds."""
    from crafter import constants, engine, objects, worldgen

    from mcu_arms.green.sims.crafter.worldgen import generate_world

    timings: dict[object, list[float]] = {generate_world: [], worldgen.generate_world: []}
    for seed in seeds:
        for generator, spent in timings.items():
            world = engine.World((64, 64), constants.materials, (12, 12))
            world.reset(seed=seed)
            player = objects.Player(world, (32, 32))
            world.add(player)
            start = time.perf_counter()
            generator(world, player)
            spent.append(time.perf_counter() - start)
    return statistics.median(timings[generate_world]), statistics.median(timings[worldgen.generate_world])


def time_steps(steps: int) -> tuple[float, float, dict[str, int]]:
    """Steps/s of two simulators fed the same actions in lockstep, so that both rates see the same host load: one
    renders frames (what a frame arm needs), the other renders none and reads and serialises a GameState per step
    (an arm with observe = "state" and save_frames = false)."""
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import BUTTON_KEYS, noop_action
    from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator

    task = TaskSpec(name="bench", category="crafting", text="bench")
    framed, stated = EmbeddedSimulator(), EmbeddedSimulator()
    stated.set_frames(False)
    framed.reset(task, seed=0)
    stated.reset(task, seed=0)
    rng = random.Random(0)
    actions = []
    for _ in range(steps):
        action = noop_action()
        for key in rng.sample(BUTTON_KEYS, 2):
            action[key] = 1
        action["camera"] = (rng.choice((0.0, 0.0, 10.0)), 0.0)
        actions.append(action)
    framed_s = stated_s = 0.0
    for action in actions:
        start = time.perf_counter()
        framed.step(action)
        middle = time.perf_counter()
        stated.step(action)
        stated.state().model_dump_json()  # what the green sends in the observation
        framed_s += middle - start
        stated_s += time.perf_counter() - middle
    return steps / framed_s, steps / stated_s, framed.fallback_counts()


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    resets = time_resets()
    ours, crafters = time_world_generators(range(1, 6))
    backend = "numba" if importlib.util.find_spec("numba") else "pure Python"
    rate, state_rate, fallbacks = time_steps(steps)
    print(f"construct (import + textures):      {resets['construct_s']:.3f} s")
    print(f"first reset:                        {resets['first_reset_s']:.3f} s")
    print(f"later resets (median of 5):         {statistics.median(resets['later_resets_s']):.4f} s")
    print(f"a world, crafter/worldgen.py (median): {ours:.4f} s")
    print(f"a world, crafter's generator:       {crafters:.4f} s (opensimplex per point, {backend})")
    print(f"world speed-up:                     {crafters / ours:.1f}x")
    print(f"steps/s ({steps} steps, 2 random keys + camera each): {rate:.0f}")
    print(
        f'steps/s with observe = "state" (no frame; a GameState read and serialised each step): '
        f"{state_rate:.0f} ({state_rate / rate:.2f}x the framed rate; target >= 400)"
    )
    print(f"fallback counts over those steps: {fallbacks}")


if __name__ == "__main__":
    main()
