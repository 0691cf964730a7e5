"""CodexPolicy against the stand-in codex (tests/fake_codex/codex): turns, sessions, failures, costs, the report."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from PIL import Image

from mcu_arms.contracts.agent_report import AgentReport, TurnRecord
from mcu_arms.contracts.camera import quantise_degrees
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import BUTTON_KEYS, InitPayload, ObservationPayload
from mcu_arms.purple.codex_agent import ActionsFileError, CodexPolicy, parse_actions, turn_budget
from mcu_arms.purple.codex_runner import CodexCall

FAKE_CODEX_DIR = Path(__file__).parent / "fake_codex"
ONE_ACTION = json.dumps([{"forward": 1}])


def _frame_b64() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (30, 120, 40)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


FRAME = _frame_b64()


@pytest.fixture
def codex_home():
    """A CODEX_HOME on local disk outside /tmp, as codex wants."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="mcu-codex-test-", dir="/var/tmp"))
    home = root / "arm"
    home.mkdir(mode=0o700)
    yield home
    import shutil

    shutil.rmtree(root, ignore_errors=True)


def _environ(home: Path, **extra: str) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("FAKE_CODEX", "MCU_CAMERA"))}
    environ["PATH"] = f"{FAKE_CODEX_DIR}{os.pathsep}{environ.get('PATH', '')}"
    environ["CODEX_HOME"] = str(home)
    environ.update(extra)
    return environ


def _policy(tmp_path: Path, home: Path, kind: str = "worldmodel", environ_extra=None, **options) -> CodexPolicy:
    options.setdefault("step_timeout", 30.0)
    options.setdefault("compact_limit", 200_000)
    opts = PurpleOptions(output_dir=tmp_path / "purple", **options)
    return CodexPolicy(kind, opts, environ=_environ(home, **(environ_extra or {})))


def _init(policy: CodexPolicy, task: str = "craft a crafting table"):
    return asyncio.run(policy.init(InitPayload(prompt="You are an AI agent that can play Minecraft.", text=task)))


def _act(policy: CodexPolicy, step: int):
    return asyncio.run(policy.act(ObservationPayload(step=step, obs=FRAME)))


def _calls(home: Path) -> list[dict]:
    path = home / "fake_codex_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _report(tmp_path: Path, kind: str = "worldmodel"):
    return AgentReport.model_validate_json((tmp_path / "purple" / f"{kind}_report.json").read_text())


def _set_mode(policy: CodexPolicy, mode: str) -> None:
    (policy.workdir / "fake_codex_mode").write_text(mode)


