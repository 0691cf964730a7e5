"""Fixtures shared by several test files."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from model_service import FakeModelService


@pytest.fixture
def model_service() -> Iterator[str]:
    FakeModelService.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModelService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    thread.join()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with an empty arms/."""
    (tmp_path / "arms").mkdir()
    return tmp_path


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The CLI's environment for a test: state and codex roots on local disk under /var/tmp, removed afterwards."""
    state = Path("/var/tmp") / f"mcu-arms-test-{os.getpid()}-{tmp_path.name}"
    yield {
        "PATH": os.environ["PATH"],
        "USER": "tester",
        "HOME": str(tmp_path / "home"),
        "MCU_ARMS_STATE_DIR": str(state / "state"),
        "MCU_CODEX_ROOT": str(state / "codex"),
        "MCU_CODEX_AUTH": str(tmp_path / "auth.json"),
    }
    shutil.rmtree(state, ignore_errors=True)


FAKE_MINESTUDIO = Path(__file__).resolve().parent / "fake_minestudio"


def _forget_minestudio() -> None:
    for name in [name for name in sys.modules if name == "minestudio" or name.startswith("minestudio.")]:
        del sys.modules[name]


@pytest.fixture
def fake_minestudio(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`import minestudio` finds the stand-in of MineStudio 1.1.6 (tests/fake_minestudio) during the test, and
    nothing after it. Yields the stand-in's control knobs, reset to a healthy host."""
    _forget_minestudio()
    monkeypatch.syspath_prepend(str(FAKE_MINESTUDIO))
    from minestudio.simulator import reset_control

    control = reset_control()
    control.destruct_sleeps_s = (0.0, 0.0)  # the real 3 s per closed instance, for the tests that time close
    yield control
    from minestudio.simulator.minerl.env.malmo import InstanceManager

    for env in control.envs:  # no engine process outlives its test
        env.release()
        env.close()
    for instance in list(InstanceManager._instance_pool):
        instance.kill()
    if control.daemon is not None:
        control.daemon.kill()
        control.daemon.wait()
    _forget_minestudio()
    backend = sys.modules.get("mcu_arms.green.sims.minestudio")
    if backend is not None:  # a test that failed before close leaves its simulator open: the next test starts free
        backend._claimed_by = None


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def minestudio_host(tmp_path: Path, fake_minestudio: Any) -> dict[str, Any]:
    """A host that passes every MineStudio check, with the stand-in as `minestudio`: java 8, xvfb-run, Xvfb and
    xauth on PATH (scripts), and the engine jar in MINESTUDIO_DIR. `env` is the environment to hand the backend."""
    from mcu_arms.green.sims.minestudio import ENGINE_JAR

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "java", "echo 'openjdk version \"1.8.0_392\"' >&2")
    for tool in ("xvfb-run", "Xvfb", "xauth"):
        write_script(bin_dir, tool, "exit 0")
    home = tmp_path / "MineStudio"
    (home / ENGINE_JAR).parent.mkdir(parents=True)
    (home / ENGINE_JAR).write_bytes(b"jar")
    env = {"PATH": str(bin_dir), "MINESTUDIO_DIR": str(home), "PYTHONPATH": str(FAKE_MINESTUDIO)}
    return {"env": env, "bin": bin_dir, "home": home, "control": fake_minestudio}


@pytest.fixture(scope="session")
def slurm_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SLURM_CONF of a single-node cluster (slurm_support.py: .ci/run's, or one started for the session as root);
    the tests that take it skip, saying why, without one."""
    from slurm_support import slurm_cluster

    with slurm_cluster(tmp_path_factory.mktemp("cluster")) as conf:
        yield conf
