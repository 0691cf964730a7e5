"""The fork server: children forked from a warm template are the processes a fresh interpreter would have been (own
session, working directory, umask, listening socket, log), carry their own owner token where `stop` and `status`
read it, are stopped and reaped as a Popen is; a child that could not prove itself ours never runs; a run of several
episodes forks its processes and records the same episodes as a run that starts each by exec."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from run_helpers import cli_env, run_cli, wait_for, write_arm

from mcu_arms.contracts.access import ArmAccess
from mcu_arms.contracts.settings import ProcessPlan
from mcu_arms.forkserver import MODULE as FORK_TEMPLATE_MODULE
from mcu_arms.forkserver import ForkRefused, ForkServer
from mcu_arms.procs import OWNER_TOKEN_ENV, PRIVATE_UMASK, Child, inherited_environment
from mcu_arms.supervise.forks import FORKED_COMMAND_MODULES
from mcu_arms.supervise.readiness import card_answers, listener_owner

PRELOAD = ("mcu_arms.entry", "mcu_arms.cli", "mcu_arms.cli.serve", "mcu_arms.purple.server")


@contextlib.contextmanager
def _template(tmp_path: Path, token: str | None = None, preload: tuple[str, ...] = PRELOAD) -> Iterator[ForkServer]:
    """A fork server as a run starts one, closed afterwards."""
    env = inherited_environment(os.environ)
    forks = ForkServer.start(env, str(tmp_path), OWNER_TOKEN_ENV, token or uuid.uuid4().hex, preload)
    try:
        yield forks
    finally:
        forks.close()


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A socket bound and listening as the supervisor hands one to a server."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock
    sock.close()


def _purple(tmp_path: Path, sock: socket.socket, env: dict[str, str] | None = None) -> ProcessPlan:
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "mcu_arms", "serve", "purple", "--agent", "noop", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--card-url", url, "--output-dir", str(tmp_path / "purple")]
    return ProcessPlan(
        role="purple",
        argv=argv,
        env=env or {},
        cwd=str(tmp_path),
        log=str(tmp_path / "purple.log"),
        port=port,
        url=url,
        listen_fd=sock.fileno(),
    )


def _started(plan: ProcessPlan, forks: ForkServer) -> Child:
    child = Child(
        plan,
        os.environ,
        secret_env=ArmAccess.generate().environment_for("purple"),
        umask=PRIVATE_UMASK,
        forks=forks,
    )
    child.start()
    return child


@contextlib.contextmanager
def _serving(plan: ProcessPlan, forks: ForkServer) -> Iterator[Child]:
    """The child started (however the fork server let it be) and answering its card; stopped afterwards."""
    child = _started(plan, forks)
    try:
        wait_for(lambda: card_answers(child.plan.url or ""), f"the purple's card ({child.started_how})")
        yield child
    finally:
        child.stop(grace_s=10)


def test_a_forked_child_is_the_process_a_fresh_interpreter_would_be(tmp_path: Path, listening: socket.socket) -> None:
    with _template(tmp_path) as forks:
        child = _started(_purple(tmp_path, listening), forks)
        try:
            assert child.started_how == "forked from the warm template"
            assert child.pid is not None
            process = psutil.Process(child.pid)
            assert process.ppid() == forks.process.pid  # the template reaps it
            assert os.getsid(child.pid) == child.pid  # a session of its own: stopped as a group
            assert process.cwd() == str(tmp_path)
            assert "Umask:\t0077" in Path(f"/proc/{child.pid}/status").read_text()
            # The proof `stop` and `status` read: its own token, not the template's, in /proc/PID/environ.
            assert process.environ()[OWNER_TOKEN_ENV] == child.token
            assert psutil.Process(forks.process.pid).environ()[OWNER_TOKEN_ENV] != child.token
            assert process.cmdline() == child.plan.argv  # what ps shows: its own command, not the template's
            wait_for(lambda: card_answers(child.plan.url or ""), "the forked purple's card")
            assert listener_owner(child.plan.port or 0, process) == (True, child.pid)  # the socket it was handed
            assert child.poll() is None
        finally:
            outcome = child.stop(grace_s=10)
        assert outcome.was_running and not outcome.survivors
        assert child.poll() == 0  # its exit code, from the template that reaped it
        log = Path(child.plan.log).read_text()
        assert "purple agent=noop listening on 127.0.0.1" in log
        # Its access token reached it with the go, not through the template (whose memory later children share).
        assert "access: a bearer token is required on every call but the agent card" in log
        assert not psutil.pid_exists(child.pid) or psutil.Process(child.pid).ppid() != forks.process.pid
    assert forks.process.poll() == 0  # the template exits once its socket is closed


def test_a_child_whose_environment_differs_is_started_by_exec(tmp_path: Path, listening: socket.socket) -> None:
    with (
        _template(tmp_path) as forks,
        _serving(_purple(tmp_path, listening, {"MCU_ARMS_TEST_EXTRA": "1"}), forks) as child,
    ):
        assert child.started_how == "exec (another environment)"
        assert psutil.Process(child.pid).ppid() == os.getpid()


def test_a_child_that_cannot_show_its_own_token_never_runs(tmp_path: Path, listening: socket.socket) -> None:
    """Its pid is never answered: the template refuses it, and the supervisor starts that child by exec instead."""
    with _template(tmp_path, token="short") as forks, _serving(_purple(tmp_path, listening), forks) as child:
        assert child.started_how == (
            f"exec (the forked child could not show its own {OWNER_TOKEN_ENV} in /proc/PID/environ)"
        )
        assert psutil.Process(child.pid).environ()[OWNER_TOKEN_ENV] == child.token


def test_a_template_that_cannot_start_leaves_every_child_to_exec(tmp_path: Path, listening: socket.socket) -> None:
    with _template(tmp_path, preload=("mcu_arms.no_such_module",)) as forks:
        with _serving(_purple(tmp_path, listening), forks) as child:
            assert child.started_how.startswith("exec (the fork server could not import: ModuleNotFoundError")
        with pytest.raises(ForkRefused, match="could not import"):  # and it is not waited for again
            forks.warm_up("mcu_arms.a2a_client:tls_context")


def test_the_template_imports_every_module_it_is_given() -> None:
    """A renamed module would leave every run's children started by exec: the names must import."""
    import importlib

    for name in FORKED_COMMAND_MODULES:
        importlib.import_module(name)