def test_successful_turn_plans_actions_that_are_replayed_before_the_next_turn(tmp_path, codex_home):
    policy = _policy(
        tmp_path,
        codex_home,
        model="gpt-test",
        provider_base_url="http://user:pw@127.0.0.1:1/v1",
        provider_wire_api="responses",
        provider_env_key="LOCAL_LLM_KEY",
        environ_extra={"LOCAL_LLM_KEY": "sk-local-secret"},
    )
    ack = _init(policy)
    assert ack.success and "codex-cli 0.0.0-fake" in ack.message
    answers = [_act(policy, step) for step in range(5)]

    assert answers[0].action["forward"] == 1 and answers[1].action["jump"] == 1 and answers[2].action["attack"] == 1
    assert answers[3].action["camera"] == [0.0, 4.32]
    assert set(answers[0].action) == set(BUTTON_KEYS) | {"camera"}
    calls = _calls(codex_home)
    assert len(calls) == 2, "four planned actions are replayed before the second turn"
    first = calls[0]
    assert first["stdin_is_devnull"] and first["own_process_group"]
    assert first["cwd"] == str(policy.workdir)
    assert first["configs"] == [
        "project_doc_max_bytes=0",
        "model_context_window=258000",
        "model_auto_compact_token_limit=200000",
    ]
    assert first["model"] == "gpt-test"
    provider = first["config"]["model_providers"]["mcu_arms_provider"]
    assert provider == {
        "name": "mcu_arms_provider",
        "base_url": "http://user:pw@127.0.0.1:1/v1",
        "wire_api": "responses",
        "env_key": "LOCAL_LLM_KEY",
    }
    assert first["config"]["model_provider"] == "mcu_arms_provider"
    assert (codex_home / "config.toml").stat().st_mode & 0o777 == 0o600
    assert "pw@" not in json.dumps(first["argv"]) and "sk-local-secret" not in json.dumps(first["argv"])
    argv = first["argv"]
    assert argv[:3] == ["exec", "--json", "--skip-git-repo-check"]
    assert argv[argv.index("-i") + 1] == str(policy.workdir / "frames" / "step_0.png")
    assert argv[argv.index("-i") + 2] == "--"
    assert "craft a crafting table" in first["prompt"] and "memory/hypotheses.json" in first["prompt"]
    assert (policy.workdir / "frames" / "step_4.png").exists()
    assert (policy.workdir / "memory" / "hypotheses.json").exists()
    assert (policy.workdir / "memory" / "world_model").is_dir() and (policy.workdir / "memory" / "procedures").is_dir()
    assert (policy.workdir / "turns" / "turn_0001" / "actions.json").exists()
    log = (policy.workdir / "logs.txt").read_text()
    assert "step 2: attack [turn 1 3/4]" in log

    report = _report(tmp_path)
    assert report.kind == "worldmodel" and report.turns == 2 and report.failed_turns == 0
    assert report.sessions_started == 2 and report.sessions_completed == 2 and report.sessions_discarded == 0
    assert report.compaction_limit == 200_000
    assert (
        report.compaction_in_force.codex_compacts_at == 200_000 and report.compaction_in_force.codex_window == 258_000
    )
    assert report.settings.codex_version == "codex-cli 0.0.0-fake"
    assert report.settings.codex_home_audit["private_mode"] is True
    assert report.settings.provider_config == str(codex_home / "config.toml")
    record = report.episodes[0].turn_records[0]
    assert record.frame_bytes == len(base64.b64decode(FRAME)) and record.prompt_bytes > 1000
    assert record.requests == 1 and record.payload_basis == "rollout" and record.request_bytes == record.payload_bytes
    assert record.payload_bytes > 20_000 + record.prompt_bytes, "codex's own tools and instructions travel too"
    assert record.rollout_bytes_after > 0 and record.actions_queued == 4
    assert record.usage.input_tokens == 988 and record.usage.output_tokens == 12 and record.last_total_tokens == 1000
    assert report.tokens.input_tokens == 2 * 988


def test_prolong_keeps_notes_and_no_memory_dir(tmp_path, codex_home):
    policy = _policy(tmp_path, codex_home, kind="prolong", compact_limit=None)
    _init(policy)
    _act(policy, 0)
    assert not any("model_auto_compact_token_limit" in config for config in _calls(codex_home)[0]["configs"])
    assert "no compaction limit given" in _report(tmp_path, "prolong").warnings[0]
    assert (policy.workdir / "notes.md").exists() and not (policy.workdir / "memory").exists()
    assert "notes.md" in _calls(codex_home)[0]["prompt"]
    assert (tmp_path / "purple" / "prolong_report.json").exists()


