"""The worldmodel and prolong agents through the REAL codex CLI (@openai/codex from npm, pinned in real_codex.py)
against a scripted Responses-API server on loopback (mock_responses.py): what codex actually sends and does, held to
what the agents record. Skipped, with the reason, when npm cannot install codex here.

The agents' turn directories sit inside a git checkout whose root holds an AGENTS.md, as a user's would.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import invoke
from mock_responses import MockResponses
from PIL import Image
from real_codex import CODEX_VERSION, codex_cli

from mcu_arms.contracts.agent_report import AgentReport, TurnRecord
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import InitPayload, ObservationPayload
from mcu_arms.purple.codex_agent import CodexPolicy

# the real codex CLI, installed with npm (424 MB), driven turn by turn: the slow tier
pytestmark = pytest.mark.slow

KEY_VARIABLE = "MOCK_CODEX_KEY"
KEY_VALUE = "sk-mock-not-a-real-key"
SECRET = "s3cret-in-the-url"
MARKER = "CHECKOUT-AGENTS-MD-MARKER"
MODEL = "mock-model"
PAYLOAD_TOLERANCE = 0.10
OVERFLOW = "Codex ran out of room in the model's context window"


def _frame() -> str:
    """A 128x128 frame of noise (~49 KB of PNG: it does not compress), as the green sends."""
    buffer = io.BytesIO()
    Image.frombytes("RGB", (128, 128), os.urandom(128 * 128 * 3)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


FRAME = _frame()


def plan_step(actions: list[dict], **usage: int) -> list[dict]:
    """One turn's answers: a shell command writing actions.json, then (after its output) a closing message."""
    closing = {"when": "tool_output", "text": "Wrote actions.json."}
    if usage:
        closing["usage"] = usage
    return [{"when": "user", "write_file": {"path": "actions.json", "content": actions}}, closing]


ONE = [{"forward": 1}]


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    found = codex_cli()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture
def codex_home() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="mcu-real-codex-", dir="/var/tmp"))  # codex refuses helpers under /tmp
    home = root / "arm"
    (home / "home").mkdir(parents=True)
    (home / "sqlite").mkdir()
    home.chmod(0o700)
    yield home
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with an AGENTS.md at its root, like the user's clone of this repository."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "checkout")], check=True)
    (tmp_path / "checkout" / "AGENTS.md").write_text(f"# Project rules\n{MARKER}: never reach the model.\n")
    return tmp_path / "checkout"


@pytest.fixture
def mock() -> Iterator[MockResponses]:
    with MockResponses() as server:
        yield server


def _policy(
    codex_bin: Path, home: Path, checkout: Path, mock: MockResponses, kind: str = "worldmodel", **options
) -> CodexPolicy:
    options.setdefault("step_timeout", 60.0)
    options.setdefault("compact_limit", 200_000)
    base_url = mock.url.replace("http://", f"http://user:{SECRET}@")  # a credential in the URL, as some servers want
    opts = PurpleOptions(
        output_dir=checkout / "output" / "arm" / "episode_001" / "purple",
        model=MODEL,
        provider_base_url=base_url,
        provider_env_key=KEY_VARIABLE,
        **options,
    )
    environ = {
        "PATH": f"{codex_bin.parent}{os.pathsep}{os.environ['PATH']}",
        "CODEX_HOME": str(home),
        "CODEX_SQLITE_HOME": str(home / "sqlite"),
        "HOME": str(home / "home"),
        KEY_VARIABLE: KEY_VALUE,
    }
    policy = CodexPolicy(kind, opts, environ=environ)
    asyncio.run(policy.init(InitPayload(prompt="You are an AI agent that can play Minecraft.", text="mine a log")))
    return policy


def _act(policy: CodexPolicy, mock: MockResponses, step: int) -> tuple[dict, list[tuple[TurnRecord, list[dict]]]]:
    """One observation; returns the action and each new turn with the requests the mock received during it."""
    records_before, requests_before = len(policy.episode.turn_records), len(mock.responses())
    answer = asyncio.run(policy.act(ObservationPayload(step=step, obs=FRAME)))
    new = policy.episode.turn_records[records_before:]
    requests = mock.responses()[requests_before:]
    turns = [(record, [] if record.requests == 0 else requests) for record in new]
    assert sum(len(sent) for _, sent in turns) == len(requests), "only one turn of a step reaches the model"
    return answer.action, turns


