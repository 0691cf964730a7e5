"""`mcu-arms acceptance minestudio`: the first-run checklist of a MineStudio host, run and written down.

What the stand-in (tests/fake_minestudio) cannot prove, this proves on the host that will run the arms, in one go of
a few minutes (four engine launches): MineStudio imports as the green imports it; the raw 1.1.6 simulator gives the
image shape, info keys, statistic names and camera sign the backend assumes; two seeded hard resets give the same
first frame (without which no task start is reproducible); an engine killed mid-step is replaced and nothing of it
is left running; a seeded_fast start lands and settles; STEVE-1 loads offline and samples the same actions twice
from one seed; and video evaluation grades MineStudio's recording at MCU's 640x360.

Each check is passed, failed or skipped (with the reason), with its evidence. When `minestudio` is the test suite's
stand-in, the engine checks that hold say "stand-in", never "passed": the stand-in proves the checks run, not the host.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.contracts.wire import noop_action

CheckStatus = Literal["passed", "failed", "skipped", "stand-in"]
BUDGET_S = 540.0  # the whole checklist, so that it ends within 10 minutes with the report written
RAW_CALL_TIMEOUT_S = 240.0  # one raw reset (a Java launch) or a batch of steps
BACKEND_RESET_TIMEOUT_S = 240.0
STAND_IN_SUFFIX = "+fake"
OBS_SIZE = (128, 128)
MCU_RENDER = (640, 360)
ATTACK_STEPS = 100
SETTLE_STEPS = 20
RECORDED_STEPS = 40
STEVE1_FRAMES = 50
SEED = 0
GONE_WITHIN_S = 10.0  # how long a killed engine process may take to be gone
STAT_CATEGORIES = (
    "use_item",
    "pickup",
    "break_item",
    "craft_item",
    "mine_block",
    "damage_dealt",
    "custom",
    "kill_entity",
)
EXPECTED_INFO = ("pov", "health", "food_level", "is_gui_open", "player_pos", "location_stats", *STAT_CATEGORIES)
TASKS = tuple(TaskSpec(name=name, category="acceptance", text="look around") for name in ("first", "second", "third"))


class AcceptanceCheck(BaseModel):
    name: str
    status: CheckStatus
    evidence: list[str] = Field(default_factory=list)  # what was measured, whichever way it went
    seconds: float = 0.0


class AcceptanceReport(BaseModel):
    """One run of the checklist on one host."""

    simulator: Literal["minestudio"] = "minestudio"
    minestudio_version: str | None = None
    stand_in: bool = False
    started_at: str
    finished_at: str = ""
    checks: list[AcceptanceCheck] = Field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [check.name for check in self.checks if check.status == "failed"]

    def text(self) -> str:
        lines = [
            f"mcu-arms acceptance minestudio ({self.minestudio_version or 'not importable'}"
            f"{', the test stand-in' if self.stand_in else ''}), {self.started_at} .. {self.finished_at}"
        ]
        for check in self.checks:
            lines.append(f"{check.status.upper():9} {check.name} ({check.seconds:.1f} s)")
            lines += [f"          {line}" for line in check.evidence]
        verdict = f"FAILED: {', '.join(self.failed)}" if self.failed else "no check failed"
        return "\n".join([*lines, verdict]) + "\n"


class _Failed(Exception):
    """A check's assertion that did not hold; its message is the evidence."""


class _Skipped(Exception):
    """A check that cannot run here; its message says why."""


class _Run:
    """The checklist's shared state: the environment, the deadline, and whether the package is the stand-in."""

    def __init__(self, env: Mapping[str, str], out_dir: Path, budget_s: float) -> None:
        self.env = dict(env)
        self.out_dir = out_dir
        self.deadline = time.monotonic() + budget_s
        self.stand_in = False
        self.frames_for_steve1: list[Any] = []

    def engine_status(self) -> CheckStatus:
        return "stand-in" if self.stand_in else "passed"


def _check(run: _Run, name: str, body: Callable[[list[str]], None], *, engine: bool = True) -> AcceptanceCheck:
    evidence: list[str] = []
    started = time.monotonic()
    status: CheckStatus
    if time.monotonic() > run.deadline:
        status = "skipped"
        evidence.append("out of time: the checklist's budget was spent by the checks before")
    else:
        try:
            body(evidence)
            status = run.engine_status() if engine else "passed"
        except _Skipped as skipped:
            status = "skipped"
            evidence.append(str(skipped))
        except _Failed as failed:
            status = "failed"
            evidence.append(str(failed))
        except Exception as error:  # a check that raises has failed; the report says how
            status = "failed"
            evidence.append(f"{type(error).__name__}: {error}")
    return AcceptanceCheck(name=name, status=status, evidence=evidence, seconds=round(time.monotonic() - started, 1))