@pytest.mark.parametrize(
    ("mode", "expected", "category"),
    [
        ("fail", "wrote no actions.json (rc=1); codex failed: stream error: unexpected status 500", "codex_error"),
        ("nofile", "wrote no actions.json (rc=0); codex exited cleanly without writing it", "no_file"),
        ("garbage", "wrote no actions.json (rc=0); actions.json unusable: not JSON", "invalid_file"),
    ],
)
def test_failed_turn_logs_the_exact_line_answers_noop_and_discards_the_session(
    tmp_path, codex_home, capsys, mode, expected, category
):
    policy = _policy(tmp_path, codex_home, session_turns=3)
    _init(policy)
    _set_mode(policy, mode)
    answer = _act(policy, 7)
    assert all(value == 0 for key, value in answer.action.items() if key != "camera")
    assert "produced no actions" in answer.reason
    assert expected in capsys.readouterr().out
    report = _report(tmp_path)
    rc = "1" if mode == "fail" else "0"
    assert report.failed_turns_by_rc == {rc: 1} and report.failed_turns_by_reason == {category: 1}
    assert report.noops == {"failed_turn": 1}
    assert report.sessions_discarded == 1, "an unclean ending drops the thread"
    _set_mode(policy, "ok")
    _act(policy, 8)
    assert _calls(codex_home)[-1]["resume"] is None, "the turn after a failure starts cold"


def test_timeout_stops_only_the_turns_process_group(tmp_path, codex_home, capsys):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # in the test's own group
    try:
        policy = _policy(tmp_path, codex_home, step_timeout=4.0)
        _init(policy)
        _set_mode(policy, "hang")
        started = time.monotonic()
        answer = _act(policy, 3)
        elapsed = time.monotonic() - started
        assert answer.action["forward"] == 0
        assert elapsed < 4.0, "the noop reaches the green within its step timeout"
        grandchild_pid = int((policy.workdir / "fake_codex_grandchild.pid").read_text())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(grandchild_pid):
            time.sleep(0.05)
        assert not _alive(grandchild_pid), "the fake's sleeping grandchild went with its group"
        assert bystander.poll() is None, "a process outside the turn's group is untouched"
        out = capsys.readouterr().out
        assert f"wrote no actions.json (rc=124); timed out after {turn_budget(4.0):.1f} s (SIGTERM group" in out
        report = _report(tmp_path)
        assert report.failed_turns_by_reason == {"timeout": 1} and report.sessions_discarded == 1
    finally:
        bystander.kill()
        bystander.wait()


def test_processes_a_finished_turn_leaves_in_its_group_are_stopped(tmp_path, codex_home, capsys):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # in the test's own group
    try:
        policy = _policy(tmp_path, codex_home)
        _init(policy)
        _set_mode(policy, "leave-child")
        assert _act(policy, 0).action["forward"] == 1, "the turn itself succeeded"
        leftover = int((policy.workdir / "fake_codex_leftover.pid").read_text())
        _wait_gone(leftover)
        assert bystander.poll() is None, "a process outside the turn's group is untouched"
        assert "1 process(es) the turn left behind stopped" in capsys.readouterr().out
        report = _report(tmp_path)
        assert report.leftover_processes_stopped == 1 and report.failed_turns == 0
        assert len(report.warnings) == 1 and "left 1 process(es) running" in report.warnings[0]
    finally:
        bystander.kill()
        bystander.wait()


