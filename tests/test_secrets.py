"""Secrets are recognised by name and by value: canaries of every shape, planted in an arm's [env] and its provider
URL, never appear in any file under output/ or logs/, in the plan, in what `plan` and `run` print, or on the
command line of any process the arm starts. And what holds the agent's conversation is private (0700 / 0600)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest
from run_helpers import Started, cli_env, wait_for

from mcu_arms.contracts.redaction import is_secret_name, mask_known, redact, redact_env, scrub, secret_values

FAKE_CODEX_DIR = Path(__file__).parent / "fake_codex"
CANARIES = {
    "DB_PASS": "canary1-db-pass",
    "HF_PAT": "canary2-hf-pat",
    "SERVICE_TOKEN": "canary3-token",
    "DATABASE_URL": "postgres://admin:canary4-userinfo@db.internal:5432/runs",
    "WEBHOOK": "https://hooks.example/x?api_key=canary5-query&sig=canary6-signature",
    "EXTRA_ARGS": "--password=canary7-flag --level 3",
    "LOOKS_HARMLESS": "sk-canary8abcdefghijklmnopqrstuv",
    "GH_READER": "ghp_canary9ABCDEFGHIJKLMNOPQRSTUVWXYZ",
}
PROVIDER_URL = "https://bob:canary10-provider@llm.internal/v1?api_key=canary11-provider"
SECRET_PARTS = [
    "canary1-db-pass",
    "canary2-hf-pat",
    "canary3-token",
    "canary4-userinfo",
    "canary5-query",
    "canary6-signature",
    "canary7-flag",
    "canary8abcdefghijklmnop",
    "canary9ABCDEFGHIJKLMNOP",
    "canary10-provider",
    "canary11-provider",
]


def test_secret_names_are_recognised_without_catching_path_or_pwd():
    for name in (
        "DB_PASS",
        "HF_PAT",
        "OPENAI_API_KEY",
        "MY_APIKEY",
        "GH_TOKEN",
        "SECRET",
        "DB_PASSWD",
        "AUTH",
        "OAUTH",
        "AWS_SECRET_ACCESS_KEY",
        "client_secret",
        "X-Amz-Signature",
        "sig",
        "Authorization",
    ):
        assert is_secret_name(name), name
    for name in ("PATH", "PWD", "OLDPWD", "HOME", "LEVEL", "MAX_TOKENS", "BYPASS_CACHE", "AUTHOR", "SPATIAL"):
        assert not is_secret_name(name), name


def test_limits_counts_and_sizes_are_never_masked_whatever_their_name_says():
    """The compaction limit is the number the seed's users grep for in purple.log: a name holding TOKEN must not
    hide it. A quantity-sounding name does not let a secret-shaped or non-numeric value through."""
    line = "codex exec -c model_auto_compact_token_limit=516000 -c api_key=hunter2-value"
    assert scrub(line) == line.replace("hunter2-value", redact("API_KEY", "hunter2-value"))
    assert redact("MODEL_AUTO_COMPACT_TOKEN_LIMIT", "516000") == "516000"
    assert redact("AUTH_RETRY_COUNT", "3") == "3"
    assert redact("SECRET_SIZE", "1.5e3") == "1.5e3"
    assert redact("TOKEN_LIMIT", "not-a-number").startswith("***")
    assert redact("TOKEN_LIMIT", "sk-canary8abcdefghijklmnopqrstuv").startswith("***")
    assert redact("DB_PASSWORD", "123456").startswith("***")
    assert secret_values({"MODEL_AUTO_COMPACT_TOKEN_LIMIT": "516000", "GH_TOKEN": "42424242"}) == ["42424242"]


def test_values_are_scrubbed_by_shape_and_masks_are_stable_and_idempotent():
    for name, value in CANARIES.items():
        shown = redact(name, value)
        assert not any(part in shown for part in SECRET_PARTS), (name, shown)
        assert redact(name, shown) == shown
    assert redact("DATABASE_URL", CANARIES["DATABASE_URL"]).startswith("postgres://admin:***")
    assert redact("DATABASE_URL", CANARIES["DATABASE_URL"]).endswith("@db.internal:5432/runs")
    assert scrub("https://token-only@host/x").startswith("https://***") and scrub("plain text") == "plain text"
    assert redact_env({"LEVEL": "3"}) == {"LEVEL": "3"}
    assert redact("A_KEY", "one") != redact("A_KEY", "two")
    secrets = secret_values(CANARIES, ["a-run-token-value"])
    assert "516000" not in secrets and "sk-canary8abcdefghijklmnopqrstuv" in secrets
    leaked = "; ".join([*CANARIES.values(), "a-run-token-value"])
    assert not any(part in mask_known(leaked, secrets) for part in [*SECRET_PARTS[:9], "a-run-token-value"])


ARM = """agent = "{agent}"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = 12
step_timeout = 15
save_frames = false

