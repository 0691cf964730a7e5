"""Test knobs for the stand-in (the real package has none). Everything defaults to "behave like a healthy host"."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

# The default of spawn_engine_process in a process the tests cannot reach in (the acceptance command's).
SPAWN_ENGINE_ENV = "FAKE_MINESTUDIO_SPAWN_ENGINE"


@dataclass
class FakeControl:
    # check_engine(): False makes MinecraftSim() prompt with input() and exit(0), as 1.1.6 does without its jar.
    engine_present: bool = True
    # Start a real process group per instance (a leader with one child, like launchClient.sh -> xvfb-run/java),
    # so pid-based stopping can be tested. The pid is sim.env.instances[0].minecraft_process.pid.
    spawn_engine_process: bool = field(default_factory=lambda: os.environ.get(SPAWN_ENGINE_ENV) == "1")
    # Start a long-lived "daemon" child in its own session on first launch, as database_manager.check_daemon does
    # (kept in `daemon`).
    spawn_daemon_process: bool = False
    # The first reset of a new instance raises EOFError as when Java exits during launch (malmo.py launch loop).
    launch_fails: bool = False
    # The next launch blocks (Java never says it is ready) until its engine process is stopped, then raises
    # EOFError; later launches run on (the knob clears itself). Needs spawn_engine_process.
    launch_hangs: bool = False
    # Crash the engine of the first instance that has taken this many env steps (commands and empty frames count);
    # later instances run on (the knob clears itself).
    crash_at_env_step: int | None = None
    # MinecraftInstance._destruct's sleeps: before sending <Exit>, and after it (then it SIGKILLs the group). The
    # real ones (1 s, 2 s) are the default; the tests' fixture sets (0, 0) unless a test times close.
    destruct_sleeps_s: tuple[float, float] = (1.0, 2.0)
    # Whether the engine's info carries health and food_level (1.1.6 copies them only when the engine sends them).
    send_vitals: bool = True
    # Observability for tests.
    daemon: Any = None
    launches: int = 0
    envs: list[Any] = field(default_factory=list)


control = FakeControl()


def reset_control() -> FakeControl:
    """Restore the defaults and empty MineStudio's instance pool (call from a test fixture); returns the shared
    control object."""
    from minestudio.simulator.minerl.env.malmo import InstanceManager

    fresh = FakeControl()
    for name in fresh.__dataclass_fields__:
        setattr(control, name, getattr(fresh, name))
    InstanceManager._instance_pool.clear()
    return control
