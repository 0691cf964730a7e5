"""Start-up imports and analyses run with the cyclic garbage collector paused, and nothing runs on without it."""

from __future__ import annotations

import atexit
import gc
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import invoke

from mcu_arms.process.collector import imports_without_gc, without_cyclic_gc


@pytest.fixture(autouse=True)
def collector_on():
    assert gc.isenabled()
    yield
    gc.unfreeze()  # the test process's objects back where they were
    gc.enable()


def test_the_collector_is_paused_inside_and_back_after_nested_windows_and_errors() -> None:
    with imports_without_gc():
        assert not gc.isenabled()
        with imports_without_gc():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner window does not end the outer one"
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0, "what the imports made is out of the collector's sight"
    with pytest.raises(ImportError), imports_without_gc():
        import mcu_arms_no_such_module  # noqa: F401
    assert gc.isenabled(), "a failed import gives the collector back too"


def test_the_unfreeze_at_exit_is_registered_once_however_many_windows_end() -> None:
    before = atexit._ncallbacks()
    for _ in range(3):
        with imports_without_gc():
            pass
    assert atexit._ncallbacks() - before <= 1


def test_an_analysis_window_pauses_without_freezing() -> None:
    with without_cyclic_gc():
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_collector_paused_by_someone_else_is_left_paused() -> None:
    gc.disable()
    with imports_without_gc():
        pass
    assert not gc.isenabled()


def test_a_server_runs_with_the_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve green imports its server in a window; what it then runs (here a stand-in) has the collector on."""
    import mcu_arms.green.server

    seen: list[bool] = []
    monkeypatch.setattr(mcu_arms.green.server, "serve", lambda *args, **kwargs: seen.append(gc.isenabled()))
    outcome = invoke(tmp_path, {}, "serve", "green", "--port", "9")
    assert outcome.exit_code == 0, outcome.out + outcome.err
    assert seen == [True]


def test_the_entry_point_gives_the_collector_back_before_the_command_runs(tmp_path: Path) -> None:
    probe = (
        "import atexit, gc, sys\n"
        "sys.argv = ['mcu-arms', 'plan', '--dry-run']\n"
        "atexit.register(lambda: print('collector on:', gc.isenabled()))\n"
        "from mcu_arms.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr  # no arm here: a user error, after the command ran
    assert "collector on: True" in done.stdout