def test_cancelled_turn_stops_its_group_and_drops_the_session(tmp_path, codex_home, capsys):
    policy = _policy(tmp_path, codex_home, session_turns=3, environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION})
    _init(policy)
    _act(policy, 0)
    _set_mode(policy, "hang")
    grandchild_file = policy.workdir / "fake_codex_grandchild.pid"

    async def cancel_mid_turn() -> None:
        acting = asyncio.ensure_future(policy.act(ObservationPayload(step=1, obs=FRAME)))
        give_up = time.monotonic() + 20
        while not grandchild_file.exists():
            assert time.monotonic() < give_up, "the fake codex never started hanging"
            await asyncio.sleep(0.05)
        acting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await acting

    asyncio.run(cancel_mid_turn())
    _wait_gone(int(grandchild_file.read_text()))
    _wait_gone(_calls(codex_home)[1]["pid"])
    assert "wrote no actions.json (rc=143); cancelled" in capsys.readouterr().out
    report = _report(tmp_path)
    assert report.failed_turns_by_reason == {"cancelled": 1} and report.sessions_discarded == 1
    _set_mode(policy, "ok")
    _act(policy, 2)
    calls = _calls(codex_home)
    assert calls[1]["resume"] == calls[0]["thread_id"] and calls[2]["resume"] is None, "then a cold start"


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), f"pid {pid} is still running"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sessions_are_resumed_for_session_turns_then_dropped(tmp_path, codex_home):
    policy = _policy(tmp_path, codex_home, session_turns=2, environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION})
    _init(policy)
    for step in range(5):
        _act(policy, step)
    calls = _calls(codex_home)
    assert [call["resume"] for call in calls] == [
        None,
        calls[0]["thread_id"],
        None,
        calls[2]["thread_id"],
        None,
    ]
    assert calls[1]["thread_id"] == calls[0]["thread_id"] and calls[2]["thread_id"] != calls[0]["thread_id"]
    argv = calls[1]["argv"]
    assert argv.index("resume") < argv.index("-i") and argv.index("-c") < argv.index("resume")
    assert "You are playing Minecraft" not in calls[1]["prompt"], "a resumed turn does not resend the system prompt"
    report = _report(tmp_path)
    assert report.sessions_started == 3 and report.sessions_completed == 2
    first, resumed = report.episodes[0].turn_records[:2]
    assert resumed.resumed and resumed.frames_in_session == 2 and resumed.session == first.session
    assert resumed.rollout_bytes_before == first.rollout_bytes_after
    # the resumed request re-sends the whole thread, the first frame included
    assert resumed.payload_bytes > first.payload_bytes + resumed.frame_bytes
    assert resumed.thread_usage.input_tokens == 2 * 988 and resumed.usage.input_tokens == 988


def test_overflow_drops_the_session_and_the_next_turn_starts_cold(tmp_path, codex_home, capsys):
    policy = _policy(tmp_path, codex_home, session_turns=5, environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION})
    _init(policy)
    _act(policy, 0)
    _set_mode(policy, "overflow")
    assert _act(policy, 1).action["forward"] == 0
    _set_mode(policy, "ok")
    _act(policy, 2)
    calls = _calls(codex_home)
    assert calls[1]["resume"] == calls[0]["thread_id"] and calls[2]["resume"] is None
    assert "wrote no actions.json (rc=1); context window overflow (Codex ran out of room" in capsys.readouterr().out
    report = _report(tmp_path)
    assert report.overflow_resets == 1 and report.sessions_discarded == 1
    assert report.failed_turns_by_reason == {"overflow": 1}


def test_compactions_are_counted_from_the_rollout(tmp_path, codex_home):
    policy = _policy(
        tmp_path,
        codex_home,
        session_turns=4,
        compact_limit=1234,
        environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION, "FAKE_CODEX_MODE": "compact:2"},
    )
    _init(policy)
    for step in range(4):
        _act(policy, step)
    report = _report(tmp_path)
    assert report.compactions == 2 and report.compaction_limit == 1234
    assert [r.compactions_in_thread for r in report.episodes[0].turn_records] == [0, 1, 1, 2]
    assert "model_auto_compact_token_limit=1234" in _calls(codex_home)[0]["configs"]


def test_quantised_host_sends_the_nearest_surviving_camera_value(tmp_path, codex_home):
    policy = _policy(
        tmp_path,
        codex_home,
        environ_extra={"MCU_CAMERA_QUANTISED": "1", "FAKE_CODEX_ACTIONS": json.dumps([{"camera": [4.32, -30]}])},
    )
    _init(policy)
    pitch, yaw = _act(policy, 0).action["camera"]
    assert pitch == pytest.approx(3.2154, abs=1e-4) and yaw == -10.0
    assert quantise_degrees(pitch) == pytest.approx(pitch), "the value sent survives the host's quantiser as is"
    assert "rounds every camera move" in (policy.workdir / "system_prompt.md").read_text()
    assert _report(tmp_path).episodes[0].camera_compensated == 1


