"""Per-step cost of the green episode loop against a noop purple on the embedded simulator, as a ratio to its floor:
one bare A2A round trip (same observation payload, same client setup) plus one bare simulator step, measured in
the same run. Target: ratio <= 1.25 on a quiet machine. Run on demand:
`python tests/bench/bench_green_loop.py [STEPS] [ROUNDS]`. It also prints where the loop's own time goes (PNG
encode, reply parse and validate, step record and its write), each measured alone on the same frame and reply, and
a second floor: the work no loop can skip (exchange, parse, step, encode) done in sequence with nothing else. Its
excess over the first floor is what alternating between waiting on a socket and computing costs on this host.

The purple is a real `mcu-arms serve purple --agent noop` subprocess; the loop and the bare measurements run in
this process, interleaved over several rounds, and medians are reported (the machine is shared).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server_procs import HOST, ServerProcess, free_port

from mcu_arms.contracts.steps import StepRecord
from mcu_arms.contracts.tasks import select_tasks
from mcu_arms.contracts.wire import InitPayload, ObservationPayload, noop_action
from mcu_arms.green.actions import parse_reply
from mcu_arms.green.observation import encode_png
from mcu_arms.green.task_run import RunSettings, TaskRun, make_simulator, run_off_loop

TASK = ("crafting", "craft_furnace")


def bare_sim_ms(steps: int) -> float:
    simulator = make_simulator("embedded")
    task = select_tasks(*TASK[:1], [TASK[1]])[0]
    simulator.reset(task, 0)
    action = noop_action()
    started = time.perf_counter()
    for _ in range(steps):
        simulator.step(action)
    return (time.perf_counter() - started) * 1000 / steps


async def bare_round_trip_ms(purple_url: str, steps: int, png: bytes) -> float:
    from mcu_arms.a2a_client import client_timeout_for_step, open_client, payload_to_message, send_and_collect

    observation = ObservationPayload(step=0, obs=base64.b64encode(png).decode("ascii"))
    async with open_client(purple_url, client_timeout_for_step(30.0), streaming=False) as client:
        await send_and_collect(client, payload_to_message(InitPayload(prompt="", text="bench"), context_id="b"), 30.0)
        started = time.perf_counter()
        for _ in range(steps):
            await send_and_collect(client, payload_to_message(observation, context_id="b"), 30.0)
        return (time.perf_counter() - started) * 1000 / steps


async def sequence_ms(purple_url: str, steps: int) -> float:
    """Only what every step must do, one after the other: the loop's channel, the reply parsed, a step, a PNG."""
    from mcu_arms.green.task_run import AgentChannel

    simulator = make_simulator("embedded")
    task = select_tasks(*TASK[:1], [TASK[1]])[0]
    png = encode_png(simulator.reset(task, 0).frame)
    async with AgentChannel(purple_url, 30.0) as channel:
        await channel.exchange(InitPayload(prompt="", text=task.text))
        started = time.perf_counter()
        for step in range(steps):
            observation = ObservationPayload(step=step, obs=base64.b64encode(png).decode("ascii"), encoding="png")
            action = parse_reply(await channel.exchange(observation)).action
            png = encode_png(simulator.step(action).frame)
        return (time.perf_counter() - started) * 1000 / steps


async def loop_ms(purple_url: str, steps: int, output_dir: Path, *, save_frames: bool) -> float:
    async def emit(_event: object) -> None:
        return None

    simulator = make_simulator("embedded")
    task = select_tasks(*TASK[:1], [TASK[1]])[0]
    settings = RunSettings(
        max_steps=steps, step_timeout=30.0, seed=0, save_frames=save_frames, progress_every=50, video_eval=False, env={}
    )
    with ThreadPoolExecutor(max_workers=1) as sim_thread:  # as the server runs it: on the simulator thread
        run = TaskRun(task, simulator, purple_url, settings, output_dir, emit)
        metrics = await run_off_loop(run, sim_thread, emit)
    assert metrics.steps_run == steps and metrics.noop_total == 0, metrics.noops
    stamps = [json.loads(line)["t"] for line in (output_dir / "steps.jsonl").open()]
    return (stamps[-1] - stamps[0]) * 1000 / (len(stamps) - 1)