def _assert_payloads_match(turns: list[tuple[TurnRecord, list[dict]]]) -> None:
    """Each turn's recorded payload is what the mock received, within 10 %: the largest body and all of them."""
    for record, sent in turns:
        assert record.requests == len(sent), record
        if not sent:
            assert record.payload_bytes == 0
            continue
        largest, total = max(r["body_bytes"] for r in sent), sum(r["body_bytes"] for r in sent)
        assert abs(record.payload_bytes - largest) <= PAYLOAD_TOLERANCE * largest, (record.payload_bytes, largest)
        assert abs(record.request_bytes - total) <= PAYLOAD_TOLERANCE * total, (record.request_bytes, total)
        assert record.compaction_requests == sum(1 for r in sent if r["request_kind"] == "compaction")


def _play(policy: CodexPolicy, mock: MockResponses, steps: int) -> list[tuple[TurnRecord, list[dict]]]:
    """Steps that each get the action the model planned; every turn's payload held to what the mock received."""
    turns = []
    for step in range(steps):
        action, new = _act(policy, mock, step)
        assert action["forward"] == 1, new
        turns += new
    _assert_payloads_match(turns)
    return turns


def _report(policy: CodexPolicy) -> AgentReport:
    return AgentReport.model_validate_json((policy.options.output_dir / f"{policy.kind}_report.json").read_text())


@pytest.mark.parametrize("kind", ["worldmodel", "prolong"])
def test_turns_through_the_real_cli_resume_measure_and_keep_the_checkout_out(
    codex_bin, codex_home, checkout, mock, kind, capsys
):
    mock.set_script(plan_step(ONE) * 3)
    policy = _policy(codex_bin, codex_home, checkout, mock, kind, session_turns=2)
    turns = _play(policy, mock, 3)

    bodies = [json.dumps(request["json"]) for request in mock.responses()]
    assert len(bodies) == 6 and not any(MARKER in body for body in bodies), "the checkout's AGENTS.md stays out"
    assert not any("AGENTS.md instructions for" in body for body in bodies)
    assert [r["history_initialization"] for r in mock.responses()[::2]] == ["new", "cold_resume", "new"]
    assert all(r["headers"]["authorization"] == f"Bearer {KEY_VALUE}" for r in mock.responses())
    assert all(r["json"]["model"] == MODEL for r in mock.responses())
    first, resumed, fresh = (record for record, _ in turns)
    assert resumed.resumed and resumed.thread_id == first.thread_id and fresh.thread_id != first.thread_id
    assert resumed.payload_bytes > first.payload_bytes + 60_000, "a resumed request re-sends the first frame too"
    # turn.completed reports the THREAD's running total; a turn's own share is the difference
    assert first.usage.input_tokens == 200 and first.usage.output_tokens == 20
    assert resumed.thread_usage.input_tokens == 400 and resumed.usage.input_tokens == 200
    assert fresh.thread_usage.input_tokens == 200

    config = codex_home / "config.toml"
    assert SECRET in config.read_text() and config.stat().st_mode & 0o777 == 0o600
    assert SECRET not in capsys.readouterr().out, "the provider URL is on no command line codex runs with"
    report = _report(policy)
    assert report.failed_turns == 0 and report.sessions_started == 2 and report.settings.provider_config == str(config)
    assert report.tokens.input_tokens == 600


