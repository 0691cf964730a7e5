"""Episodes for the results browser's tests, written directly as the typed records a run writes.

A real run of a short embedded arm is what the browser tests use (tests/test_view_browser.py); these synthetic ones
cover what a short run cannot (12,000 steps, timeouts, torn logs, codex turns that fail) in milliseconds.
"""

from __future__ import annotations

import json
import math
import random
import struct
import sys
import zlib
from pathlib import Path

from mcu_arms.arms.plan import resolve_settings
from mcu_arms.arms.spec import load_arm
from mcu_arms.contracts.agent_report import (
    TURN_ACTIONS_FILE,
    TURN_EVENTS_FILE,
    TURN_PROMPT_FILE,
    EpisodeReport,
    TurnRecord,
)
from mcu_arms.contracts.evaluation import (
    CategoryResult,
    EvaluationResult,
    MilestoneResult,
    NoopCauseStats,
    SimulatorInfo,
    TaskMetrics,
    VideoResult,
)
from mcu_arms.contracts.run_report import Provenance, RunReport, summarise_evaluation
from mcu_arms.contracts.settings import fingerprint
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES
from mcu_arms.contracts.steps import StepRecord
from mcu_arms.contracts.wire import EvalConfig
from mcu_arms.layout import RunDir, frame_file, steps_log, turn_dir, turn_frame

TASK = "mine_diamond_from_scratch"
LABEL = "embedded (Crafter 1.8.3): a Crafter analogue of MCU, not MCU scores"
ITEMS = ("sapling", "wood", "stone", "coal")
MILESTONE_STEPS = {"mine_log": 30, "crafting_table": 300}


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A flat-colour PNG, standard library only."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def write_arm(project: Path, name: str, *, agent: str, steps: int, save_frames: bool) -> Path:
    path = project / "arms" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'agent = "{agent}"\ntask = "{TASK}"\nsimulator = "embedded"\nseed = 0\nsteps = {steps}\n'
        f"step_timeout = 30\nsave_frames = {'true' if save_frames else 'false'}\n\n"
        '[ports]\ngreen = "auto"\npurple = "auto"\n',
        encoding="utf-8",
    )
    return path


def step_records(steps: int, seed: int = 1) -> list[StepRecord]:
    """A plausible episode: vitals that fall and recover, items gathered, deaths, bursts of noops, a timeout."""
    rnd = random.Random(seed)
    health = food = 9
    deaths = 0
    inventory = dict.fromkeys(ITEMS, 0)
    burst = 0
    records = []
    for step in range(steps):
        if rnd.random() < 0.01:
            health = max(0, health - rnd.randint(1, 3))
        elif health < 9 and rnd.random() < 0.02:
            health += 1
        if health == 0:
            deaths += 1
            health, food, inventory = 9, 9, dict.fromkeys(ITEMS, 0)
        if rnd.random() < 0.004:
            food = max(0, food - 1)
        for index, item in enumerate(ITEMS):
            if rnd.random() < 0.004 / (index + 1):
                inventory[item] = min(9, inventory[item] + 1)
        if not burst and rnd.random() < 0.004:
            burst = rnd.randint(1, 20)
        cause, agent_ms = None, rnd.lognormvariate(math.log(800), 0.4)
        if burst:
            burst -= 1
            cause = rnd.choice(("timeout", "invalid_action"))
            if cause == "timeout":
                agent_ms = 600_000.0
        identity = next((m for m, s in MILESTONE_STEPS.items() if s == step), None)
        records.append(
            StepRecord(
                step=step,
                t=1_800_000_000 + step * 0.5,
                received=None if cause == "timeout" else json.dumps({"type": "action", "action": {"forward": 1}}),
                applied={"forward": 0 if cause else 1, "attack": 0, "camera": [0.0, 0.0]},
                noop_cause=cause,
                reason={"timeout": "no answer within 600 s", "invalid_action": "unknown key 'fly'"}.get(
                    cause or "", ""
                ),
                agent_ms=round(agent_ms, 1),
                sim_ms=round(rnd.uniform(2, 6), 2),
                reward=1.0 if identity else 0.0,
                events=[{"identity": identity, "kind": "milestone"}] if identity else [],
                no_effect=["jump"] if step % 50 == 7 else [],
                info={
                    "health": health,
                    "food": food,
                    "drink": 9,
                    "energy": 9,
                    "deaths": deaths,
                    "inventory": {k: v for k, v in inventory.items() if v},
                },
            )
        )
    return records


def turn_records(steps: int, every: int) -> list[TurnRecord]:
    """A turn every `every` steps; every tenth one times out."""
    records = []
    for turn, step in enumerate(range(0, steps, every), start=1):
        failed = turn % 10 == 0
        records.append(
            TurnRecord(
                turn=turn,
                step=step,
                session=turn,
                thread_id=f"thread-{turn}",
                resumed=False,
                outcome="timeout" if failed else "ok",
                rc=124 if failed else 0,
                reason="timed out after 590.0 s" if failed else None,
                latency_s=590.0 if failed else 2.5,
                prompt_bytes=900,
                frame_bytes=2000,
                rollout_bytes_before=0,
                rollout_bytes_after=4000,
                payload_bytes=2900,
                frames_in_session=1,
                actions_queued=0 if failed else every,
                compactions_in_thread=0,
            )
        )
    return records