def per_call_ms(work, repeats: int = 300) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        work()
    return (time.perf_counter() - started) * 1000 / repeats


def breakdown(frame, output_dir: Path) -> dict[str, float]:
    """The loop's own per-step work, each part alone: what to cut next."""
    reply = json.dumps({"type": "action", "action_type": "env", "action": {**noop_action(), "camera": [0.0, 0.0]}})
    parsed = parse_reply(reply)
    record = StepRecord(
        step=1,
        t=time.time(),
        received=reply,
        applied={**parsed.action, "camera": [0.0, 0.0]},
        agent_ms=1.0,
        sim_ms=1.0,
        info={"health": 9, "inventory": {"wood": 1}},
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    with (output_dir / "steps.jsonl").open("w", encoding="utf-8") as log:

        def write_record() -> None:
            log.write(record.model_dump_json() + "\n")
            log.flush()

        return {
            "png encode": per_call_ms(lambda: encode_png(frame)),
            "base64 + observation payload": per_call_ms(
                lambda: ObservationPayload(step=1, obs=base64.b64encode(encode_png(frame)).decode()).model_dump_json()
            )
            - per_call_ms(lambda: encode_png(frame)),
            "reply parse + validate": per_call_ms(lambda: parse_reply(reply)),
            "step record + write": per_call_ms(write_record),
        }


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        port = free_port()
        purple = ServerProcess(
            ["serve", "purple", "--agent", "noop", "--host", HOST, "--port", str(port)], root / "purple.log", port
        )
        try:
            purple.wait_ready()
            simulator = make_simulator("embedded")
            frame = simulator.reset(select_tasks(TASK[0], [TASK[1]])[0], 0).frame
            png = encode_png(frame)
            parts = breakdown(frame, root / "breakdown")
            samples: dict[str, list[float]] = {"sim": [], "rtt": [], "sequence": [], "loop": [], "loop_frames": []}
            for index in range(rounds):
                samples["sim"].append(bare_sim_ms(steps))
                samples["rtt"].append(asyncio.run(bare_round_trip_ms(purple.url, steps, png)))
                samples["sequence"].append(asyncio.run(sequence_ms(purple.url, steps)))
                samples["loop"].append(
                    asyncio.run(loop_ms(purple.url, steps, root / f"loop{index}", save_frames=False))
                )
                samples["loop_frames"].append(
                    asyncio.run(loop_ms(purple.url, steps, root / f"frames{index}", save_frames=True))
                )
        finally:
            purple.stop()
    median = {name: statistics.median(values) for name, values in samples.items()}
    floor = median["sim"] + median["rtt"]
    print(f"steps per round {steps}, rounds {rounds}, cpus {os.cpu_count()}, PNG observation {len(png)} bytes")
    for name, values in samples.items():
        print(f"  {name:12s} median {median[name]:7.3f} ms/step  (rounds: {', '.join(f'{v:.3f}' for v in values)})")
    print(f"floor = bare A2A round trip + bare simulator step = {floor:.3f} ms")
    print(f"ratio green loop / floor            = {median['loop'] / floor:.2f}  (target <= 1.25)")
    print(f"ratio green loop with frames / floor = {median['loop_frames'] / floor:.2f}")
    print(
        f"ratio green loop / the same work in sequence = {median['loop'] / median['sequence']:.2f}  "
        f"(alternating socket waits and compute costs {median['sequence'] - floor - parts['png encode']:.3f} "
        "ms/step here beyond the floor and the PNG)"
    )
    overhead = median["loop"] - floor
    print(f"the loop's own cost: {overhead:.3f} ms/step; measured alone, per step:")
    for name, value in parts.items():
        print(f"  {name:30s} {value:6.3f} ms")
    print(f"  {'the rest (scheduling, counters)':30s} {overhead - sum(parts.values()):6.3f} ms")


if __name__ == "__main__":
    main()
