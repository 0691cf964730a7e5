"""Benchmark: the scripted Crafter player against the random baseline on embedded mine_diamond_from_scratch.

Run on demand:  python tests/bench/bench_agents.py [--steps 10000] [--seeds 0 1 2] [--agents scripted random]
Each policy plays in-process against the real EmbeddedSimulator (no A2A: that cost is measured elsewhere), through
the same env-format actions a served agent sends. Milestones are read from the simulator's MineStudio-style
counters by the real RewardTracker. Prints, per agent and seed, the step each milestone first landed, the average
number reached out of those available, and steps per second (decode and decision included).
Targets: scripted >= 7 of 9 on average, random <= 2.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import time

from PIL import Image

from mcu_arms.contracts.tasks import TASKS_ROOT, load_task
from mcu_arms.contracts.wire import ObservationPayload
from mcu_arms.green.scoring import RewardTracker
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator
from mcu_arms.purple.baselines import RandomPolicy
from mcu_arms.purple.scripted import ScriptedPolicy

TASK_FILE = TASKS_ROOT / "mine_diamond_from_scratch" / "mine_diamond_from_scratch.yaml"
SCRIPTED_TARGET, RANDOM_CEILING = 7.0, 2.0


def _png_base64(frame) -> str:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


async def run_episode(agent: str, seed: int, steps: int) -> tuple[dict[str, int], list[str], float, dict[str, int]]:
    """One episode; returns (milestone -> first step, available milestones, steps/s, simulator fallback counts)."""
    from mcu_arms.contracts.wire import InitPayload

    task = load_task(TASK_FILE)
    simulator = EmbeddedSimulator()
    support = simulator.supports(task)
    tracker = RewardTracker(task, unavailable=support.unavailable)
    policy = ScriptedPolicy(seed=seed) if agent == "scripted" else RandomPolicy(seed=seed)
    await policy.init(InitPayload(prompt=task.text, text=task.text))
    sim_step = simulator.reset(task, seed)
    started = time.perf_counter()
    for step in range(1, steps + 1):
        answer = await policy.act(ObservationPayload(step=step, obs=_png_base64(sim_step.frame)))
        sim_step = simulator.step(answer.action)
        tracker.update(step, sim_step.counters)
    rate = steps / (time.perf_counter() - started)
    available = [entry.identity for entry in task.milestones if entry.identity not in support.unavailable]
    counts = simulator.fallback_counts()
    simulator.close()
    return tracker.reached, available, rate, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--agents", nargs="+", default=["scripted", "random"], choices=["scripted", "random"])
    args = parser.parse_args()
    averages = {}
    for agent in args.agents:
        totals, rates = [], []
        print(f"\n== {agent}: first step of each milestone ({args.steps} steps per seed) ==")
        for seed in args.seeds:
            reached, available, rate, counts = asyncio.run(run_episode(agent, seed, args.steps))
            totals.append(sum(1 for identity in available if identity in reached))
            rates.append(rate)
            cells = "  ".join(f"{identity}={reached.get(identity, '-')}" for identity in available)
            print(f"seed {seed}: {totals[-1]}/{len(available)}  {cells}")
            print(f"        {rate:.1f} steps/s; deaths {counts.get('deaths', 0)}")
        averages[agent] = sum(totals) / len(totals)
        print(f"{agent}: average {averages[agent]:.2f} milestones; {sum(rates) / len(rates):.1f} steps/s")
    if "scripted" in averages:
        print(f"scripted target >= {SCRIPTED_TARGET}: {'met' if averages['scripted'] >= SCRIPTED_TARGET else 'MISSED'}")
    if "random" in averages:
        print(f"random ceiling <= {RANDOM_CEILING}: {'met' if averages['random'] <= RANDOM_CEILING else 'MISSED'}")


if __name__ == "__main__":
    main()