def _steps(project: Path, arm: str, episode: int) -> list[dict]:
    """What an episode played, without the clock: the same seed must play the same way however it was started."""
    timing = {"t", "agent_ms", "sim_ms"}
    lines = next((project / "output" / arm / f"episode_{episode:03d}" / "green").glob("*/steps.jsonl")).read_text()
    return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in lines.splitlines()]


@pytest.mark.slow
def test_a_run_of_several_episodes_forks_them_and_records_what_exec_would(tmp_path: Path) -> None:
    records = {}
    for how, flags in (("fork", []), ("exec", ["--no-fork-server"])):
        project = tmp_path / how
        write_arm(project, "paired", agent="scripted", steps=25)
        done = run_cli(project, tmp_path / f"state-{how}", "run", "--arm", "paired", "--seeds", "0,1", *flags)
        assert done.returncode == 0, done.stdout + done.stderr
        log = (project / "output" / "paired" / "episode_002" / "logs" / "mcu-arms.log").read_text()
        started = [line for line in log.splitlines() if " started, pid " in line]
        assert len(started) == 3
        expected = "forked from the warm template" if how == "fork" else "exec"
        assert all(line.endswith(expected) for line in started), started
        records[how] = [_steps(project, "paired", episode) for episode in (1, 2)]
        assert not _templates_of(tmp_path / f"state-{how}"), "the run's fork server outlived it"
    assert records["fork"] == records["exec"]


def _templates_of(state_dir: Path) -> list[int]:
    """Fork server templates still running for the runs that used `state_dir` (looked at, never signalled)."""
    return [
        process.pid
        for process in psutil.process_iter(["cmdline", "environ"])
        if FORK_TEMPLATE_MODULE in (process.info["cmdline"] or [])
        and (process.info["environ"] or {}).get("MCU_ARMS_STATE_DIR") == cli_env(state_dir)["MCU_ARMS_STATE_DIR"]
    ]


@pytest.mark.slow
def test_a_single_episode_forks_from_the_template_its_run_started_first(tmp_path: Path) -> None:
    """`mcu-arms run` starts its template before its own imports: a single episode's processes are forked from it
    (without --no-fork-server), and the template ends with the run."""
    write_arm(tmp_path, "single", agent="scripted", steps=5)
    done = run_cli(tmp_path, tmp_path / "state", "run", "--arm", "single")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "output" / "single" / "episode_001" / "logs" / "mcu-arms.log").read_text()
    started = [line for line in log.splitlines() if " started, pid " in line]
    assert [line.split()[1] for line in started] == ["green", "purple", "client"]
    assert all(line.endswith("forked from the warm template") for line in started), started
    assert not _templates_of(tmp_path / "state"), "the run's fork server outlived it"


def test_a_run_that_ends_before_its_episodes_leaves_no_template(tmp_path: Path) -> None:
    write_arm(tmp_path, "present")
    done = run_cli(tmp_path, tmp_path / "state", "run", "--arm", "absent")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "absent" in done.stderr
    assert not _templates_of(tmp_path / "state"), "an untaken template outlived its run"


def test_the_early_template_is_taken_only_for_the_environment_it_was_started_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcu_arms.supervise import forks

    monkeypatch.chdir(tmp_path)
    forks.start_early_template()
    other = forks._early[-1][0]
    assert forks._take_early({**os.environ, "MCU_ARMS_SOMETHING_ELSE": "1"}, str(tmp_path)) is None
    assert other.process.wait(timeout=30) is not None, "a template for another environment is discarded"

    forks.start_early_template()
    taken = forks._take_early(dict(os.environ), str(tmp_path))
    try:
        assert taken is not None and forks._early == []
        taken.warm_up("mcu_arms.a2a_client:tls_context")  # it serves
    finally:
        taken.close()

    forks.start_early_template()
    untaken = forks._early[-1][0]
    forks.discard_early_template()
    assert untaken.process.poll() is not None and forks._early == []


def test_an_untaken_template_is_stopped_at_exit_even_after_an_interrupted_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C in the middle of the CLI's imports leaves half-made modules behind; the exit's discard of the early
    template must stop it without importing anything (a CI run caught a traceback from `import yaml` there)."""
    import sys

    from mcu_arms.supervise import forks

    monkeypatch.chdir(tmp_path)
    forks.start_early_template()
    untaken = forks._early[-1][0]
    for half_made in ("mcu_arms.procs", "mcu_arms.contracts.settings", "yaml"):
        monkeypatch.setitem(sys.modules, half_made, None)  # importing it now raises, as a half-made module does
    forks.discard_early_template()
    assert untaken.process.returncode is not None and forks._early == []