def _within(timeout_s: float, fn: Callable[[], Any], what: str) -> Any:
    """`fn` on a worker thread, given up after `timeout_s` (the raw simulator has no timeouts of its own)."""
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="acceptance")
    try:
        return worker.submit(fn).result(timeout=timeout_s)
    except FutureTimeout:
        raise _Failed(f"{what} did not finish within {timeout_s:.0f} s") from None
    finally:
        worker.shutdown(wait=False, cancel_futures=True)


# --- the checks ----------------------------------------------------------------------------------------------------


def check_import(run: _Run, evidence: list[str]) -> None:
    """As the green will (a child interpreter, the same imports), then every host requirement of the backend."""
    from mcu_arms.green.sims.minestudio import host_checks, import_check

    imported = import_check(run.env)
    evidence.append(f"{imported.status}: {imported.detail}")
    if imported.status != "ok":
        raise _Failed(f"the green could not import minestudio ({imported.fix})")
    import minestudio

    run.stand_in = str(getattr(minestudio, "__version__", "")).endswith(STAND_IN_SUFFIX)
    requirements = [check for check in host_checks(run.env) if check.name != imported.name]
    failing = [check for check in requirements if check.status == "fail"]
    evidence += [f"{check.name}: {check.status}: {check.detail}" for check in requirements]
    if failing:
        raise _Failed("host requirements missing: " + "; ".join(f"{c.name} ({c.fix})" for c in failing))


def _raw_sim() -> Any:
    from minestudio.simulator import MinecraftSim

    return MinecraftSim(action_type="env", obs_size=OBS_SIZE, render_size=MCU_RENDER, seed=SEED, callbacks=[])


def _step(sim: Any, **pressed: Any) -> tuple[Any, dict]:
    import numpy as np

    action = sim.env.action_space.no_op()
    for key, value in pressed.items():
        action[key] = np.array(value, dtype=np.float32) if key == "camera" else value
    obs, _reward, _terminated, _truncated, info = sim.step(action)
    return obs, info


def check_raw_smoke(run: _Run, sim: Any, evidence: list[str]) -> None:
    import numpy as np

    started = time.monotonic()
    obs, info = _within(RAW_CALL_TIMEOUT_S, sim.reset, "the first raw reset (Java launch)")
    evidence.append(f"first reset took {time.monotonic() - started:.1f} s")
    image = obs["image"]
    evidence.append(f"image {image.shape} {image.dtype}, mean {float(image.mean()):.1f}")
    problems = []
    if image.shape != (OBS_SIZE[1], OBS_SIZE[0], 3) or image.dtype != np.uint8:
        problems.append(f"image is {image.shape} {image.dtype}, expected {(OBS_SIZE[1], OBS_SIZE[0], 3)} uint8")
    if float(image.mean()) < 1.0:
        problems.append("the first image is black")
    missing = [key for key in EXPECTED_INFO if key not in info]
    evidence.append(f"info keys: {', '.join(sorted(info))}")
    if missing:
        problems.append(f"info lacks {', '.join(missing)}")

    def attack() -> dict:
        latest: dict = {}
        for _ in range(ATTACK_STEPS):
            _obs, latest = _step(sim, attack=1)
        return latest

    info = _within(RAW_CALL_TIMEOUT_S, attack, f"{ATTACK_STEPS} attack steps")
    mined = sorted(name for name, count in dict(info.get("mine_block", {})).items() if count)
    evidence.append(f"after {ATTACK_STEPS} attack steps, mine_block: {mined or 'nothing'}")
    if any(name.startswith("minecraft:") for name in mined):
        problems.append("statistic names carry a 'minecraft:' prefix; the backend expects none")
    run.frames_for_steve1 = [obs["image"]]

    def turned(camera: tuple[float, float]) -> tuple[float, float]:
        before = dict(sim.info["player_pos"])
        _obs, after = _step(sim, camera=camera)
        return (
            float(after["player_pos"]["pitch"]) - float(before["pitch"]),
            (float(after["player_pos"]["yaw"]) - float(before["yaw"]) + 180.0) % 360.0 - 180.0,
        )

    yaw_turn = _within(RAW_CALL_TIMEOUT_S, lambda: turned((0.0, 90.0)), "a camera step")[1]
    pitch_turn = _within(RAW_CALL_TIMEOUT_S, lambda: turned((10.0, 0.0)), "a camera step")[0]
    evidence.append(f"camera [0, 90] turned yaw by {yaw_turn:+.1f}; camera [10, 0] turned pitch by {pitch_turn:+.1f}")
    if abs(yaw_turn - 90.0) > 1.0:
        problems.append(f"camera [0, 90] turned yaw by {yaw_turn:+.1f}, expected +90")
    if pitch_turn <= 0:
        problems.append(f"camera [10, 0] turned pitch by {pitch_turn:+.1f}: the pitch sign differs from the backend's")
    if problems:
        raise _Failed("; ".join(problems))