def test_cost_warnings_for_payload_and_latency_jumps(tmp_path, codex_home, capsys):
    policy = _policy(tmp_path, codex_home)
    _init(policy)

    def record(turn: int, latency: float, payload: int) -> TurnRecord:
        return TurnRecord(
            turn=turn,
            step=turn,
            session=1,
            thread_id="t",
            resumed=True,
            outcome="ok",
            rc=0,
            latency_s=latency,
            prompt_bytes=1,
            frame_bytes=1,
            rollout_bytes_before=0,
            rollout_bytes_after=0,
            payload_bytes=payload,
            frames_in_session=turn,
            actions_queued=1,
            compactions_in_thread=0,
        )

    for turn in range(1, 4):
        policy.episode.turn_records.append(record(turn, 10.0, 1000))
    policy._check_cost(record(4, 10.0, 1000))
    assert policy.episode.warnings == []
    policy._check_cost(record(5, 31.0, 6_000_000))
    warnings = policy.episode.warnings
    assert len(warnings) == 2
    assert "payload 6.00 MB is past ~5.15 MB" in warnings[0] and "latency 31.0 s is over 3x" in warnings[1]
    out = capsys.readouterr().out
    assert "WARNING turn 5: session payload" in out and "WARNING turn 5: latency" in out


def test_episodes_sharing_an_output_dir_are_summed_in_one_report(tmp_path, codex_home):
    first, second = _policy(tmp_path, codex_home), _policy(tmp_path, codex_home)
    _init(first, "task one")
    _init(second, "task two")
    assert first.workdir.name == "task_01" and second.workdir.name == "task_02"
    _act(first, 0)
    _act(second, 0)
    asyncio.run(first.close())
    report = _report(tmp_path)
    assert [e.task for e in report.episodes] == ["task one", "task two"] and report.turns == 2
    assert report.episodes[0].observations == 1 and report.episodes[0].actions_replayed == 1


def test_setup_errors_are_user_errors(tmp_path, codex_home):
    environ = _environ(codex_home)
    del environ["CODEX_HOME"]
    policy = CodexPolicy("worldmodel", PurpleOptions(output_dir=tmp_path), environ=environ)
    with pytest.raises(UserError, match="CODEX_HOME is not set"):
        _init(policy)
    environ = _environ(codex_home, PATH="/nonexistent")
    with pytest.raises(UserError, match="npm install -g @openai/codex"):
        _init(CodexPolicy("worldmodel", PurpleOptions(output_dir=tmp_path), environ=environ))
    with pytest.raises(UserError, match="--output-dir"):
        _init(CodexPolicy("prolong", PurpleOptions(), environ=_environ(codex_home)))
    with pytest.raises(UserError, match="does not exist"):
        _init(CodexPolicy("prolong", PurpleOptions(output_dir=tmp_path), environ=_environ(codex_home / "gone")))
    keyed = PurpleOptions(
        output_dir=tmp_path, provider_base_url="http://127.0.0.1:1/v1", provider_env_key="NO_SUCH_KEY"
    )
    with pytest.raises(UserError, match="NO_SUCH_KEY is not set") as error:
        _init(CodexPolicy("prolong", keyed, environ=_environ(codex_home)))
    assert error.value.key == "--provider-env-key"
    with pytest.raises(ValueError, match="should match pattern"):
        PurpleOptions(provider_env_key="sk-the-key-itself")
    chat = PurpleOptions(output_dir=tmp_path, provider_base_url="http://127.0.0.1:1/v1", provider_wire_api="chat")
    with pytest.raises(UserError, match="no longer speaks wire API 'chat'") as error:
        _init(CodexPolicy("prolong", chat, environ=_environ(codex_home)))
    assert error.value.key == "--provider-wire-api"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"forward": 1}', "must be a JSON list"),
        ("[]", "empty list"),
        ('[{"chat": "/give @p diamond"}]', "unknown keys ['chat']"),
        ('[{"forward": 2}]', "'forward' must be 0 or 1, got 2"),
        ('[{"forward": true}]', "'forward' must be 0 or 1, got true"),
        ('[{"camera": [0, NaN]}]', "yaw must be a finite number"),
        ('[{"camera": [0]}]', "must be [pitch, yaw]"),
        ('[{"camera": [0, 400]}]', "beyond ±180"),
        ('[{"forward": 1}, 5]', "action 1 must be an object"),
    ],
)
def test_invalid_actions_files_are_refused_with_the_reason(text, message):
    with pytest.raises(ActionsFileError) as error:
        parse_actions(text)
    assert message in str(error.value)


