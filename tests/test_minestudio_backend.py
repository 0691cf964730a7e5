"""The MineStudio backend without Minecraft: quantiser numbers, the host preflight, and the backend's behaviour
against a stand-in of MineStudio 1.1.6's classes (tests/fake_minestudio; the engine cannot run here)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import write_script

from mcu_arms.contracts.camera import (
    NULL_CAMERA_INDEX,
    SURVIVING_DEGREES,
    camera_bins,
    camera_index,
    camera_index_degrees,
    degrees_to_camera_index,
    quantise_degrees,
)
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.wire import noop_action
from mcu_arms.green.sims.base import SimulatorUnavailable
from mcu_arms.green.sims.minestudio import (
    ENGINE_JAR,
    MineStudioSimulator,
    SimulatorCrashed,
    SimulatorTimeout,
    fast_reset_target,
    host_checks,
    minestudio_dir,
    minestudio_preflight,
    tempdir_for,
)

Partition = namedtuple("Partition", "device mountpoint fstype opts")
LOCAL_DISK = [Partition("/dev/sda1", "/", "ext4", "rw")]
TASKS = [TaskSpec(name=name, category="mining", text=name) for name in ("first", "second", "third")]


def test_quantiser_matches_minestudio_agent_mode() -> None:
    assert quantise_degrees(4.32) == pytest.approx(3.2154, abs=1e-4)
    assert quantise_degrees(-4.32) == pytest.approx(-3.2154, abs=1e-4)
    assert quantise_degrees(0.25) == 0.0
    assert quantise_degrees(20) == 10.0 and quantise_degrees(90) == 10.0 and quantise_degrees(-90) == -10.0
    expected = (-10, -5.8095, -3.2154, -1.6095, -0.6154, 0, 0.6154, 1.6095, 3.2154, 5.8095, 10)
    assert SURVIVING_DEGREES == pytest.approx(expected, abs=1e-4)
    assert all(quantise_degrees(value) == pytest.approx(value) for value in SURVIVING_DEGREES)


def test_compact_camera_index() -> None:
    assert NULL_CAMERA_INDEX == 60 and camera_bins(60) == (5, 5) and camera_index_degrees(60) == (0.0, 0.0)
    assert [camera_index(*camera_bins(i)) for i in range(121)] == list(range(121))
    assert camera_bins(0) == (0, 0) and camera_bins(120) == (10, 10) and camera_bins(61) == (5, 6)
    pitch, yaw = camera_index_degrees(degrees_to_camera_index(-4.32, 20))
    assert (pitch, yaw) == pytest.approx((-3.2154, 10.0), abs=1e-4)
    with pytest.raises(ValueError):
        camera_bins(121)


# --- preflight ----------------------------------------------------------------------------------------------------


def _by_name(env: dict[str, str]) -> dict[str, Any]:
    return {check.name: check for check in host_checks(env, partitions=LOCAL_DISK)}


def test_preflight_passes_on_a_ready_host(minestudio_host: dict[str, Any]) -> None:
    checks = host_checks(minestudio_host["env"], partitions=LOCAL_DISK)
    assert [check.status for check in checks] == ["ok"] * len(checks)
    assert minestudio_preflight(minestudio_host["env"], partitions=LOCAL_DISK) == []


def test_preflight_reports_each_missing_piece_with_how_to_get_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = minestudio_preflight(
        {"PATH": str(empty), "MINESTUDIO_DIR": str(tmp_path / "nowhere")}, partitions=LOCAL_DISK
    )
    text = "\n".join(problems)
    assert "java is not on PATH" in text
    assert "xvfb-run and Xvfb not on PATH" in text and "xauth is not on PATH" in text
    assert "mcprec-6.13.jar" in text and "CraftJarvis/SimulatorEngine" in text
    if importlib.util.find_spec("minestudio") is None:
        assert "pip install 'mcu-arms[minestudio]'" in text and len(problems) == 5
    else:
        assert len(problems) == 4


def test_the_jdk_hint_names_a_source_that_has_jdk_8_on_debian_12(tmp_path: Path) -> None:
    java = _by_name({"PATH": str(tmp_path), "MINESTUDIO_DIR": str(tmp_path)})["java"]
    assert java.status == "fail"
    assert "temurin-8-jdk" in java.fix and "packages.adoptium.net" in java.fix
    assert "Debian 12 has no openjdk-8 package" in java.fix


def test_preflight_rejects_java_17_and_a_network_minestudio_dir(minestudio_host: dict[str, Any]) -> None:
    write_script(minestudio_host["bin"], "java", "echo 'openjdk version \"17.0.9\" 2023-10-17' >&2")
    nfs = [*LOCAL_DISK, Partition("server:/export", str(minestudio_host["home"].parent), "nfs4", "rw")]
    problems = minestudio_preflight(minestudio_host["env"], partitions=nfs)
    assert len(problems) == 2
    assert "version 17" in problems[0] and "needs 8" in problems[0]
    assert "nfs4 filesystem" in problems[1] and "sqlite" in problems[1]


def test_the_engine_is_looked_for_where_minestudio_looks_when_tmpdir_is_set(
    minestudio_host: dict[str, Any], tmp_path: Path
) -> None:
    other_tmp = tmp_path / "other-tmp"
    other_tmp.mkdir()
    env = {**minestudio_host["env"], "TMPDIR": str(other_tmp)}
    del env["MINESTUDIO_DIR"]
    stdlib = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert tempdir_for(env) == Path(stdlib) == other_tmp
    assert minestudio_dir(env) == other_tmp / "MineStudio"
    engine = _by_name(env)["MineStudio engine"]
    assert engine.status == "fail" and str(other_tmp / "MineStudio" / ENGINE_JAR) in engine.detail
    assert f"TMPDIR={other_tmp} is set" in engine.detail
    (other_tmp / "MineStudio" / ENGINE_JAR).parent.mkdir(parents=True)
    (other_tmp / "MineStudio" / ENGINE_JAR).write_bytes(b"jar")
    assert minestudio_preflight(env, partitions=LOCAL_DISK) == []
    assert tempdir_for({"TMPDIR": str(tmp_path / "missing")}) == Path("/tmp"), (
        "a TMPDIR that is no directory is skipped"
    )


def test_gpu_render_flag_is_not_a_reason_to_demand_vglrun(minestudio_host: dict[str, Any]) -> None:
    env = {**minestudio_host["env"], "MINESTUDIO_GPU_RENDER": "1"}
    assert minestudio_preflight(env, partitions=LOCAL_DISK) == [], "1.1.6 never runs vglrun"
    flag = _by_name(env)["MINESTUDIO_GPU_RENDER"]
    assert flag.status == "warn" and "no effect" in flag.detail and "xvfb-run" in flag.detail
    (minestudio_host["bin"] / "xvfb-run").unlink()
    assert any("xvfb-run" in problem for problem in minestudio_preflight(env, partitions=LOCAL_DISK))


def test_xvfb_run_without_xauth_is_refused(minestudio_host: dict[str, Any]) -> None:
    (minestudio_host["bin"] / "xauth").unlink()
    problems = minestudio_preflight(minestudio_host["env"], partitions=LOCAL_DISK)
    assert len(problems) == 1 and "xauth is not on PATH" in problems[0] and "exits 3" in problems[0]


def test_a_minestudio_dir_that_cannot_be_created_is_refused(minestudio_host: dict[str, Any], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**minestudio_host["env"], "MINESTUDIO_DIR": str(blocker / "MineStudio")}
    directory = _by_name(env)["MINESTUDIO_DIR"]
    assert directory.status == "fail" and "is not a directory" in directory.detail
    assert "set MINESTUDIO_DIR to a writable directory" in directory.fix


def test_a_read_only_minestudio_dir_is_refused(minestudio_host: dict[str, Any]) -> None:
    home = minestudio_host["home"]
    if os.geteuid() == 0:  # root writes through mode bits: a read-only mount is what stops it
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(home)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"running as root and a read-only tmpfs cannot be mounted here: {done.stderr.strip()}")
    else:
        home.chmod(0o500)
    try:
        directory = _by_name(minestudio_host["env"])["MINESTUDIO_DIR"]
        assert directory.status == "fail" and "not writable" in directory.detail
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(home)], check=True)
        else:
            home.chmod(0o700)


def test_missing_engine_raises_and_never_constructs_minecraftsim(minestudio_host: dict[str, Any]) -> None:
    (minestudio_host["home"] / ENGINE_JAR).unlink()
    with pytest.raises(SimulatorUnavailable, match="simulator engine is missing"):
        MineStudioSimulator(minestudio_host["env"], partitions=LOCAL_DISK)
    assert minestudio_host["control"].envs == []


def test_module_imports_without_minestudio() -> None:
    code = (
        "import sys, mcu_arms.green.sims.minestudio as m; "
        "assert 'minestudio' not in sys.modules and 'numpy' not in sys.modules; print('ok')"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.stdout.strip() == "ok", completed.stderr


# --- the backend over the stand-in --------------------------------------------------------------------------------


def _simulator(host: dict[str, Any], **options: Any) -> MineStudioSimulator:
    return MineStudioSimulator(host["env"], partitions=LOCAL_DISK, obs_size=(32, 32), **options)


def _fresh_start(host: dict[str, Any], task: TaskSpec, seed: int, reset_mode: str) -> tuple[tuple, bytes]:
    """Where a fresh seeded run of `task` alone starts: position and frame."""
    simulator = _simulator(host, reset_mode=reset_mode)
    try:
        frame = simulator.reset(task, seed).frame
        return simulator._sim.env.position(), frame.tobytes()
    finally:
        simulator.close()


def test_reset_and_step_through_the_stand_in(minestudio_host: dict[str, Any]) -> None:
    simulator = MineStudioSimulator(minestudio_host["env"], partitions=LOCAL_DISK)
    assert minestudio_host["control"].envs == []  # the engine starts on first reset, in the worker
    task = TaskSpec(name="t", category="crafting", text="t", init_commands=("/give @s minecraft:stone 3",))
    first = simulator.reset(task, seed=7)
    assert first.counters == {} and first.frame.shape == (128, 128, 3)
    assert set(first.info) <= {"health", "food_level", "is_gui_open"}  # positions never leave the backend
    fake = simulator._sim.env
    assert fake.world_seed == 7 and "/give @s minecraft:stone 3" in fake.commands
    for _ in range(5):
        stepped = simulator.step(noop_action() | {"attack": 1, "camera": (4.32, 0.0)})
    assert sum(stepped.counters["mine_block"].values()) == 1  # five attack steps break one block
    assert simulator.fallback_counts() == {}  # agent mode's quantising is the task run's (and counted there)
    assert fake.world.player.pitch == pytest.approx(5 * 4.32)  # the backend applies env actions as given
    simulator.close()
    assert fake.is_closed()


def test_drop_is_counted_as_an_input_with_no_effect_and_not_advertised(minestudio_host: dict[str, Any]) -> None:
    simulator = _simulator(minestudio_host)
    simulator.reset(TASKS[0], seed=0)
    assert simulator.step(noop_action() | {"drop": 1, "forward": 1}).no_effect == ["drop"]
    simulator.step(noop_action() | {"drop": 1})
    assert simulator.step(noop_action() | {"forward": 1}).no_effect == []
    assert simulator.fallback_counts() == {"no_effect.drop": 2}
    assert simulator._sim.env.ignored_keys == {}, "drop never reaches MineStudio's action"
    assert "drop has no effect" in simulator.agent_instructions()
    simulator.reset(TASKS[1], seed=0)
    assert simulator.fallback_counts() == {}, "counted per task"
    simulator.close()


@pytest.mark.parametrize("reset_mode", ["hard", "seeded_fast"])
@pytest.mark.slow
def test_every_task_starts_where_a_fresh_seeded_run_of_it_starts(
    minestudio_host: dict[str, Any], reset_mode: str
) -> None:
    simulator = _simulator(minestudio_host, reset_mode=reset_mode)
    starts = []
    for task in TASKS:
        frame = simulator.reset(task, seed=11).frame
        starts.append((simulator._sim.env.position(), frame.tobytes()))
        for _ in range(12):  # walk and mine: the next task must not start where this one left off
            simulator.step(noop_action() | {"forward": 1, "attack": 1, "camera": (0.0, 15.0)})
    fake = simulator._sim.env
    simulator.close()
    assert starts == [_fresh_start(minestudio_host, task, 11, reset_mode) for task in TASKS]
    assert simulator.reset_mode() == reset_mode
    assert fake.hard_resets == (3 if reset_mode == "hard" else 1)
    if reset_mode == "seeded_fast":
        assert len({position for position, _ in starts}) == 3, "each task has its own (seed, task) start"
        assert sum(command.startswith("/teleportbiome") for command in fake.commands) == 3


@pytest.mark.slow
def test_seeded_fast_starts_depend_on_the_seed_and_hard_ones_are_the_seeds_world(
    minestudio_host: dict[str, Any],
) -> None:
    assert _fresh_start(minestudio_host, TASKS[1], 1, "seeded_fast") != _fresh_start(
        minestudio_host, TASKS[1], 2, "seeded_fast"
    )
    assert _fresh_start(minestudio_host, TASKS[0], 5, "hard") == _fresh_start(minestudio_host, TASKS[2], 5, "hard")


def test_after_the_engine_ends_an_episode_the_next_task_still_starts_like_a_fresh_run(
    minestudio_host: dict[str, Any],
) -> None:
    simulator = _simulator(minestudio_host, reset_mode="seeded_fast")
    simulator.reset(TASKS[0], seed=3)
    simulator._sim.env.finish_episode()
    assert simulator.step(noop_action()).done
    frame = simulator.reset(TASKS[1], seed=3).frame  # a fast reset would raise RuntimeError(done=True) here
    where = simulator._sim.env.position()
    assert simulator.restarts() == []
    simulator.close()
    assert (where, frame.tobytes()) == _fresh_start(minestudio_host, TASKS[1], 3, "seeded_fast")


def test_fast_reset_targets_are_stable_across_processes_and_in_minestudio_range() -> None:
    code = (
        "from mcu_arms.green.sims.minestudio import fast_reset_target; "
        "print(fast_reset_target(7, 'mine_iron_ore', ('plains', 'forest', 'desert'), 1000))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    ).stdout.strip()
    assert other == str(fast_reset_target(7, "mine_iron_ore", ("plains", "forest", "desert"), 1000))
    targets = {fast_reset_target(seed, "t", ("plains", "forest"), 1000) for seed in range(300)}
    assert all(-500 <= x < 500 and -500 <= z < 500 for _, x, z in targets) and len(targets) > 290
    assert {biome for biome, _, _ in targets} == {"plains", "forest"}


def _engine_pid(simulator: MineStudioSimulator) -> int:
    return simulator._sim.env.instances[0].minecraft_process.pid


def _gone(pid: int, deadline_s: float = 10.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def test_a_crash_mid_task_replaces_the_instance_and_the_next_task_starts_clean(minestudio_host: dict[str, Any]) -> None:
    control = minestudio_host["control"]
    control.spawn_engine_process = control.spawn_daemon_process = True
    simulator = _simulator(minestudio_host)
    simulator.reset(TASKS[0], seed=4)
    old_engine, daemon = _engine_pid(simulator), control.daemon
    simulator.step(noop_action())
    simulator._sim.env.crash()
    with pytest.raises(SimulatorCrashed, match=r"failed during step \(TypeError"):
        simulator.step(noop_action())
    frame = simulator.reset(TASKS[1], seed=4).frame
    [restart] = simulator.restarts()
    assert (restart.cause, restart.failed_task, restart.failed_during, restart.failed_step) == (
        "crash",
        "first",
        "step",
        1,
    )
    assert "TypeError" in restart.detail and restart.at
    assert len(control.envs) == 2 and control.envs[0].is_closed(), "the crashed instance was closed, a new one built"
    assert _gone(old_engine) and _engine_pid(simulator) != old_engine
    assert daemon.poll() is None, "MineStudio's host-wide daemon is not ours to stop"
    where = simulator._sim.env.position()
    simulator.step(noop_action())
    simulator.close()
    assert (where, frame.tobytes()) == _fresh_start(minestudio_host, TASKS[1], 4, "hard")


def test_a_hung_step_times_out_stops_the_engine_by_pid_and_the_next_task_gets_a_fresh_instance(
    minestudio_host: dict[str, Any],
) -> None:
    minestudio_host["control"].spawn_engine_process = True
    simulator = _simulator(minestudio_host, step_timeout_s=0.3)
    simulator.reset(TASKS[0], seed=0)
    engine = _engine_pid(simulator)
    simulator._sim.env.hang_steps()
    with pytest.raises(SimulatorTimeout, match="step did not finish"):
        simulator.step(noop_action())
    assert simulator.fallback_counts() == {"timeout.step": 1}
    assert _gone(engine), "the hung engine was stopped by its pid"
    simulator.reset(TASKS[1], seed=0)
    assert [(r.cause, r.failed_during) for r in simulator.restarts()] == [("timeout", "step")]
    simulator.step(noop_action())
    simulator.close()


def test_a_launch_that_hangs_is_stopped_and_retried_once_on_a_fresh_instance(minestudio_host: dict[str, Any]) -> None:
    control = minestudio_host["control"]
    control.spawn_engine_process = control.launch_hangs = True
    simulator = _simulator(minestudio_host, reset_timeout_s=1.0)
    simulator.reset(TASKS[0], seed=0)  # the first launch never gets ready; its engine is found in the pool
    [restart] = simulator.restarts()
    assert (restart.cause, restart.failed_during, restart.failed_task) == ("timeout", "reset", "first")
    assert control.launches == 2
    assert simulator.fallback_counts() == {"timeout.reset": 1}
    simulator.close()


def test_an_engine_that_never_starts_gives_up_after_three_failures_in_a_row(minestudio_host: dict[str, Any]) -> None:
    control = minestudio_host["control"]
    control.launch_fails = True
    simulator = _simulator(minestudio_host)
    with pytest.raises(SimulatorCrashed, match="EOFError"):
        simulator.reset(TASKS[0], seed=0)  # tried twice
    with pytest.raises(SimulatorUnavailable, match="failed 3 times in a row"):
        simulator.reset(TASKS[1], seed=0)  # once more, then never again
    with pytest.raises(SimulatorUnavailable, match="failed 3 times in a row"):
        simulator.reset(TASKS[2], seed=0)
    assert control.launches == 3
    simulator.close()


def test_close_stops_only_the_engine_it_started(minestudio_host: dict[str, Any]) -> None:
    control = minestudio_host["control"]
    control.spawn_engine_process = control.spawn_daemon_process = True
    simulator = _simulator(minestudio_host)
    simulator.reset(TASKS[0], seed=0)
    engine = _engine_pid(simulator)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        simulator.close()
        assert _gone(engine)
        assert control.daemon.poll() is None and bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_the_result_fields_serialise(minestudio_host: dict[str, Any]) -> None:
    minestudio_host["control"].crash_at_env_step = 25
    simulator = _simulator(minestudio_host)
    simulator.reset(TASKS[0], seed=0)
    with pytest.raises(SimulatorCrashed):
        for _ in range(10):
            simulator.step(noop_action())
    simulator.reset(TASKS[1], seed=0)
    [restart] = json.loads(json.dumps([r.model_dump(mode="json") for r in simulator.restarts()]))
    assert restart["failed_step"] == 4 and restart["cause"] == "crash"
    simulator.close()


def test_the_green_asks_minestudio_to_render_the_observation_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's green builds MinecraftSim(obs_size=(640, 360)); ours passes the request's obs_size the same way, so
    a 640x360 frame is rendered, not resized from 128x128."""
    import mcu_arms.green.sims.minestudio as backend
    from mcu_arms.green.task_run import make_simulator

    built: dict[str, Any] = {}
    monkeypatch.setattr(backend.MineStudioSimulator, "__init__", lambda self, **kwargs: built.update(kwargs))
    assert isinstance(make_simulator("minestudio", obs_size=(640, 360)), backend.MineStudioSimulator)
    assert built == {"obs_size": (640, 360), "reset_mode": "hard", "action_mode": "agent"}
    make_simulator("minestudio", reset_mode="seeded_fast", action_mode="env")
    assert built["reset_mode"] == "seeded_fast" and built["action_mode"] == "env"