def test_without_compaction_codex_never_compacts_even_past_90_percent_of_any_window(
    codex_bin, codex_home, checkout, mock
):
    """900,000 reported tokens pass 90 % of the arm's window (100,000), of codex's default model window (500,000),
    of its largest (872,000) and of the one it gives a model it does not know (272,000)."""
    mock.set_script(plan_step(ONE, input_tokens=899_990, output_tokens=10) * 3)
    policy = _policy(
        codex_bin, codex_home, checkout, mock, context_window=100_000, compact_limit=200_000, session_turns=3
    )
    turns = _play(policy, mock, 3)
    assert [r["request_kind"] for r in mock.responses()] == ["turn"] * 6, "no compaction request, ever"
    assert [r["history_initialization"] for r in mock.responses()[::2]] == ["new"] * 3
    report = _report(policy)
    assert report.compactions == 0 and report.window_full_resets == 2
    assert [record.cold_start for record, _ in turns] == [None, "window_full", "window_full"]
    assert report.compaction_in_force.codex_window == 272_000 and report.compaction_in_force.cold_start_at == 100_000

    # a full conversation that the model refuses overflows: counted, and the next turn starts cold
    mock.set_script([{"when": "user", "failed": {"code": "context_length_exceeded", "message": "too long"}}])
    action, (failed,) = _act(policy, mock, 3)
    assert action["forward"] == 0 and failed[0].outcome == "overflow" and OVERFLOW in failed[0].reason
    mock.set_script(plan_step(ONE))
    action, _ = _act(policy, mock, 4)
    assert action["forward"] == 1 and mock.responses()[-2]["history_initialization"] == "new"
    assert _report(policy).overflow_resets == 1


def test_with_compaction_codex_compacts_at_the_stated_limit(codex_bin, codex_home, checkout, mock):
    mock.set_script(plan_step(ONE, input_tokens=49_989) + plan_step(ONE, input_tokens=49_990) + plan_step(ONE))
    policy = _policy(
        codex_bin, codex_home, checkout, mock, context_window=100_000, compact_limit=50_000, session_turns=3
    )
    turns = _play(policy, mock, 3)
    # 49,999 reported tokens: no compaction before turn 2; 50,000: one before turn 3
    assert [r["request_kind"] for r in mock.responses()] == ["turn"] * 4 + ["compaction", "turn", "turn"]
    assert [record.compaction_requests for record, _ in turns] == [0, 0, 1]
    report = _report(policy)
    assert report.compactions == 1 and report.sessions_started == 1
    assert report.compaction_in_force.codex_window == 100_000 and report.compaction_in_force.codex_compacts_at == 50_000


def test_a_thread_codex_no_longer_has_cold_starts_with_codexs_error_line(codex_bin, codex_home, checkout, mock):
    mock.set_script(plan_step(ONE) * 2)
    policy = _policy(codex_bin, codex_home, checkout, mock, session_turns=2)
    _act(policy, mock, 0)
    lost = policy.episode.turn_records[0].thread_id
    for rollout in (codex_home / "sessions").rglob(f"rollout-*-{lost}.jsonl"):
        rollout.unlink()
    action, turns = _act(policy, mock, 1)
    assert action["forward"] == 1, "the step is planned from a cold start, not answered with a noop"
    (refused, _), (cold, sent) = turns
    assert refused.reason.startswith(
        "session lost (Error: thread/resume: thread/resume failed: "
        f"no rollout found for thread id {lost} (code -32600))"
    )
    assert refused.requests == 0 and cold.cold_start == "session_lost" and sent[0]["history_initialization"] == "new"
    _assert_payloads_match(turns)
    report = _report(policy)
    assert report.sessions_lost == 1 and report.failed_turns_by_reason == {"session_lost": 1} and report.noops == {}


def test_a_failed_turn_is_reported_in_codexs_own_words(codex_bin, codex_home, checkout, mock):
    refusal = {"error": {"message": f"model {MODEL} is not served here", "type": "invalid_request_error"}}
    mock.set_script([{"when": "user", "status": 400, "body": refusal}])  # a 400 is not retried
    policy = _policy(codex_bin, codex_home, checkout, mock)
    action, ((record, sent),) = _act(policy, mock, 0)
    assert action["forward"] == 0 and len(sent) == 1
    assert record.reason.startswith("codex failed: ") and f"model {MODEL} is not served here" in record.reason
    stderr = (policy.workdir / "turns" / "turn_0001" / "stderr.txt").read_text().strip().splitlines()
    assert stderr[-1] not in record.reason, "not the last stderr line"
    _assert_payloads_match([(record, sent)])


