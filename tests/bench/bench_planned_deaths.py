"""Benchmark: how often the planned agent dies on the embedded simulator (deaths per 3000 steps over seeds 0-4).

Run on demand:  python tests/bench/bench_planned_deaths.py [--steps 3000] [--seeds 0 1 2 3 4]
The planned agent plays mine_diamond_from_scratch in-process against the real EmbeddedSimulator; its planner and
decision service are the loopback stand-ins of tests/planned_stubs.py (a fixed good plan; the decision service picks
the executor's first candidate), so what is measured is the executor and its safety layer (vitals, threats, home,
food stock), not a model. Prints deaths and milestones per seed and the deaths per 3000 steps on average. Not a gate:
compare the number before and after a change to the action runner (README: the planned agent).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planned_stubs import GOOD_PLAN, PLANNER_MODEL, POLICY_MODEL, POLICY_REVISION, StubDecisionService, StubPlanner

from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.tasks import TASKS_ROOT, load_task
from mcu_arms.contracts.wire import InitPayload, ObservationPayload
from mcu_arms.green.scoring import RewardTracker
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator
from mcu_arms.purple.planned.agent import PlannedPolicy

TASK_FILE = TASKS_ROOT / "mine_diamond_from_scratch" / "mine_diamond_from_scratch.yaml"
PER_STEPS = 3000


async def episode(seed: int, steps: int, planner_url: str, policy_url: str, output: Path) -> tuple[int, int, float]:
    """One episode: (deaths, milestones reached, steps/s)."""
    task = load_task(TASK_FILE)
    options = PurpleOptions(
        seed=seed,
        output_dir=output,
        planner_base_url=planner_url + "/v1",
        planner_model=PLANNER_MODEL,
        policy_backend="decision_service",
        policy_base_url=policy_url,
        policy_model=POLICY_MODEL,
        policy_revision=POLICY_REVISION,
        policy_timeout=5.0,
    )
    policy = PlannedPolicy(options)
    ack = await policy.init(InitPayload(prompt="", text=task.text))
    if not ack.success:
        raise SystemExit(f"the planned agent refused: {ack.message}")
    sim = EmbeddedSimulator()
    sim.set_frames(False)
    sim.reset(task, seed)
    tracker = RewardTracker(task)
    started = time.perf_counter()
    deaths = 0
    for step in range(steps):
        answer = await policy.act(ObservationPayload(step=step, obs="", state=sim.state()))
        result = sim.step(answer.action)
        tracker.update(step, result.counters)
        deaths = int(result.info.get("deaths", deaths))
        await asyncio.sleep(0)  # background re-plans progress, as on the server's loop
    await policy.close()
    return deaths, len(tracker.reached), steps / (time.perf_counter() - started)


async def main(steps: int, seeds: list[int]) -> None:
    planner, kev = StubPlanner([], next_plan=GOOD_PLAN), StubDecisionService([], late_s=0)
    total = 0
    with contextlib.ExitStack() as stack:
        planner_url, kev_url = stack.enter_context(planner.serving()), stack.enter_context(kev.serving())
        output = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_planned_")))
        for seed in seeds:
            deaths, reached, rate = await episode(seed, steps, planner_url, kev_url, output / f"seed_{seed}")
            total += deaths
            print(f"seed {seed}: {deaths} deaths in {steps} steps, {reached} milestones, {rate:.0f} steps/s")
    per = total / len(seeds) * PER_STEPS / steps
    print(f"deaths per {PER_STEPS} steps, mean over seeds {seeds}: {per:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=PER_STEPS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    arguments = parser.parse_args()
    asyncio.run(main(arguments.steps, arguments.seeds))