[ports]
green = "auto"
purple = "auto"

[codex]
provider_base_url = "{url}"

[env]
FAKE_CODEX_MODE = "ok"
{env}
"""


def _every_file(*roots: Path) -> list[Path]:
    return [path for root in roots if root.exists() for path in root.rglob("*") if path.is_file()]


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["random", "prolong", "worldmodel"])
def test_canaries_never_reach_a_file_the_plan_the_terminal_or_an_argv(tmp_path: Path, agent: str) -> None:
    project = tmp_path / "project"
    (project / "arms").mkdir(parents=True)
    env_lines = "\n".join(f"{name} = {json.dumps(value)}" for name, value in CANARIES.items())
    (project / "arms" / "canary.toml").write_text(ARM.format(agent=agent, url=PROVIDER_URL, env=env_lines))
    root = Path(tempfile.mkdtemp(prefix="mcu-codex-canary-", dir="/var/tmp"))
    try:
        auth = root / "auth.json"
        auth.write_text('{"auth_mode": "apikey"}')
        env = {key: value for key, value in cli_env(tmp_path / "state").items() if not key.startswith("CODEX_")}
        env.update(
            PATH=f"{FAKE_CODEX_DIR}{os.pathsep}{env['PATH']}",
            MCU_CODEX_ROOT=str(root / "homes"),
            MCU_CODEX_AUTH=str(auth),
        )
        printed = []
        for args in (
            ("plan", "--dry-run", "--arm", "canary"),
            ("plan", "--dry-run", "--json", "--arm", "canary"),
            ("plan", "--arm", "canary"),
        ):
            done = subprocess.run(
                [sys.executable, "-m", "mcu_arms", *args],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            printed.append(done.stdout + done.stderr)

        run = Started(project, tmp_path / "state", "run", "--arm", "canary", env=env)
        argv_seen: list[str] = []
        try:

            def arm_started() -> bool:
                children = psutil.Process(run.popen.pid).children(recursive=True)
                argv_seen.extend(" ".join(child.cmdline()) for child in children if _alive(child))
                both = all(any(f"serve {role}" in argv for argv in argv_seen) for role in ("green", "purple"))
                return both or run.popen.poll() is not None

            wait_for(arm_started, "green, purple and client to be running", timeout=120)
            assert run.wait(timeout=300) == 0, run.output
        finally:
            run.kill_if_running()
        printed.append(run.output)
        assert any("serve purple" in argv for argv in argv_seen) and any("serve green" in argv for argv in argv_seen)

        files = _every_file(project / "output", project / "logs")
        assert any(path.name == "purple.log" for path in files) and any(path.name == "plan.json" for path in files)
        for path in files:
            text = path.read_bytes().decode("utf-8", errors="replace")
            assert not [part for part in SECRET_PARTS if part in text], path
        for text in [*printed, *argv_seen]:
            assert not [part for part in SECRET_PARTS if part in text], text[:2000]
        episode = project / "output" / "canary" / "episode_001"
        plan = json.loads((episode / "plan.json").read_text())
        assert plan["settings"]["env"]["DATABASE_URL"].startswith("postgres://admin:***")
        assert plan["settings"]["provider_base_url"].startswith("https://bob:***")
        _assert_private(episode, conversation=agent != "random")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _assert_private(episode: Path, *, conversation: bool) -> None:
    """What holds the conversation (purple/: turn prompts, events, memory; the purple's log) sits in 0700 directories
    and is 0600 itself; the agent's counters (its reports) and the results beside them are 0644, for sharing."""
    entries = [episode / "purple", *(episode / "purple").rglob("*"), episode / "logs" / "purple.log"]
    modes = {
        str(path.relative_to(episode)): stat.S_IMODE(path.lstat().st_mode)
        for path in entries
        if not path.is_symlink() and not path.name.endswith("report.json")
    }
    assert {path: mode for path, mode in modes.items() if mode & 0o077} == {}
    assert stat.S_IMODE((episode / "result.json").stat().st_mode) == 0o644
    if conversation:
        assert any("/turns/" in path and path.endswith("prompt.md") for path in modes), sorted(modes)[:20]
        assert "logs/purple.log" in modes
