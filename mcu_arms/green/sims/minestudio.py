"""The MineStudio backend: real Minecraft through `minestudio.simulator.MinecraftSim` (optional extra).

Written against the minestudio 1.1.6 wheel's source; no engine runs on this project's machines, and the tests drive
it through a stand-in of those classes' behaviour (tests/fake_minestudio).

- Preflight first (`host_checks`), from PATH and files only: MinecraftSim without its engine asks on stdin and hangs
  a server. 1.1.6 looks for the engine in $MINESTUDIO_DIR, else tempfile.gettempdir()/MineStudio, and always
  launches it through `xvfb-run` (its GPU probe fails with a NameError and answers "cpu"), which needs `xauth`.
- Every task's start is a function of (seed, task) only (`ResetMode`). MineStudio's FastResetCallback is not used:
  it seeds only the first reset, then teleports to a point drawn from the unseeded global RNGs.
- Reset and step run in a worker thread under our own deadlines (the first reset launches Java with no timeout).
  On a crash MineStudio sets done=True and its random-observation fallback raises TypeError; every later call raises
  RuntimeError("... done=True"). A crash or a missed deadline marks the instance dead: its engine is stopped by pid
  (re-checked with its create time), and the next reset starts a fresh MinecraftSim, recorded as a restart.
- Scoring reads the cumulative statistics in info (mine_block, craft_item, ...) relative to their values after reset.
- Actions: env action mode underneath; in agent action mode (the default, upstream's) the task run first sends every
  non-compact action through the compact joint space (green/actions.py through_agent_mode), as upstream's green does.
- Video: with `record_to`, MineStudio's own RecordCallback records the render (render_size, 640x360 as MCU's) of
  each task into that task's folder, as upstream records `episode_1.mp4`; the observation size is the agent's.
- One MineStudio simulator per process at a time: 1.1.6's instance pool is process-wide, so a crash handled in one
  evaluation would stop the engines of another.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel

from mcu_arms.contracts.catalog import DEFAULT_ACTION_MODE, DEFAULT_RESET_MODE, ActionMode, ResetMode
from mcu_arms.contracts.evaluation import SimulatorRestart
from mcu_arms.contracts.preflight import HostCheck, failures
from mcu_arms.contracts.support import MINESTUDIO_COUNTED_EVENTS, TaskSupport, minestudio_support
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.contracts.wire import BUTTON_KEYS, CAMERA_KEY
from mcu_arms.green.sims.base import Recording, SimStep, Simulator, SimulatorUnavailable
from mcu_arms.isolation.host import network_filesystem_reason, unwritable_reason
from mcu_arms.process.procs import log_line

if TYPE_CHECKING:
    from mcu_arms.contracts.simulators import BackendRequest
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import EnvAction

T = TypeVar("T")

ENGINE_JAR = Path("engine") / "build" / "libs" / "mcprec-6.13.jar"
GPU_RENDER_ENV = "MINESTUDIO_GPU_RENDER"
TEMPDIR_VARIABLES = ("TMPDIR", "TEMP", "TMP")  # what tempfile.gettempdir() reads, in its order
TEMPDIR_FALLBACKS = ("/tmp", "/var/tmp", "/usr/tmp")
# Button keys MineStudio 1.1.6 ignores: not actionable in HumanSurvival, absent from the env action space.
NO_EFFECT_KEYS: frozenset[str] = frozenset({"drop"})
INSTALL_HINTS = {
    "package": "pip install 'mcu-arms[minestudio]' (about 8 GB and 15 minutes)",
    "import": "read the error: 1.1.6 needs numpy < 2 (`pip install 'numpy<2'`), and cv2 needs libGL.so.1 "
    "(`apt-get install libgl1`) unless only opencv-python-headless is installed",
    "java": "install JDK 8 and put its java first on PATH: Debian 12 has no openjdk-8 package, take temurin-8-jdk "
    "from Adoptium's apt repository (https://packages.adoptium.net/artifactory/deb, see "
    "https://adoptium.net/installation/linux); on Ubuntu `apt-get install openjdk-8-jdk`",
    "xvfb": "install Xvfb, e.g. `apt-get install xvfb xauth`",
    "xauth": "install xauth, e.g. `apt-get install xauth` (Debian's xvfb package only recommends it, and its "
    "xvfb-run exits 3 without it)",
    "engine": "download engine.zip from the HuggingFace repo CraftJarvis/SimulatorEngine and unzip it into that "
    "directory (or run `python -m minestudio.simulator.entry -y` once with the same environment)",
    "dir": "make it writable by this user, or set MINESTUDIO_DIR to a writable directory on local disk",
}
FAST_RESET_BIOMES: tuple[str, ...] = ("plains",)
FAST_RESET_RANGE = 1000  # blocks; the teleport target lies in [-range // 2, range // 2), as MineStudio's
RESET_TIMEOUT_S = 900.0
STEP_TIMEOUT_S = 120.0
CLOSE_TIMEOUT_S = 120.0
ENGINE_STOP_GRACE_S = 5.0
MAX_FAILURES_IN_A_ROW = 3  # failed instances without a successful reset between them; then the backend gives up
IMPORT_TIMEOUT_S = 120.0
# What the green imports from MineStudio, in the order it does (this module and the callback below).
GREEN_IMPORTS = (
    "from minestudio.simulator import MinecraftSim",
    "from minestudio.simulator.callbacks import CommandsCallback, MinecraftCallback, RecordCallback",
    "from minestudio.simulator.minerl.env.malmo import InstanceManager",
    # the first thing MinecraftSim builds: 1.1.6's Text space uses np.unicode_, so this fails under numpy 2
    "from minestudio.simulator.minerl.herobraine.hero.spaces import Text; Text([1])",
)
HUD_INFO_KEYS = ("health", "food_level", "is_gui_open")  # the info the step log keeps (what a player's HUD shows)
RECORDING_NAME = "episode_1.mp4"  # what a fresh RecordCallback writes for its first episode (upstream grades it)
RECORD_FPS = 20
_claim_lock = threading.Lock()
_claimed_by: weakref.ref[MineStudioSimulator] | None = None  # the one open MineStudio simulator of this process


class _Failure(NamedTuple):
    """Why the current instance is dead; it becomes a SimulatorRestart when the instance is replaced."""

    cause: Literal["crash", "timeout"]
    detail: str
    task: str
    during: Literal["reset", "step"]
    step: int | None


class SimulatorTimeout(SimulatorUnavailable):
    """MineStudio did not answer in time."""


class SimulatorCrashed(SimulatorUnavailable):
    """The Minecraft engine failed (died, or broke its socket); the instance is replaced at the next reset."""


def tempdir_for(env: Mapping[str, str]) -> Path:
    """What tempfile.gettempdir() answers in a process with environment `env`: the first of TMPDIR, TEMP, TMP,
    /tmp, /var/tmp, /usr/tmp and the working directory that is a writable directory."""
    candidates = [env[name] for name in TEMPDIR_VARIABLES if env.get(name)] + list(TEMPDIR_FALLBACKS)
    for candidate in candidates:
        path = Path(os.path.abspath(candidate))
        if path.is_dir() and os.access(path, os.W_OK | os.X_OK):
            return path
    return Path(os.getcwd())


def minestudio_dir(env: Mapping[str, str]) -> Path:
    """Where MineStudio 1.1.6 keeps its engine and registry (minestudio/utils/temp.py): $MINESTUDIO_DIR when set and
    non-empty, else tempfile.gettempdir()/MineStudio."""
    return Path(env.get("MINESTUDIO_DIR") or tempdir_for(env) / "MineStudio")


def _minestudio_dir_origin(env: Mapping[str, str]) -> str:
    if env.get("MINESTUDIO_DIR"):
        return "MINESTUDIO_DIR"
    chosen = next((f"{name}={env[name]}" for name in TEMPDIR_VARIABLES if env.get(name)), None)
    return "MINESTUDIO_DIR is unset, so tempfile.gettempdir()/MineStudio" + (f" ({chosen} is set)" if chosen else "")


def _java_major_version(java: str) -> int | None:
    """The major version `java -version` reports (8 for "1.8.0_392"), or None when it cannot be read."""
    try:
        completed = subprocess.run(
            [java, "-version"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', completed.stderr + completed.stdout)
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    return minor if major == 1 else major


def import_check(env: Mapping[str, str]) -> HostCheck:
    """Import MineStudio in a fresh interpreter exactly as the green will (same interpreter, same environment, the
    same import statements), so that an import that fails (numpy >= 2, cv2 without libGL) is found before a task
    runs; the check reports the error's last line."""
    script = (
        "\n".join(GREEN_IMPORTS)
        + "\nimport minestudio, numpy; print(getattr(minestudio, '__version__', '?'), numpy.__version__)"
    )
    try:
        completed = subprocess.run(
            [sys.executable, "-c", script],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return HostCheck(
            name="minestudio import",
            status="fail",
            detail=f"importing minestudio took over {IMPORT_TIMEOUT_S:.0f} s",
            fix=INSTALL_HINTS["import"],
        )
    if completed.returncode == 0:
        versions = completed.stdout.split()
        return HostCheck(
            name="minestudio import",
            status="ok",
            detail=f"imports as the green imports it (minestudio {versions[0]}, numpy {versions[1]})",
        )
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    error = lines[-1] if lines else f"exit status {completed.returncode}"
    if "No module named 'minestudio'" in error:
        return HostCheck(
            name="minestudio import",
            status="fail",
            detail="the minestudio package is not installed",
            fix=INSTALL_HINTS["package"],
        )
    return HostCheck(
        name="minestudio import",
        status="fail",
        detail=f"importing minestudio fails: {error}",
        fix=INSTALL_HINTS["import"],
    )


def _java_check(search_path: str) -> HostCheck:
    java = shutil.which("java", path=search_path)
    if java is None:
        return HostCheck(name="java", status="fail", detail="java is not on PATH", fix=INSTALL_HINTS["java"])
    major = _java_major_version(java)
    if major != 8:
        found = f"version {major}" if major is not None else "an unreadable version"
        return HostCheck(
            name="java",
            status="fail",
            detail=f"java on PATH ({java}) is {found}, MineStudio needs 8",
            fix=INSTALL_HINTS["java"],
        )
    return HostCheck(name="java", status="ok", detail=f"{java} is Java 8")


def _display_checks(env: Mapping[str, str], search_path: str) -> list[HostCheck]:
    """1.1.6's launchClient.sh runs `xvfb-run -a java ...` whenever its GPU probe answers "cpu", and that probe
    always does (gpu_utils.py uses `cuda` without importing it), so Xvfb is needed whatever MINESTUDIO_GPU_RENDER
    says."""
    checks = []
    missing = [tool for tool in ("xvfb-run", "Xvfb") if shutil.which(tool, path=search_path) is None]
    checks.append(
        HostCheck(
            name="xvfb-run", status="fail", detail=f"{' and '.join(missing)} not on PATH", fix=INSTALL_HINTS["xvfb"]
        )
        if missing
        else HostCheck(name="xvfb-run", status="ok", detail="xvfb-run and Xvfb on PATH")
    )
    xauth = shutil.which("xauth", path=search_path)
    checks.append(
        HostCheck(name="xauth", status="ok", detail=f"{xauth} (xvfb-run needs it)")
        if xauth
        else HostCheck(name="xauth", status="fail", detail="xauth is not on PATH", fix=INSTALL_HINTS["xauth"])
    )
    if env.get(GPU_RENDER_ENV) == "1":
        checks.append(
            HostCheck(
                name=GPU_RENDER_ENV,
                status="warn",
                detail=f"{GPU_RENDER_ENV}=1 has no effect in MineStudio 1.1.6: its GPU probe always answers cpu, so "
                "the engine renders in software under xvfb-run (vglrun is never used)",
            )
        )
    return checks


def _directory_checks(env: Mapping[str, str], partitions: Iterable[Any] | None) -> list[HostCheck]:
    home = minestudio_dir(env)
    origin = _minestudio_dir_origin(env)
    jar = home / ENGINE_JAR
    checks = [
        HostCheck(name="MineStudio engine", status="ok", detail=f"{jar}")
        if jar.is_file()
        else HostCheck(
            name="MineStudio engine",
            status="fail",
            detail=f"the simulator engine is missing ({jar}; from {origin})",
            fix=INSTALL_HINTS["engine"],
        )
    ]
    unwritable = unwritable_reason(home)
    checks.append(
        HostCheck(
            name="MINESTUDIO_DIR",
            status="fail",
            detail=f"{home} (from {origin}): {unwritable}",
            fix=INSTALL_HINTS["dir"],
        )
        if unwritable
        else HostCheck(name="MINESTUDIO_DIR", status="ok", detail=f"{home} (from {origin}) is writable")
    )
    network = network_filesystem_reason(home, partitions)
    checks.append(
        HostCheck(
            name="MINESTUDIO_DIR disk",
            status="fail",
            detail=f"{network} (MineStudio's instance registry is sqlite)",
            fix=INSTALL_HINTS["dir"],
        )
        if network
        else HostCheck(name="MINESTUDIO_DIR disk", status="ok", detail="local disk")
    )
    return checks


def host_checks(env: Mapping[str, str], *, partitions: Iterable[Any] | None = None) -> list[HostCheck]:
    """Everything MineStudio 1.1.6 needs from this host, each ok, warn or fail with how to fix it.

    It imports minestudio in a child process (about 2 s), never in this one, and never constructs MinecraftSim.
    """
    search_path = env.get("PATH", "")
    return [
        import_check(env),
        _java_check(search_path),
        *_display_checks(env, search_path),
        *_directory_checks(env, partitions),
    ]


def preflight(env: Mapping[str, str], arms: Mapping[str, BaseModel | None]) -> list[tuple[HostCheck, list[str]]]:
    """One row per thing this backend's own preflight checks (the same checks a run makes), for every arm."""
    return [(check, list(arms)) for check in host_checks(env)]


def minestudio_preflight(env: Mapping[str, str], *, partitions: Iterable[Any] | None = None) -> list[str]:
    """What stops MineStudio from running on this host, each with how to fix it; empty when it can run."""
    return failures(host_checks(env, partitions=partitions))


def fast_reset_target(seed: int, task_name: str, biomes: tuple[str, ...], tp_range: int) -> tuple[str, int, int]:
    """The biome and (x, z) a seeded fast reset teleports `task_name` to: a stable hash of (seed, task), the same in
    every process (never hash()), in MineStudio's own range [-range // 2, range // 2)."""
    digest = hashlib.blake2b(f"{seed}\x00{task_name}".encode(), digest_size=16).digest()
    low, high = -tp_range // 2, tp_range // 2

    def coordinate(part: bytes) -> int:
        return low + int.from_bytes(part, "big") % (high - low)

    return biomes[int.from_bytes(digest[:4], "big") % len(biomes)], coordinate(digest[4:10]), coordinate(digest[10:16])


@cache
def _seeded_start_class() -> type:
    """The callback behind "seeded_fast" (a MinecraftCallback subclass, so minestudio is imported only here)."""
    from minestudio.simulator.callbacks import MinecraftCallback

    class SeededStartCallback(MinecraftCallback):
        """The first reset of an instance is MineStudio's hard one (seeded by env.seed); later ones skip it after
        /kill. Either way the same clean-up and a /teleportbiome to `target` come BEFORE the settling frames, as
        1.1.6's FastResetCallback teleports in before_reset: on a fast reset here, on a hard one right after the new
        world exists, followed by as many no-op frames as MineStudio's own. So a task's first view is the landed,
        settled player, whichever tasks ran before it on this instance."""

        def __init__(self) -> None:
            self.target: tuple[str, int, int] = (FAST_RESET_BIOMES[0], 0, 0)
            self._after_hard_reset = False

        def _clean_and_teleport(self, sim: Any) -> tuple[Any, dict]:
            biome, x, z = self.target
            for command in (
                "/time set 0",
                "/weather clear",
                "/kill @e[type=!player]",
                "/kill @e[type=item]",
                f"/teleportbiome @a {biome} {x} ~0 {z}",
            ):
                raw_obs, _reward, _done, info = sim.env.execute_cmd(command)
            return raw_obs, info

        def before_reset(self, sim: Any, reset_flag: bool) -> bool:
            self._after_hard_reset = not sim.already_reset
            if self._after_hard_reset:
                return reset_flag
            sim.env.execute_cmd("/kill")  # respawn with a fresh inventory and health
            self._clean_and_teleport(sim)
            return False  # MineStudio's empty frames follow: the landing settles

        def after_reset(self, sim: Any, obs: Any, info: dict) -> tuple[Any, dict]:
            if not self._after_hard_reset:
                return obs, info
            raw_obs, info = self._clean_and_teleport(sim)
            for _ in range(sim.num_empty_frames):
                raw_obs, _reward, _done, info = sim.env.step(sim.env.action_space.no_op())
            return sim._wrap_obs_info(raw_obs, info)

    return SeededStartCallback


def _counters_from_info(info: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    counters: dict[str, dict[str, int]] = {}
    for event in MINESTUDIO_COUNTED_EVENTS:
        values = info.get(event)
        if isinstance(values, Mapping):
            counters[event] = {str(name): int(count) for name, count in values.items()}
    return counters


def _engine_processes(sim: Any) -> list[Any]:
    """The Minecraft process groups behind `sim`, as MineStudio started them (psutil.Popen, each in its own session):
    those of its env's instances, and those of every instance this process created and did not close, which names
    one still launching (an instance joins env.instances only once its launch returned)."""
    from minestudio.simulator.minerl.env.malmo import InstanceManager

    instances = [*sim.env.instances, *InstanceManager._instance_pool]
    return [instance.minecraft_process for instance in instances if instance.minecraft_process is not None]


class MineStudioSimulator(Simulator):
    """Real Minecraft (MineStudio 1.1.6), stepped in env action mode; `action_mode` says whether actions arrive
    through agent mode first (upstream's semantics, done by the task run) or as sent."""

    name = "minestudio"

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        reset_mode: ResetMode = DEFAULT_RESET_MODE,
        action_mode: ActionMode = DEFAULT_ACTION_MODE,
        obs_size: tuple[int, int] = (128, 128),
        render_size: tuple[int, int] = (640, 360),
        fast_reset_biomes: tuple[str, ...] = FAST_RESET_BIOMES,
        random_tp_range: int = FAST_RESET_RANGE,
        reset_timeout_s: float = RESET_TIMEOUT_S,
        step_timeout_s: float = STEP_TIMEOUT_S,
        partitions: Iterable[Any] | None = None,
    ) -> None:
        self._env = dict(env if env is not None else os.environ)
        self._claimed = False
        self._claim()
        try:
            problems = minestudio_preflight(self._env, partitions=partitions)
        except BaseException:
            self._release_claim()
            raise
        if problems:
            self._release_claim()
            raise SimulatorUnavailable("MineStudio cannot run on this host:\n- " + "\n- ".join(problems))
        self._reset_mode: ResetMode = reset_mode
        self._action_mode: ActionMode = action_mode
        self._obs_size = obs_size
        self._render_size = render_size
        self._record_dir: Path | None = None  # where the next task's render is recorded (record_to)
        self._fast_reset_biomes = tuple(fast_reset_biomes)
        self._random_tp_range = random_tp_range
        self._reset_timeout_s = reset_timeout_s
        self._step_timeout_s = step_timeout_s
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minestudio")
        self._sim: Any = None
        self._seeded_start: Any = None
        self._record_callback: Any = None
        self._engines: list[tuple[Any, float]] = []  # the current instance's engine groups: (Popen, create time)
        self._baseline: dict[str, dict[str, int]] = {}
        self._fallbacks: Counter[str] = Counter()
        self._task_name = ""
        self._steps = 0  # steps since the latest reset
        self._failure: _Failure | None = None  # why the current instance is dead (it is replaced at the next reset)
        self._failures_in_a_row = 0
        self._restarts: list[SimulatorRestart] = []
        self._hard_reset_needed = False  # the engine ended the episode: a fast reset cannot continue it
        self._broken: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, request: BackendRequest) -> MineStudioSimulator:
        return cls(
            obs_size=request.obs_size,
            reset_mode=request.reset_mode or DEFAULT_RESET_MODE,  # type: ignore[arg-type] # the descriptor checked it
            action_mode=request.action_mode or DEFAULT_ACTION_MODE,  # type: ignore[arg-type]
        )

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("minestudio")
        except PackageNotFoundError:
            return "unknown"

    def label(self) -> str:
        actions = (
            "actions in agent mode as MCU's green applies them (camera in 11 bins within ±10°, exclusive key groups)"
            if self._action_mode == "agent"
            else "actions in env mode (camera exact up to ±180°, keys as sent): not MCU's action semantics"
        )
        return f"minestudio (MineStudio {self.version()}): MCU on Minecraft, {actions}"

    def action_mode(self) -> ActionMode:
        return self._action_mode

    def supports(self, task: TaskSpec) -> TaskSupport:
        return minestudio_support(task)

    def reset_mode(self) -> ResetMode:
        return self._reset_mode

    def restarts(self) -> list[SimulatorRestart]:
        return list(self._restarts)

    def agent_instructions(self) -> str:
        drop = "drop has no effect in MineStudio (it is counted as an input with no effect)."
        if self._action_mode == "agent":
            return (
                "Actions go through MineStudio's agent mode, as in MCU. Camera: [pitch, yaw] in degrees per step, "
                "snapped to one of -10, -5.81, -3.22, -1.61, -0.62, 0, 0.62, 1.61, 3.22, 5.81, 10 per axis (larger "
                "requests turn 10 degrees). forward+back or left+right together press neither; of sprint/sneak and "
                "of the hotbar keys only the later one counts; inventory is pressed alone and stops the camera. "
                f"{drop}"
            )
        return f"Camera: [pitch, yaw] in degrees per step, applied as given (up to ±180). {drop}"

    # --- the worker ---------------------------------------------------------------------------------------------

    def _call(self, fn: Callable[[], T], timeout_s: float, what: Literal["reset", "step"]) -> T:
        """Run `fn` on the worker thread. A missed deadline or a failure marks the instance dead (it is replaced at
        the next reset) and is raised as SimulatorTimeout or SimulatorCrashed."""
        future = self._worker.submit(fn)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            self._fallbacks[f"timeout.{what}"] += 1
            detail = f"MineStudio {what} did not finish within {timeout_s:.0f} s"
            self._mark_dead("timeout", detail, what)
            self._remember_engines()  # a hung first reset is still launching: its engine is in MineStudio's pool
            self._stop_engines()  # a hung socket read fails once its engine is gone, freeing the worker
            raise SimulatorTimeout(self._broken or f"{detail}; the instance is replaced before the next task") from None
        except Exception as error:
            detail = " ".join(f"{type(error).__name__}: {error}".split())
            self._mark_dead("crash", detail, what)
            self._remember_engines()
            raise SimulatorCrashed(
                self._broken
                or f"the Minecraft engine failed during {what} ({detail}); "
                "the instance is replaced before the next task"
            ) from error

    def _mark_dead(self, cause: Literal["crash", "timeout"], detail: str, what: Literal["reset", "step"]) -> None:
        self._failure = _Failure(cause, detail, self._task_name, what, self._steps if what == "step" else None)
        self._failures_in_a_row += 1
        log_line(f"minestudio: instance failed ({cause}) in {self._task_name} during {what}: {detail}")
        if self._failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
            self._broken = (
                f"MineStudio failed {self._failures_in_a_row} times in a row without one successful reset (last: "
                f"{detail}); the simulator is unusable"
            )

    def _replace_instance(self) -> None:
        """Close the dead instance (MineStudio's close, then its engine groups by pid) and start a fresh worker; the
        next reset constructs a new MinecraftSim."""
        failure = self._failure
        assert failure is not None
        old, old_worker = self._sim, self._worker
        self._sim = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minestudio")
        old_worker.shutdown(wait=False, cancel_futures=True)
        if old is not None:
            self._close_within(old, CLOSE_TIMEOUT_S)
        self._stop_engines()
        restart = SimulatorRestart(
            cause=failure.cause,
            detail=failure.detail,
            failed_task=failure.task,
            failed_during=failure.during,
            failed_step=failure.step,
            at=iso_seconds(),
        )
        self._restarts.append(restart)
        self._failure = None
        log_line(f"minestudio: replaced the instance before {self._task_name} ({restart.cause}: {restart.detail})")

    @staticmethod
    def _close_within(sim: Any, timeout_s: float) -> None:
        """MineStudio's own close (it removes its instance records and directory), in a daemon thread: a close that
        hangs never holds the evaluation or the process's exit."""
        closer = threading.Thread(target=sim.close, name="minestudio-close", daemon=True)
        closer.start()
        closer.join(timeout_s)

    def _stop_engines(self) -> None:
        """Stop the current instance's engine process groups, each by pid re-checked with its create time, and reap
        them (MineStudio never waits for an engine that died)."""
        from mcu_arms.process.procs import stop_process_group

        for process, created in self._engines:
            stop_process_group(process.pid, created, grace_s=ENGINE_STOP_GRACE_S)
            process.poll()
        self._engines = []

    def _remember_engines(self) -> None:
        import psutil

        known = {process.pid for process, _ in self._engines}
        for process in _engine_processes(self._sim):
            if process.pid in known:
                continue
            try:
                self._engines.append((process, psutil.Process(process.pid).create_time()))
            except psutil.NoSuchProcess:
                continue

    # --- reset --------------------------------------------------------------------------------------------------

    def _make_sim(self, seed: int) -> Any:
        try:
            from minestudio.simulator import MinecraftSim
            from minestudio.simulator.callbacks import CommandsCallback, RecordCallback  # noqa: F401 - imported to fail here, in the try
        except Exception as error:  # preflight imported it in a child: this process differs (sys.path, a later pip)
            self._broken = f"MineStudio cannot be imported in the green: {type(error).__name__}: {error}"
            raise SimulatorUnavailable(self._broken) from error
        self._seeded_start = _seeded_start_class()() if self._reset_mode == "seeded_fast" else None
        return MinecraftSim(
            action_type="env", obs_size=self._obs_size, render_size=self._render_size, seed=seed, callbacks=[]
        )

    def _prepare_reset(self, task: TaskSpec, seed: int) -> None:
        """Construct the instance if there is none (no engine starts until its first reset) and set up how this
        task starts."""
        if self._sim is None:
            self._sim = self._make_sim(seed)
        from minestudio.simulator.callbacks import CommandsCallback, RecordCallback

        self._record_callback = None
        if self._record_dir is not None:  # a fresh one per attempt: its first episode is episode_1, as upstream's
            self._record_callback = RecordCallback(record_path=str(self._record_dir), fps=RECORD_FPS, frame_type="pov")
        commands = CommandsCallback(list(task.init_commands)) if task.init_commands else None
        if self._seeded_start is not None:
            self._seeded_start.target = fast_reset_target(
                seed, task.name, self._fast_reset_biomes, self._random_tp_range
            )
        if self._reset_mode == "hard" or self._hard_reset_needed:
            self._sim.already_reset = False  # MinecraftSim then runs env.reset(), the seeded hard reset
        # The start is settled first, then the task's commands run, then recording sees the result.
        self._sim.callbacks = [
            callback for callback in (self._seeded_start, commands, self._record_callback) if callback
        ]
        self._sim.env.seed(int(seed))  # read by the next hard reset only; 1.1.6 asserts a Python int

    def reset(self, task: TaskSpec, seed: int) -> SimStep:
        with self._lock:
            self._task_name, self._steps = task.name, 0
            self._restarts = []
            self._fallbacks.clear()
            obs, info = self._reset_with_one_retry(task, seed)
        self._hard_reset_needed = False
        self._failures_in_a_row = 0
        # Minecraft's statistics survive fast resets, so counters count from here.
        self._baseline = _counters_from_info(info)
        return SimStep(frame=obs["image"], counters={}, info=self._visible_info(info))

    def _reset_with_one_retry(self, task: TaskSpec, seed: int) -> tuple[Any, dict[str, Any]]:
        """A reset that fails is retried once, on a fresh instance."""
        try:
            return self._reset_once(task, seed)
        except SimulatorUnavailable:
            if self._broken:
                raise
            return self._reset_once(task, seed)

    def _reset_once(self, task: TaskSpec, seed: int) -> tuple[Any, dict[str, Any]]:
        if self._broken:
            raise SimulatorUnavailable(self._broken)
        if self._failure is not None:
            self._replace_instance()
        self._prepare_reset(task, seed)
        result = self._call(self._sim.reset, self._reset_timeout_s, "reset")
        self._remember_engines()
        return result

    # --- step ---------------------------------------------------------------------------------------------------

    def _env_action(self, action: EnvAction) -> tuple[dict[str, Any], list[str]]:
        """MineStudio's env action for `action`, and the pressed keys it would ignore (counted as no effect)."""
        import numpy as np

        env_action = self._sim.env.action_space.no_op()
        no_effect = []
        for key in BUTTON_KEYS:
            pressed = int(bool(action.get(key, 0)))
            if key in NO_EFFECT_KEYS:
                if pressed:
                    self._fallbacks[f"no_effect.{key}"] += 1
                    no_effect.append(key)
                continue
            env_action[key] = pressed
        pitch, yaw = action.get(CAMERA_KEY, (0.0, 0.0))
        env_action[CAMERA_KEY] = np.array([pitch, yaw], dtype=np.float32)
        return env_action, no_effect

    def step(self, action: EnvAction) -> SimStep:
        if self._sim is None:
            raise RuntimeError("step() before reset()")
        if self._failure is not None:
            raise SimulatorCrashed(f"the instance failed earlier ({self._failure.detail}); reset to replace it")
        env_action, no_effect = self._env_action(action)
        with self._lock:
            obs, _reward, terminated, truncated, info = self._call(
                lambda: self._sim.step(env_action), self._step_timeout_s, "step"
            )
            self._steps += 1
        done = bool(terminated or truncated)
        if done:
            self._hard_reset_needed = True
        return SimStep(
            frame=obs["image"],
            counters=self._relative_counters(_counters_from_info(info)),
            done=done,
            info=self._visible_info(info),
            no_effect=no_effect,
        )

    def _relative_counters(self, counters: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        relative: dict[str, dict[str, int]] = {}
        for event, values in counters.items():
            before = self._baseline.get(event, {})
            grown = {name: count - before.get(name, 0) for name, count in values.items()}
            kept = {name: count for name, count in grown.items() if count > 0}
            if kept:
                relative[event] = kept
        return relative

    @staticmethod
    def _visible_info(info: Mapping[str, Any]) -> dict[str, Any]:
        """What a player sees in the HUD; positions, voxels and mob lists stay in the backend."""
        visible: dict[str, Any] = {}
        for key in HUD_INFO_KEYS:
            if key in info:
                value = info[key]
                visible[key] = value.item() if hasattr(value, "item") else value
        return visible

    def fallback_counts(self) -> dict[str, int]:
        return dict(self._fallbacks)

    def record_to(self, directory: Path | None) -> bool:
        self._record_dir = directory
        return True

    def finish_recording(self) -> Recording | None:
        """Write the task's recording now (1.1.6's RecordCallback writes at the next reset or close; its
        before_close saves the frames it holds and touches nothing else), and say what it holds."""
        callback, self._record_callback = self._record_callback, None
        if callback is None or self._record_dir is None:
            return None
        frames = len(callback.frames)
        with self._lock:
            callback.before_close(self._sim)
        path = self._record_dir / RECORDING_NAME
        if not path.is_file():
            return None
        width, height = self._render_size
        return Recording(
            path=path,
            width=width,
            height=height,
            frames=frames,
            source="MineStudio RecordCallback (frame_type pov: the render)",
        )

    def _claim(self) -> None:
        """Become this process's one open MineStudio simulator, or refuse (one closed or collected frees it)."""
        global _claimed_by
        with _claim_lock:
            holder = _claimed_by() if _claimed_by is not None else None
            if holder is not None and holder._claimed:
                raise SimulatorUnavailable(
                    "this process already runs a MineStudio evaluation: MineStudio 1.1.6 keeps one engine pool per "
                    "process, so a crash handled in one would stop the other's engine (one evaluation per green)"
                )
            _claimed_by = weakref.ref(self)
            self._claimed = True

    def _release_claim(self) -> None:
        with _claim_lock:
            self._claimed = False

    def close(self) -> None:
        with self._lock:
            if self._sim is not None and self._failure is None:
                future = self._worker.submit(self._sim.close)
                try:
                    future.result(timeout=CLOSE_TIMEOUT_S)
                except FutureTimeout:
                    log_line(f"minestudio: close did not finish within {CLOSE_TIMEOUT_S:.0f} s; stopping its engine")
                except Exception as error:  # closing a broken instance: its engine is stopped below either way
                    log_line(f"minestudio: close failed ({type(error).__name__}: {error}); stopping its engine")
            elif self._sim is not None:
                self._close_within(self._sim, CLOSE_TIMEOUT_S)
            self._stop_engines()
            self._sim = None
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._release_claim()