def test_doctor_asks_the_real_codex_its_version_without_touching_the_users_home(codex_bin, tmp_path):
    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "wm.toml").write_text(
        'agent = "worldmodel"\ntask = "mine_diamond_from_scratch"\nsimulator = "embedded"\n'
        "[ports]\ngreen = 9500\npurple = 9501\n"
    )
    user_home = tmp_path / "user"
    user_home.mkdir()
    root = Path(tempfile.mkdtemp(prefix="mcu-real-codex-doctor-", dir="/var/tmp"))
    try:
        env = {
            **os.environ,
            "HOME": str(user_home),
            "MCU_CODEX_ROOT": str(root),
            "PATH": f"{codex_bin.parent}{os.pathsep}{os.environ['PATH']}",
        }
        env.pop("CODEX_HOME", None)
        outcome = invoke(tmp_path, env, "doctor", "--json")
        checks = {c["name"]: c for c in json.loads(outcome.out)["checks"]}
        assert f"codex-cli {CODEX_VERSION}" in checks["codex CLI"]["detail"]
        assert not (user_home / ".codex").exists() and list(root.iterdir()) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


ARM = """agent = "{agent}"
task = "mine_diamond_from_scratch"
simulator = "embedded"
seed = 2
steps = {steps}
step_timeout = 90
session_turns = {session_turns}
save_frames = false

[ports]
green = "auto"
purple = "auto"

[codex]
model = "{model}"
provider_base_url = "{url}"
provider_env_key = "{key}"
"""


def test_worldmodel_and_prolong_arms_run_end_to_end_through_the_real_cli(codex_bin, checkout, mock):
    """`mcu-arms run` with real green, purple and client processes; each purple drives the real codex."""
    steps, per_turn = 6, 3
    mock.set_script(plan_step([{"forward": 1}, {"attack": 1}, {"jump": 1}]) * 8)
    url = mock.url.replace("http://", f"http://user:{SECRET}@")
    for arm, agent, session_turns in (("rc_wm", "worldmodel", 2), ("rc_pl", "prolong", 1)):
        (checkout / "arms").mkdir(exist_ok=True)
        (checkout / "arms" / f"{arm}.toml").write_text(
            ARM.format(agent=agent, steps=steps, session_turns=session_turns, model=MODEL, url=url, key=KEY_VARIABLE)
        )
    root = Path(tempfile.mkdtemp(prefix="mcu-real-codex-e2e-", dir="/var/tmp"))
    try:
        auth = root / "auth.json"
        auth.write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-not-used"}')
        auth.chmod(0o600)
        env = {key: value for key, value in os.environ.items() if not key.startswith(("CODEX_", "MCU_", "FAKE_"))}
        env.update(
            PATH=f"{codex_bin.parent}{os.pathsep}{env['PATH']}",
            MCU_CODEX_ROOT=str(root / "homes"),
            MCU_CODEX_AUTH=str(auth),
            MCU_ARMS_STATE_DIR=str(root / "state"),
            COLUMNS="200",
            **{KEY_VARIABLE: KEY_VALUE},
        )
        done = subprocess.run(
            [sys.executable, "-m", "mcu_arms", "run", "--arm", "rc_wm", "--arm", "rc_pl", "--json"],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert [arm["status"] for arm in json.loads(done.stdout)["arms"]] == ["finished", "finished"]
        for arm, kind in (("rc_wm", "worldmodel"), ("rc_pl", "prolong")):
            episode = checkout / "output" / arm / "episode_001"
            report = AgentReport.model_validate_json((episode / "purple" / f"{kind}_report.json").read_text())
            assert report.turns == steps // per_turn and report.failed_turns == 0 and report.noops == {}
            assert report.settings.codex_version == f"codex-cli {CODEX_VERSION}"
            (episode_report,) = report.episodes
            assert episode_report.actions_replayed == steps
            by_turn: dict[str, list[dict]] = {}
            for request in mock.responses():
                by_turn.setdefault(request["turn_id"], []).append(request)
            threads = {record.thread_id for record in episode_report.turn_records}
            groups = [sent for sent in by_turn.values() if sent[0]["thread_id"] in threads]
            _assert_payloads_match(list(zip(episode_report.turn_records, groups, strict=False)))
            assert SECRET not in (episode / "logs" / "purple.log").read_text()
        assert not any(MARKER in json.dumps(request["json"]) for request in mock.responses())
    finally:
        shutil.rmtree(root, ignore_errors=True)