def check_seeded_hard_resets(run: _Run, sim: Any, evidence: list[str]) -> None:
    import hashlib

    starts = []
    for attempt in (1, 2):
        sim.env.seed(SEED)
        sim.already_reset = False
        obs, info = _within(RAW_CALL_TIMEOUT_S, sim.reset, f"seeded hard reset {attempt}")
        digest = hashlib.sha256(obs["image"].tobytes()).hexdigest()[:16]
        position = {key: round(float(value), 2) for key, value in dict(info["player_pos"]).items()}
        starts.append((digest, position))
        evidence.append(f"hard reset {attempt} with seed {SEED}: first frame {digest}, player_pos {position}")
    if starts[0] != starts[1]:
        raise _Failed(
            "two seeded hard resets started differently: a task's start is not reproducible on this host, "
            "whatever the project does"
        )


def check_recording_and_crash(run: _Run, evidence: list[str], video: list[str]) -> None:
    """One backend instance: task 1 recorded (its video is graded by the next check), an engine killed during task
    2's step, task 3 on a replaced instance, then closed, and every engine process it had must be gone."""
    import psutil

    from mcu_arms.green.sims.base import SimulatorUnavailable
    from mcu_arms.green.sims.minestudio import MineStudioSimulator, _engine_processes

    simulator = MineStudioSimulator(run.env, obs_size=OBS_SIZE, reset_timeout_s=BACKEND_RESET_TIMEOUT_S)
    seen: dict[int, float] = {}

    def note_engines() -> None:
        for process in _engine_processes(simulator._sim):
            try:
                leader = psutil.Process(process.pid)
                for member in [leader, *leader.children(recursive=True)]:
                    seen.setdefault(member.pid, member.create_time())
            except psutil.NoSuchProcess:
                continue

    try:
        simulator.record_to(run.out_dir / "recording")
        simulator.reset(TASKS[0], SEED)
        for _ in range(RECORDED_STEPS):
            simulator.step(noop_action() | {"forward": 1})
        recording = simulator.finish_recording()
        video.append(str(recording.path) if recording else "")
        simulator.record_to(None)
        simulator.reset(TASKS[1], SEED)
        note_engines()
        victim = _kill_engine(simulator, run.stand_in)
        evidence.append(f"killed the engine ({victim}) before a step of {TASKS[1].name}")
        try:
            simulator.step(noop_action())
            raise _Failed("the step after the engine was killed did not fail")
        except SimulatorUnavailable as crashed:
            evidence.append(f"the step failed as expected: {crashed}"[:400])
        simulator.reset(TASKS[2], SEED)
        restarts = simulator.restarts()
        evidence.append(f"{TASKS[2].name} started on a replaced instance: {[r.model_dump() for r in restarts]}"[:400])
        if len(restarts) != 1 or restarts[0].cause != "crash":
            raise _Failed(f"expected one crash restart before {TASKS[2].name}, got {len(restarts)}")
        note_engines()
    finally:
        simulator.close()
    left = _still_running(seen)
    evidence.append(f"engine processes seen: {len(seen)}; still running after close: {left or 'none'}")
    if left:
        raise _Failed(f"processes of the closed engines are still running: {left}")