def test_valid_actions_fill_every_key():
    (action,) = parse_actions('[{"attack": 1, "camera": [1.5, -2]}]')
    assert action["attack"] == 1 and action["forward"] == 0 and action["camera"] == [1.5, -2.0]
    assert set(action) == set(BUTTON_KEYS) | {"camera"}


def test_the_command_line_carries_no_provider_and_elides_the_prompt():
    call = CodexCall(
        executable="codex",
        prompt="secret plan",
        image=Path("f.png"),
        thread_id="t",
        overrides=("project_doc_max_bytes=0",),
    )
    assert "secret plan" not in call.shown() and "<prompt 11 bytes>" in call.shown()
    argv = call.argv()
    assert argv.index("-c") < argv.index("resume") < argv.index("-i"), "options before resume, or codex refuses them"


def test_the_reason_of_a_startup_failure_is_codexs_error_line_not_the_last_stderr_line(tmp_path, codex_home, capsys):
    policy = _policy(tmp_path, codex_home)
    _init(policy)
    _set_mode(policy, "startup-error")
    assert _act(policy, 0).action["forward"] == 0
    (record,) = _report(tmp_path).episodes[0].turn_records
    assert record.reason == 'codex failed: Error loading config.toml: `wire_api = "chat"` is no longer supported.'
    assert "in `model_providers" not in capsys.readouterr().out
    assert record.requests == 0 and record.payload_bytes == 0, "codex sent nothing"


def test_a_resume_codex_refuses_is_a_lost_session_and_the_step_plans_from_a_cold_start(tmp_path, codex_home, capsys):
    policy = _policy(tmp_path, codex_home, session_turns=3, environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION})
    _init(policy)
    _act(policy, 0)
    lost = _calls(codex_home)[0]["thread_id"]
    for rollout in (codex_home / "sessions").rglob(f"rollout-*-{lost}.jsonl"):
        rollout.unlink()
    answer = _act(policy, 1)
    assert answer.action["forward"] == 1, "the step still gets the cold start's actions, not a noop"
    calls = _calls(codex_home)
    assert [call["resume"] for call in calls] == [None, lost, None]
    out = capsys.readouterr().out
    assert f"session lost (Error: thread/resume: thread/resume failed: no rollout found for thread id {lost}" in out
    report = _report(tmp_path)
    assert report.sessions_lost == 1 and report.failed_turns_by_reason == {"session_lost": 1}
    assert report.noops == {} and report.sessions_discarded == 1
    assert report.episodes[0].turn_records[2].cold_start == "session_lost"


def test_a_thread_that_fills_a_no_compaction_window_is_dropped_before_codex_could_compact_it(tmp_path, codex_home):
    policy = _policy(
        tmp_path,
        codex_home,
        session_turns=3,
        compact_limit=200_000,
        context_window=100_000,
        environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION, "FAKE_CODEX_TOKENS": "150000"},
    )
    _init(policy)
    _act(policy, 0)
    _act(policy, 1)
    calls = _calls(codex_home)
    assert [call["resume"] for call in calls] == [None, None], "150,000 reported tokens fill a 100,000 window"
    assert "model_context_window=1000000000000000" in calls[0]["configs"], "codex is told no bound of its own"
    report = _report(tmp_path)
    assert report.window_full_resets == 1 and report.compactions == 0 and report.failed_turns == 0
    assert report.episodes[0].turn_records[1].cold_start == "window_full"
    in_force = report.compaction_in_force
    assert not in_force.compact and in_force.codex_window == 272_000 and in_force.codex_compacts_at == 244_800
    assert in_force.cold_start_at == 100_000