def write_episode(
    project: Path,
    arm: str,
    *,
    steps: int,
    agent: str = "worldmodel",
    frames: bool = True,
    turn_every: int = 4,
    episode: int = 1,
) -> RunDir:
    """One finished run of `arm` with a step log, an evaluation, a report and (codex agents) its turns."""
    source = write_arm(project, arm, agent=agent, steps=steps, save_frames=frames)
    settings, compaction = resolve_settings(load_arm(source), [])
    run_dir = RunDir(project / "output" / arm / f"episode_{episode:03d}")
    run_dir.logs.mkdir(parents=True)
    records = step_records(steps)
    log = steps_log(run_dir.green, TASK)
    log.parent.mkdir(parents=True)
    log.write_text("".join(record.model_dump_json() + "\n" for record in records), encoding="utf-8")
    if frames:
        colours = [png(128, 128, (40 * k % 256, 120, 255 - 40 * k % 256)) for k in range(7)]
        frame_file(run_dir.green, TASK, 0).parent.mkdir()
        for step in range(steps + 1):
            frame_file(run_dir.green, TASK, step).write_bytes(colours[step % len(colours)])
    noops: dict[str, NoopCauseStats] = {}
    run = longest = 0
    for record in records:
        if record.noop_cause:
            noops.setdefault(record.noop_cause, NoopCauseStats()).record(record.step, record.reason)
        run = run + 1 if record.noop_cause in INFRASTRUCTURE_CAUSES else 0
        longest = max(longest, run)
    milestones = [
        MilestoneResult(identity=m, step=s if s < steps else None, available=True) for m, s in MILESTONE_STEPS.items()
    ]
    metrics = TaskMetrics(
        max_score=100.0,
        sim_score=float(sum(m.step is not None for m in milestones)),
        score=10.0,
        category=TASK,
        scoring_kind="milestones",
        scored=True,
        score_source="milestones",
        milestones=milestones,
        steps_run=steps,
        max_steps=steps,
        noops=noops,
        noop_total=sum(s.count for s in noops.values()),
        sim_fallbacks={"deaths": records[-1].info["deaths"]},
        dropped_keys={"chat": 3},
        video=VideoResult(status="skipped"),
        longest_infrastructure_run=longest,
        infrastructure_noops=sum(s.count for c, s in noops.items() if c in INFRASTRUCTURE_CAUSES),
        no_effect_steps=sum(1 for record in records if record.no_effect),
    )
    evaluation = EvaluationResult(
        participants={"agent": "http://127.0.0.1:1/"},
        results=[CategoryResult.of(TASK, {TASK: metrics}, [])],
        simulator=SimulatorInfo(name="embedded", version="1.8.3", label=LABEL),
        seed=0,
        max_steps=steps,
        config=EvalConfig(task_category=TASK, simulator="embedded"),
        started_at="2026-11-30T12:00:00+00:00",
        finished_at="2026-11-30T13:00:00+00:00",
        duration_s=3600.0,
        output_dir=str(run_dir.green),
    )
    run_dir.evaluation.write_text(evaluation.model_dump_json(), encoding="utf-8")
    report = RunReport(
        status="finished",
        arm=arm,
        episode=episode,
        source=str(source),
        fingerprint=fingerprint(settings),
        settings=settings,
        compaction_limit=compaction.limit,
        provenance=Provenance(
            mcu_arms_version="0.1.0",
            git_sha=None,
            git_dirty=None,
            python=sys.version.split()[0],
            packages={},
            host="test",
            platform="test",
        ),
        started_at="2026-11-30T12:00:00+00:00",
        finished_at="2026-11-30T13:00:00+00:00",
        wall_s=3600.0,
    )
    report.alerts = summarise_evaluation(report, evaluation, run_dir.relative(run_dir.evaluation))  # as `run` does
    run_dir.write_report(report)
    if agent in ("worldmodel", "prolong"):
        write_turns(run_dir, steps, turn_every)
    return run_dir


def write_turns(run_dir: RunDir, steps: int, every: int) -> None:
    task_dir = run_dir.purple / "task_01"
    turns = turn_records(steps, every)
    for record in turns:
        folder = turn_dir(task_dir, record.turn)
        folder.mkdir(parents=True)
        (folder / TURN_PROMPT_FILE).write_text(
            f"prompt of turn {record.turn} at step {record.step}\n", encoding="utf-8"
        )
        if record.outcome == "ok":
            (folder / TURN_ACTIONS_FILE).write_text(json.dumps([{"forward": 1}] * every), encoding="utf-8")
            answer = {"type": "item.completed", "item": {"type": "agent_message", "text": f"plan {record.turn}"}}
            (folder / TURN_EVENTS_FILE).write_text(json.dumps(answer) + "\n", encoding="utf-8")
        frame = turn_frame(task_dir, record.step)
        frame.parent.mkdir(exist_ok=True)
        frame.write_bytes(png(128, 128, (200, 200, 0)))
    (task_dir / "memory").mkdir()
    (task_dir / "memory" / "hypotheses.json").write_text('{"h1": "trees give wood"}', encoding="utf-8")
    (task_dir / "logs.txt").write_text("task: mine diamond\n", encoding="utf-8")
    episode = EpisodeReport(
        task_dir=str(task_dir),
        task="mine diamond",
        started_at="2026-11-30T12:00:00+00:00",
        turns=len(turns),
        turn_records=turns,
        failed_turns_by_reason={"timeout": sum(t.outcome != "ok" for t in turns)},
    )
    (task_dir / "agent_report.json").write_text(episode.model_dump_json(), encoding="utf-8")