def _still_running(processes: Mapping[int, float]) -> list[int]:
    """Which of `processes` (pid: create time) still run once a signal sent to them had time to land."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        left = [pid for pid, created in processes.items() if _alive(pid, created)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _alive(pid: int, created: float) -> bool:
    import psutil

    try:
        process = psutil.Process(pid)
        return process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_engine(simulator: Any, stand_in: bool) -> str:
    """SIGKILL the Java process of the simulator's engine (a process this run started, under its engine's group)."""
    import psutil

    from mcu_arms.green.sims.minestudio import _engine_processes

    if stand_in:
        simulator._sim.env.crash()  # the stand-in's env (MineStudio 1.1.6 names its env `env` too)
        return "the stand-in's engine group"
    for leader in _engine_processes(simulator._sim):
        for process in [psutil.Process(leader.pid), *psutil.Process(leader.pid).children(recursive=True)]:
            if process.name().startswith("java"):
                process.kill()  # psutil refuses a pid reused since `process` was read
                return f"java pid {process.pid}"
    raise _Failed("no java process was found under the engine's process group")


def check_video(run: _Run, recording: str, evidence: list[str]) -> None:
    from mcu_arms.green.sims.base import Recording
    from mcu_arms.green.video_eval import _FrameSource, evaluate_video

    if not recording:
        raise _Failed("the backend wrote no recording of the first task")
    source = _FrameSource.of(
        None,
        Recording(
            path=Path(recording),
            width=MCU_RENDER[0],
            height=MCU_RENDER[1],
            frames=RECORDED_STEPS + 1,
            source="RecordCallback",
        ),
    )
    if source is None:
        raise _Failed(f"{recording} holds no frames")
    evidence.append(f"{recording}: {source.count} frames at {source.width}x{source.height}")
    if (source.width, source.height) != MCU_RENDER or source.count != RECORDED_STEPS + 1:
        raise _Failed(f"expected {RECORDED_STEPS + 1} frames at {MCU_RENDER[0]}x{MCU_RENDER[1]}")
    if not run.env.get("OPENAI_API_KEY"):
        raise _Skipped("recorded at MCU's resolution, not graded: OPENAI_API_KEY is not set")
    from mcu_arms.contracts.rubric import chosen_auto_eval_dir

    auto_eval_dir = chosen_auto_eval_dir(None, run.env)
    recorded = Recording(
        path=Path(recording),
        width=source.width,
        height=source.height,
        frames=source.count,
        source="MineStudio RecordCallback",
    )
    result = evaluate_video(
        TASKS[0], None, recorded, enabled=True, env=run.env, needed=True, auto_eval_dir=auto_eval_dir
    )
    evidence.append(
        f"video evaluation: {result.status} {result.reason} task_progress={result.task_progress} "
        f"({result.rubric} rubric, graded {result.graded_frames.model_dump() if result.graded_frames else None})"
    )
    if result.status != "ok":
        raise _Failed(f"video evaluation did not grade: {result.reason}")


def check_seeded_fast(run: _Run, evidence: list[str]) -> None:
    from mcu_arms.green.sims.minestudio import MineStudioSimulator

    simulator = MineStudioSimulator(
        run.env, obs_size=OBS_SIZE, reset_mode="seeded_fast", reset_timeout_s=BACKEND_RESET_TIMEOUT_S
    )
    try:
        simulator.reset(TASKS[0], SEED)
        landed = simulator.reset(TASKS[1], SEED)  # a fast reset: /kill, clean-up, teleport, settling frames
        heights, healths, frames = [], [], set()
        for _ in range(SETTLE_STEPS):
            step = simulator.step(noop_action())
            heights.append(round(float(simulator._sim.info["player_pos"]["y"]), 2))
            healths.append(float(step.info.get("health", float("nan"))))
            assert step.frame is not None  # MineStudio renders every step
            frames.add(step.frame.tobytes())
    finally:
        simulator.close()
    evidence.append(
        f"after the fast reset: {landed.info}; over {SETTLE_STEPS} no-op steps y {heights[0]}..{heights[-1]}, "
        f"health {min(healths)}..{max(healths)}, {len(frames)} distinct frames"
    )
    problems = []
    if landed.info.get("is_gui_open"):
        problems.append("a screen is open after the fast reset (the death screen?)")
    if landed.info.get("health") != 20 or min(healths) < 20:
        problems.append("health below 20 after landing (fall damage or a death)")
    if len(set(heights[SETTLE_STEPS // 2 :])) > 1:
        problems.append("the player is still moving vertically 10 steps after the start (falling, or in blocks)")
    if problems:
        raise _Failed("; ".join(problems))


def check_steve1(run: _Run, evidence: list[str]) -> None:
    from mcu_arms.contracts.errors import UserError
    from mcu_arms.purple import steve1

    try:
        weights = steve1.check_requirements(PurpleOptions(seed=SEED), run.env)
    except UserError as missing:
        raise _Skipped(f"STEVE-1 cannot run here: {missing.message}") from None
    os.environ.update({key: value for key, value in run.env.items() if key.startswith(("HF_", "HUGGINGFACE_"))})
    steve1.go_offline()
    started = time.monotonic()
    model = steve1._load_model(weights, os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
    evidence.append(f"loaded offline (HF_HUB_OFFLINE=1) from {weights} in {time.monotonic() - started:.1f} s")
    frames = (run.frames_for_steve1 * STEVE1_FRAMES)[:STEVE1_FRAMES]
    if not frames:
        raise _Failed("no frame from the raw smoke check to act on")
    runs = []
    for _ in range(2):
        episode = steve1.Steve1Episode(model, SEED, steve1._cuda_input, steve1._inference_mode)
        episode.prepare("chop a tree")
        timed = time.monotonic()
        runs.append([episode.act(frame) for frame in frames])
        evidence.append(
            f"{STEVE1_FRAMES} get_action calls: {(time.monotonic() - timed) / STEVE1_FRAMES * 1000:.0f} ms each"
        )
    determinism = steve1.Determinism(
        device=steve1.device_description(), nondeterministic_ops=episode.nondeterministic_ops
    )
    evidence.append(determinism.statement())
    if runs[0] != runs[1]:
        differing = sum(a != b for a, b in zip(*runs, strict=True))
        raise _Failed(f"two runs with seed {SEED} sampled different actions at {differing} of {STEVE1_FRAMES} frames")


# --- the run ---------------------------------------------------------------------------------------------------


def run_acceptance(env: Mapping[str, str], out_dir: Path, *, budget_s: float = BUDGET_S) -> AcceptanceReport:
    """Run the checklist in order, each check on its own (a failure does not stop the others, unless they need
    what failed), and return the report (`write_report` writes it)."""
    run = _Run(env, out_dir, budget_s)
    report = AcceptanceReport(started_at=iso_seconds())
    imported = _check(
        run,
        "import (as the green imports it) and host requirements",
        lambda evidence: check_import(run, evidence),
        engine=False,
    )
    report.checks.append(imported)
    if imported.status != "passed":
        for name in (
            "raw smoke",
            "seeded hard resets",
            "recording and crash",
            "video at MCU's resolution",
            "seeded_fast landing",
            "STEVE-1",
        ):
            report.checks.append(
                AcceptanceCheck(
                    name=name,
                    status="skipped",
                    evidence=["the import and host check failed: MineStudio cannot run here"],
                )
            )
        report.finished_at = iso_seconds()
        return report
    import minestudio

    report.minestudio_version = str(getattr(minestudio, "__version__", "unknown"))
    report.stand_in = run.stand_in
    sim: Any = None
    try:
        sim = _raw_sim()
        report.checks.append(
            _check(
                run,
                "raw smoke: image shape, info keys, stat names, camera sign",
                lambda evidence: check_raw_smoke(run, sim, evidence),
            )
        )
        report.checks.append(
            _check(
                run,
                f"two seeded hard resets (seed {SEED}) give the same first frame",
                lambda evidence: check_seeded_hard_resets(run, sim, evidence),
            )
        )
    finally:
        if sim is not None:
            _within(RAW_CALL_TIMEOUT_S, sim.close, "closing the raw simulator")
    video: list[str] = []
    report.checks.append(
        _check(
            run,
            "a crashed engine is replaced and nothing of it is left running",
            lambda evidence: check_recording_and_crash(run, evidence, video),
        )
    )
    report.checks.append(
        _check(
            run,
            "video at MCU's resolution (RecordCallback 640x360, graded)",
            lambda evidence: check_video(run, video[0] if video else "", evidence),
        )
    )
    report.checks.append(_check(run, "seeded_fast landing", lambda evidence: check_seeded_fast(run, evidence)))
    report.checks.append(
        _check(run, "STEVE-1 offline load and same-seed actions", lambda evidence: check_steve1(run, evidence))
    )
    report.finished_at = iso_seconds()
    return report


def new_run_dir(parent: Path) -> Path:
    """A folder of its own for one run (its report and recording): never one that exists."""
    parent.mkdir(parents=True, exist_ok=True)
    stem = f"minestudio-{iso_seconds().replace(':', '')}"
    for attempt in range(100):
        candidate = parent / (stem if attempt == 0 else f"{stem}-{attempt}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run folder under {parent} for {stem}")


def write_report(report: AcceptanceReport, run_dir: Path) -> tuple[Path, Path]:
    """The report as JSON and as text in the run's own folder."""
    from mcu_arms.atomic import write_json_exclusive, write_text_atomic

    json_path, text_path = run_dir / "report.json", run_dir / "report.txt"
    write_json_exclusive(json_path, report)
    write_text_atomic(text_path, report.text())
    return json_path, text_path