def test_a_compaction_codex_forces_on_a_no_compaction_arm_is_loud_and_drops_the_thread(tmp_path, codex_home):
    policy = _policy(
        tmp_path,
        codex_home,
        session_turns=3,
        compact_limit=600_000,
        context_window=300_000,
        environ_extra={"FAKE_CODEX_ACTIONS": ONE_ACTION, "FAKE_CODEX_MODE": "compact:2"},
    )
    _init(policy)
    for step in range(3):
        _act(policy, step)
    calls = _calls(codex_home)
    assert [call["resume"] for call in calls] == [None, calls[0]["thread_id"], None], "compacted on its 2nd turn"
    report = _report(tmp_path)
    assert report.unwanted_compactions == 1 and report.compactions == 1
    assert any("codex compacted a thread of an arm that does not compact" in w for w in report.warnings)
    assert any("threads are dropped at 244800 tokens, below the stated window 300000" in w for w in report.warnings)


def test_a_config_file_mcu_arms_did_not_write_is_moved_aside_and_no_provider_leaves_none(tmp_path, codex_home):
    (codex_home / "config.toml").write_text('model = "someone-elses"\n')
    policy = _policy(tmp_path, codex_home)
    _init(policy)
    _act(policy, 0)
    assert not (codex_home / "config.toml").exists() and "model_providers" not in _calls(codex_home)[0]["config"]
    (aside,) = codex_home.glob("config.toml.moved-*")
    assert aside.read_text() == 'model = "someone-elses"\n'
    assert any("was not written by mcu-arms" in warning for warning in _report(tmp_path).warnings)


def test_a_schema_1_report_reads_with_its_payloads_marked_as_the_old_sum():
    record = {
        "turn": 1,
        "step": 0,
        "session": 1,
        "thread_id": "t",
        "resumed": False,
        "outcome": "ok",
        "rc": 0,
        "latency_s": 1.0,
        "prompt_bytes": 10,
        "frame_bytes": 20,
        "rollout_bytes_before": 0,
        "rollout_bytes_after": 50,
        "payload_bytes": 30,
        "frames_in_session": 1,
        "actions_queued": 1,
        "compactions_in_thread": 0,
    }
    episode = {"task_dir": "task_01", "task": "t", "started_at": "now", "turn_records": [record]}
    settings = {
        "kind": "worldmodel",
        "session_turns": 1,
        "compact_limit": None,
        "step_timeout": 60,
        "turn_timeout": 50,
        "model": None,
        "provider_base_url": None,
        "provider_wire_api": None,
        "camera_quantised": False,
        "codex_executable": "codex",
        "codex_version": "x",
        "codex_home": "h",
        "codex_home_audit": {},
    }
    data = {
        "schema_version": 1,
        "kind": "worldmodel",
        "written_at": "now",
        "settings": settings,
        "turns": 1,
        "failed_turns": 0,
        "failed_turns_by_rc": {},
        "failed_turns_by_reason": {},
        "sessions_started": 1,
        "sessions_completed": 1,
        "sessions_discarded": 0,
        "compactions": 0,
        "overflow_resets": 0,
        "compaction_limit": None,
        "noops": {},
        "warnings": [],
        "episodes": [episode],
        "latency": {"turns": 1, "median_s": 1.0, "p90_s": 1.0, "max_s": 1.0, "max_payload_bytes": 30},
    }
    report = AgentReport.model_validate(data)
    assert report.schema_version == 2
    (migrated,) = report.episodes[0].turn_records
    assert migrated.payload_bytes == 30 and migrated.payload_basis == "legacy" and migrated.requests is None