def test_seeded_fast_lands_before_the_settling_frames_on_hard_and_fast_resets(minestudio_host: dict[str, Any]) -> None:
    """As 1.1.6's FastResetCallback: the teleport comes before MineStudio's 20 empty frames, so the first view is the
    settled landing (the first reset of an instance is hard; the teleport follows its new world, then 20 frames)."""
    simulator = _simulator(minestudio_host, reset_mode="seeded_fast")
    try:
        for task in TASKS[:2]:
            simulator.reset(task, seed=3)
            fake = simulator._sim.env
            [teleported] = [
                step
                for step, command in zip(fake.command_steps, fake.commands, strict=True)
                if command.startswith("/teleportbiome")
            ][-1:]
            assert fake.steps_taken - teleported == 20, task.name  # no task commands here: 20 settling frames
        assert fake.hard_resets == 1  # the second task's start was a fast one
    finally:
        simulator.close()


@pytest.mark.slow
def test_only_one_minestudio_simulator_per_process(minestudio_host: dict[str, Any]) -> None:
    first = _simulator(minestudio_host)
    with pytest.raises(SimulatorUnavailable, match="already runs a MineStudio evaluation"):
        _simulator(minestudio_host)
    first.close()
    _simulator(minestudio_host).close()  # a closed one frees the process


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ({"FAKE_MINESTUDIO_NUMPY": "2"}, "AttributeError: `np.unicode_` was removed in the NumPy 2.0 release"),
        ("libgl", "ImportError: libGL.so.1: cannot open shared object file: No such file or directory"),
    ],
)
def test_the_import_check_imports_as_the_green_does_in_a_child_and_names_the_error(
    minestudio_host: dict[str, Any], tmp_path: Path, broken: Any, expected: str
) -> None:
    env = dict(minestudio_host["env"])
    if broken == "libgl":  # a cv2 that cannot load libGL, imported by the simulator package as 1.1.6's does
        shadow = tmp_path / "shadow"
        (shadow / "cv2").mkdir(parents=True)
        (shadow / "cv2" / "__init__.py").write_text(
            "raise ImportError('libGL.so.1: cannot open shared object file: No such file or directory')\n"
        )
        env["PYTHONPATH"] = f"{shadow}{os.pathsep}{env['PYTHONPATH']}"
    else:
        env.update(broken)
    [check] = [check for check in host_checks(env, partitions=LOCAL_DISK) if check.name == "minestudio import"]
    assert check.status == "fail" and expected in check.detail, check.detail
    assert "numpy < 2" in check.fix
    with pytest.raises(SimulatorUnavailable, match="importing minestudio fails"):
        MineStudioSimulator(env, partitions=LOCAL_DISK)
    _simulator(minestudio_host).close()  # the refusal left the process free


def test_an_import_that_fails_in_the_green_breaks_the_backend_once_and_loudly(
    minestudio_host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preflight imported MineStudio in a child; if this process still cannot (its sys.path differs, a later pip),
    the first reset says so and every later one fails at once with the same reason, never retried per task."""
    simulator = _simulator(minestudio_host)
    monkeypatch.setitem(sys.modules, "minestudio.simulator", None)
    try:
        for task in TASKS[:2]:
            with pytest.raises(
                SimulatorUnavailable, match="MineStudio cannot be imported in the green: ModuleNotFoundError"
            ):
                simulator.reset(task, seed=0)
        assert minestudio_host["control"].launches == 0
    finally:
        simulator.close()
