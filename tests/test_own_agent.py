"""Your own agent in an arm (`agent = "a2a"`): another program's A2A server started by its command or reached at its
address, its code identity in the fingerprint, and the bad input that is refused before anything starts.

The purples here are third-party shaped (tests/own_agents.py): they import nothing of mcu_arms."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import psutil
import pytest
from own_agents import FORKING_PREFIX, LEGACY_PURPLE, PAGE, agent_repo, legacy_python, page_block
from run_helpers import Started, alive, cli_env, report, run_cli, running_with_steps, wait_for
from server_procs import free_port

from mcu_arms.arms.identity import code_identity
from mcu_arms.contracts.agent_card import card_identity, card_problem
from mcu_arms.contracts.agents import agent_kinds
from mcu_arms.contracts.settings import PurpleOptions, external_purple_argv
from mcu_arms.supervise.readiness import fetch_card

ARM = """agent = "a2a"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = {steps}
step_timeout = 10
save_frames = false

[purple]
{purple}
"""


def _arm(project: Path, name: str, purple: str, steps: int = 5) -> Path:
    (project / "arms").mkdir(parents=True, exist_ok=True)
    path = project / "arms" / f"{name}.toml"
    path.write_text(ARM.format(steps=steps, purple=purple))
    return path


def _command(*argv: str, cwd: Path | None = None, extra: str = "") -> str:
    line = f"command = {json.dumps(list(argv))}"
    return line + (f'\ncwd = "{cwd}"' if cwd else "") + (f"\n{extra}" if extra else "")


def _plan(project: Path, state: Path, arm: str) -> dict:
    done = run_cli(project, state, "plan", "--dry-run", "--json", "--arm", arm)
    assert done.returncode == 0, done.stdout + done.stderr
    plans = json.loads(done.stdout)
    return (plans if isinstance(plans, list) else plans["plans"])[0]


# --- what is refused, and how the command is written --------------------------------------------------------------


def test_the_contract_is_appended_unless_the_command_holds_placeholders() -> None:
    assert external_purple_argv(["python", "p.py"], "127.0.0.1", 9100) == [
        "python",
        "p.py",
        "--host",
        "127.0.0.1",
        "--port",
        "9100",
        "--card-url",
        "http://127.0.0.1:9100",
    ]
    assert external_purple_argv(["srv", "--listen={host}:{port}", "{card_url}"], "127.0.0.1", 9100) == [
        "srv",
        "--listen=127.0.0.1:9100",
        "http://127.0.0.1:9100",
    ]


def test_a_command_that_cannot_start_is_refused_at_plan_naming_file_line_and_key(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _arm(project, "missing", _command("no-such-program-7f3a", "x.py"))
    done = run_cli(project, state, "plan", "--dry-run", "--arm", "missing")
    assert done.returncode != 0
    assert "missing.toml:9" in done.stdout + done.stderr and "purple.command" in done.stdout + done.stderr
    assert "not found on PATH" in done.stdout + done.stderr and "Traceback" not in done.stderr

    script = project / "not_executable.sh"
    script.write_text("#!/bin/sh\n")
    _arm(project, "noexec", _command("./not_executable.sh", cwd=project))
    done = run_cli(project, state, "plan", "--dry-run", "--arm", "noexec")
    assert done.returncode != 0 and "is not executable" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("purple", "message"),
    [
        ('command = ["python"]\nurl = "http://127.0.0.1:9019"', "not both"),
        ("ready_timeout = 5", "not neither"),
    ],
)
def test_url_and_command_together_or_neither_are_refused(tmp_path: Path, purple: str, message: str) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _arm(project, "bad", purple)
    done = run_cli(project, state, "plan", "--dry-run", "--arm", "bad")
    assert done.returncode != 0 and message in done.stdout + done.stderr
    assert "bad.toml" in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_a_purple_table_belongs_to_agent_a2a_only(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    path = _arm(project, "mixed", 'url = "http://127.0.0.1:9019"')
    path.write_text(path.read_text().replace('agent = "a2a"', 'agent = "random"'))
    done = run_cli(project, state, "plan", "--dry-run", "--arm", "mixed")
    assert done.returncode != 0 and '[purple] is only for agent = "a2a"' in done.stdout + done.stderr


def test_cards_of_both_sdk_shapes_are_accepted_and_a_wrong_one_is_named() -> None:
    legacy = {"name": "p", "version": "1", "skills": [{"id": "s"}], "url": "http://h/", "protocolVersion": "0.3.0"}
    current = {"name": "p", "version": "1", "skills": [{"id": "s"}], "supportedInterfaces": [{"url": "http://h/"}]}
    assert card_problem(legacy) is None and card_problem(current) is None
    assert card_identity(legacy).digest == card_identity(current).digest  # where it is reached is no identity
    assert card_identity({**current, "version": "2"}).digest != card_identity(current).digest
    assert card_problem({"name": "p"}) == (
        "the agent card has no version, skills, url (a2a-sdk 0.3) or supportedInterfaces (1.x)"
    )
    assert card_problem([]) == "the agent card is a JSON list, not an object"


def test_code_identity_is_the_commit_and_a_hash_of_uncommitted_changes(tmp_path: Path) -> None:
    repo = agent_repo(tmp_path / "agent", "print('a')\n")
    clean = code_identity(repo, None)
    assert clean.startswith("git ") and "dirty" not in clean
    (repo / "my_purple.py").write_text("print('b')\n")
    dirty = code_identity(repo, None)
    assert dirty.startswith(clean + " dirty ")
    (repo / "my_purple.py").write_text("print('c')\n")
    changed = code_identity(repo, None)
    assert changed not in (clean, dirty)
    (repo / "helper.py").write_text("x = 1\n")  # a new file, not yet added: part of what runs
    assert code_identity(repo, None) not in (clean, dirty, changed)

    loose = tmp_path / "loose"
    (loose / "src").mkdir(parents=True)
    (loose / "src" / "agent.py").write_text("x = 1\n")
    before = code_identity(loose, ["src/**/*.py"])
    assert before.startswith("files ") and before.endswith("(1 files)")
    (loose / "src" / "agent.py").write_text("x = 2\n")
    assert code_identity(loose, ["src/**/*.py"]) != before


def test_the_agent_kinds_hold_a2a_beside_the_built_ins() -> None:
    assert {"noop", "random", "scripted", "a2a"} <= set(agent_kinds())


def test_the_toy_plug_ins_import_only_the_public_module() -> None:
    toysim = Path(__file__).parent / "toysim" / "mcu_toysim"
    imported = set()
    for path in toysim.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcu_arms"):
                imported.add(node.module)
    assert imported == {"mcu_arms.api"}


def test_a_one_line_change_of_the_agent_changes_the_fingerprint_and_plan_names_it(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "agent", page_block("my_purple.py"))
    _arm(project, "mine", _command(sys.executable, "my_purple.py", cwd=repo))
    before = _plan(project, state, "mine")
    assert before["settings"]["purple_code"].startswith("git ")
    assert before["settings"]["purple_command"] == [sys.executable, "my_purple.py"]
    purple = next(p for p in before["processes"] if p["role"] == "purple")
    assert purple["argv"][:2] == [sys.executable, "my_purple.py"] and "--card-url" in purple["argv"]
    assert purple["cwd"] == str(repo)
    assert any("does not check this arm's per-run token" in note for note in before["notes"])

    script = repo / "my_purple.py"
    script.write_text(script.read_text().replace('"attack": 1', '"attack": 0'))
    after = _plan(project, state, "mine")
    assert after["fingerprint"] != before["fingerprint"]
    assert after["settings"]["purple_code"].startswith(before["settings"]["purple_code"] + " dirty ")


# --- real runs ----------------------------------------------------------------------------------------------------


def _finished(project: Path, state: Path, arm: str) -> dict:
    done = run_cli(project, state, "run", "--arm", arm, timeout=300)
    result = report(project, arm)
    assert done.returncode == 0, done.stdout + done.stderr + json.dumps(result, indent=1)
    assert result is not None and result["status"] == "finished", result
    assert result["steps_run"] >= 1
    return result


@pytest.mark.slow
def test_the_pages_1x_purple_runs_by_command_and_compare_names_a_code_change(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "agent", page_block("my_purple.py"))
    arm = page_block("arms/mine.toml").replace('["python", ', f"[{json.dumps(sys.executable)}, ")
    (project / "arms").mkdir(parents=True)
    (project / "arms" / "mine.toml").write_text(arm.replace('cwd = "."', f'cwd = "{repo}"'))
    result = _finished(project, state, "mine")
    assert result["purple_card"]["name"] == "my purple" and result["purple_card"]["skills"] == ["play"]
    assert result["settings"]["purple_code"].startswith("git ")
    log = (project / "output" / "mine" / "episode_001" / result["logs"]["purple"]).read_text()
    assert log is not None  # the purple's output has its own log in the episode

    script = repo / "my_purple.py"
    script.write_text(script.read_text().replace('"attack": 1', '"attack": 0'))
    compared = run_cli(project, state, "compare", "mine")
    assert "purple_code" in compared.stdout + compared.stderr, compared.stdout + compared.stderr


@pytest.mark.slow
def test_an_a2a_sdk_03_purple_in_its_own_venv_runs_with_placeholders(tmp_path: Path) -> None:
    python = legacy_python()
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "legacy", LEGACY_PURPLE, name="legacy_purple.py")
    _arm(project, "legacy", _command(str(python), "legacy_purple.py", "{host}", "{port}", cwd=repo))
    result = _finished(project, state, "legacy")
    assert result["purple_card"]["name"] == "legacy purple" and result["purple_card"]["version"] == "0.3.0"


def _serving(repo: Path, port: int) -> subprocess.Popen[bytes]:
    """The page's purple started by hand (as on a GPU host or in a container), once its card answers."""
    server = subprocess.Popen(
        [sys.executable, "my_purple.py", "--port", str(port)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: fetch_card(f"http://127.0.0.1:{port}") is not None or server.poll() is not None, "its card")
    assert server.poll() is None
    return server


@pytest.mark.slow
def test_a_purple_reached_by_url_runs_and_is_neither_started_nor_stopped(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "agent", page_block("my_purple.py"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (project / "arms").mkdir(parents=True)
    arm = page_block("arms/remote.toml").replace("http://127.0.0.1:9019", url)
    (project / "arms" / "remote.toml").write_text(arm + "ready_timeout = 5\n")
    server = _serving(repo, port)
    try:
        planned = _plan(project, state, "remote")
        assert any("not started by mcu-arms: not isolated, not owned" in note for note in planned["notes"])
        result = _finished(project, state, "remote")
        assert "purple" not in result["processes"]
        assert server.poll() is None, "a purple reached by url is never stopped"
        compared = run_cli(project, state, "compare", "remote")
        assert "not started by mcu-arms: not isolated, not owned" in compared.stdout, compared.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)

    script = repo / "my_purple.py"
    script.write_text(script.read_text().replace('version="0.1.0"', 'version="0.2.0"'))
    server = _serving(repo, port)
    try:
        done = run_cli(project, state, "run", "--arm", "remote", "--rerun", timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        compared = run_cli(project, state, "compare", "remote")
        assert "served 2 different agent cards" in compared.stdout and "0.2.0" in compared.stdout, compared.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)

    failed = run_cli(project, state, "run", "--arm", "remote", "--rerun", timeout=300)
    assert failed.returncode != 0
    down = report(project, "remote", episode=3)
    assert down is not None and down["status"] == "failed", down
    assert down["failure"]["kind"] == "infrastructure" and "never answered" in down["failure"]["reason"]
    assert "purple card" in failed.stdout + failed.stderr, "the preflight warns before the run"


@pytest.mark.slow
def test_a_purple_that_never_serves_a_card_fails_as_infrastructure_with_its_log(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "agent", "import time\nprint('loading weights', flush=True)\ntime.sleep(3600)\n")
    _arm(project, "silent", _command(sys.executable, "my_purple.py", cwd=repo, extra="ready_timeout = 3"))
    done = run_cli(project, state, "run", "--arm", "silent", timeout=120)
    assert done.returncode != 0
    result = report(project, "silent")
    assert result["status"] == "failed" and result["failure"]["kind"] == "infrastructure"
    assert "not ready within 3 s" in result["failure"]["reason"]
    assert any("loading weights" in line for line in result["failure"]["log_tail"])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "stop"])
def test_ctrl_c_and_stop_leave_none_of_the_purples_processes(tmp_path: Path, how: str) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    pid_file = tmp_path / "grandchild.pid"
    repo = agent_repo(tmp_path / "agent", FORKING_PREFIX + page_block("my_purple.py"))
    path = _arm(project, "forking", _command(sys.executable, "my_purple.py", cwd=repo), steps=5000)
    path.write_text(path.read_text().replace("[purple]", f'[env]\nGRANDCHILD_PID_FILE = "{pid_file}"\n\n[purple]'))
    run = Started(project, state, "run", "--arm", "forking")
    try:
        running = wait_for(lambda: running_with_steps(project, "forking"), "the arm to step", timeout=180)
        purple = psutil.Process(running["processes"]["purple"]["pid"])
        grandchild = psutil.Process(int(wait_for(lambda: pid_file.is_file() and pid_file.read_text(), "grandchild")))
        tree = [purple, *purple.children(recursive=True)]
        assert grandchild in tree
        family = run.remember_family()
        if how == "ctrl-c":
            run.popen.send_signal(signal.SIGINT)
        else:
            stopped = run_cli(project, state, "stop", "--arm", "forking")
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        run.wait(timeout=90)
        assert report(project, "forking")["status"] == "interrupted"
        assert alive([*tree, *family]) == []
    finally:
        run.kill_if_running()


@pytest.mark.slow
def test_the_pages_plug_in_policy_runs_an_arm(tmp_path: Path) -> None:
    """Route 2 of the how-to page: its policy module and entry point, as a distribution on PYTHONPATH."""
    site = tmp_path / "site"
    (site / "my_policy").mkdir(parents=True)
    (site / "my_policy" / "__init__.py").write_text(page_block("my_policy/__init__.py"))
    (site / "my_policy-0.1.dist-info").mkdir()
    (site / "my_policy-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: my-policy\nVersion: 0.1\n")
    entry = re.search(r'\[project\.entry-points\."mcu_arms\.agents"\]\n(.+)\n', PAGE.read_text())
    assert entry is not None
    ((name, value),) = tomllib.loads(entry.group(1)).items()
    (site / "my_policy-0.1.dist-info" / "entry_points.txt").write_text(f"[mcu_arms.agents]\n{name} = {value}\n")
    project, state = tmp_path / "project", tmp_path / "state"
    path = _arm(project, "plugged", "")
    path.write_text(path.read_text().replace('agent = "a2a"', 'agent = "attacker"').replace("[purple]\n", ""))
    env = cli_env(state)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "run", "--arm", "plugged"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = report(project, "plugged")
    assert done.returncode == 0 and result is not None and result["status"] == "finished", done.stdout + done.stderr
    assert result["settings"]["agent"] == "attacker"


@pytest.mark.slow
def test_a_campaign_of_random_against_an_external_purple_over_three_seeds_runs_and_compares(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "agent", page_block("my_purple.py"))
    path = _arm(project, "random_arm", "")
    path.write_text(path.read_text().replace('agent = "a2a"', 'agent = "random"').replace("[purple]\n", ""))
    (project / "campaigns").mkdir()
    (project / "campaigns" / "mine.toml").write_text(
        'name = "mine"\nseeds = [0, 1, 2]\nmax_parallel = 2\n\n[baseline]\narm = "random_arm"\n\n'
        '[[variants]]\nname = "mine"\ndiffers_in = ["agent"]\nagent = "a2a"\n\n'
        f"[variants.purple]\n{_command(sys.executable, 'my_purple.py', cwd=repo)}\n"
    )
    done = run_cli(project, state, "run", "campaigns/mine.toml", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for episode in (1, 2, 3):
        assert report(project, "mine", episode)["status"] == "finished"
        assert report(project, "random_arm", episode)["status"] == "finished"
    compared = run_cli(project, state, "compare", "campaigns/mine.toml", "--json")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "mine" in compared.stdout and "random_arm" in compared.stdout


def test_the_registry_lists_every_built_in_agent_with_its_factory() -> None:
    from mcu_arms.contracts.agents import BUILT_IN_AGENTS
    from mcu_arms.contracts.catalog import AGENT_KINDS

    assert tuple(BUILT_IN_AGENTS) == AGENT_KINDS
    assert {name: d.factory for name, d in BUILT_IN_AGENTS.items()} == {
        "worldmodel": "mcu_arms.purple.codex_agent:make_worldmodel",
        "prolong": "mcu_arms.purple.codex_agent:make_prolong",
        "steve1": "mcu_arms.purple.steve1:make_policy",
        "scripted": "mcu_arms.purple.scripted:make_policy",
        "planned": "mcu_arms.purple.planned.agent:make_policy",
        "random": "mcu_arms.purple.baselines:make_random",
        "noop": "mcu_arms.purple.baselines:make_noop",
    }
    from mcu_arms.purple.registry import policy_factory

    assert type(policy_factory("random")(PurpleOptions(seed=3))).__name__ == "RandomPolicy"
    assert type(policy_factory("noop")(PurpleOptions())).__name__ == "NoopPolicy"


def test_a_plug_ins_own_options_table_is_validated_and_reaches_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toysim = Path(__file__).parent / "toysim"
    monkeypatch.syspath_prepend(str(toysim))
    env = cli_env(tmp_path / "state")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(toysim), env.get("PYTHONPATH")]))
    project = tmp_path / "project"
    (project / "arms").mkdir(parents=True)
    arm = 'agent = "toy_attacker"\ntask = "mining_and_collecting"\nsimulator = "embedded"\nsteps = 5\n'
    (project / "arms" / "toy.toml").write_text(arm + '\n[agent_options]\nswing = "use"\n')
    (project / "arms" / "typo.toml").write_text(arm + '\n[agent_options]\nswung = "use"\n')
    (project / "arms" / "random.toml").write_text(arm.replace("toy_attacker", "random") + "\n[agent_options]\nx = 1\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mcu_arms", *args], cwd=project, env=env, capture_output=True, text=True, timeout=120
        )

    planned = cli("plan", "--dry-run", "--json", "--arm", "toy")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads(planned.stdout)["plans"][0]
    assert plan["settings"]["agent_options"] == {"swing": "use"}
    argv = next(p["argv"] for p in plan["processes"] if p["role"] == "purple")
    assert argv[argv.index("--agent-options") + 1] == '{"swing": "use"}'
    assert "--context-window" not in argv and "--planner-model" not in argv, "another agent's options"

    typo = cli("plan", "--dry-run", "--arm", "typo")
    assert typo.returncode != 0 and "typo.toml:7: key 'agent_options.swung'" in typo.stderr, typo.stderr
    wrong = cli("plan", "--dry-run", "--arm", "random")
    assert wrong.returncode != 0 and 'agent "random" declares no options table' in wrong.stderr, wrong.stderr

    from mcu_arms.purple.registry import policy_factory

    policy = policy_factory("toy_attacker")(PurpleOptions(agent_options=argv[argv.index("--agent-options") + 1]))
    assert policy.swing == "use"  # type: ignore[attr-defined]


TUTORIAL_SCENARIO = """[green_agent]
endpoint = "http://127.0.0.1:9009"
cmd = "python scenarios/debate/debate_judge.py --host 127.0.0.1 --port 9009"

[[participants]]
role = "pro_debater"
endpoint = "http://127.0.0.1:9019"
cmd = "{python} scenarios/debate/debater.py --host 127.0.0.1 --port 9019 --card-url=http://127.0.0.1:9019/"

[[participants]]
role = "con_debater"
endpoint = "http://127.0.0.1:9018"
cmd = "python scenarios/debate/debater.py --host 127.0.0.1 --port 9018"

[config]
task_category = "combat"
max_steps = 40
num_rounds = 3
"""

# MCU-AgentBeats' test_scenario.toml, as it is.
MCU_SCENARIO = """[green_agent]
endpoint = "http://127.0.0.1:9009"

[[participants]]
role = "agent"
endpoint = "http://127.0.0.1:9019"

[config]
task_category = "overall"
"""


def test_new_from_an_agentbeats_scenario_writes_an_arm_that_plans_and_lists_what_it_did_not_map(
    tmp_path: Path,
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    (project / "scenario.toml").write_text(TUTORIAL_SCENARIO.format(python=sys.executable))
    (project / "test_scenario.toml").write_text(MCU_SCENARIO)

    several = run_cli(project, state, "new", "debater", "--from-scenario", "scenario.toml")
    assert several.returncode != 0 and "pro_debater, con_debater" in several.stderr, several.stderr
    done = run_cli(project, state, "new", "debater", "--from-scenario", "scenario.toml", "--participant", "pro_debater")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not mapped: green_agent: mcu-arms runs its own green agent" in done.stdout
    assert "not mapped: config.num_rounds" in done.stdout and "participants[0].endpoint" in done.stdout
    plan = _plan(project, state, "debater")
    assert plan["settings"]["task"] == "combat" and plan["settings"]["steps"] == 40
    assert plan["settings"]["purple_command"] == [
        sys.executable,
        "scenarios/debate/debater.py",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--card-url={card_url}",
    ]
    purple = next(p for p in plan["processes"] if p["role"] == "purple")
    assert (
        f"--port {purple['port']}" in " ".join(purple["argv"]) and "--card-url=http://127.0.0.1:" in purple["argv"][-1]
    )

    done = run_cli(project, state, "new", "mcu", "--from-scenario", "test_scenario.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "config.task_category: 'overall' is no single MCU category" in done.stdout
    plan = _plan(project, state, "mcu")
    assert plan["settings"]["purple_url"] == "http://127.0.0.1:9019"


def test_an_a2a_arm_is_refused_on_slurm_until_its_placement_is_built(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _arm(project, "remote", 'url = "http://127.0.0.1:9"')
    done = run_cli(
        project, state, "plan", "--dry-run", "--arm", "remote", "--executor", "slurm", "--slurm-time", "1:00:00"
    )
    assert done.returncode != 0 and 'agent = "a2a" runs on this host only' in done.stderr, done.stderr


# A server whose agent card is no A2A card: `python bad_card.py --host H --port P --card-url URL`.
BAD_CARD = """import argparse, http.server, json
parser = argparse.ArgumentParser()
parser.add_argument("--host"); parser.add_argument("--port", type=int); parser.add_argument("--card-url")
args = parser.parse_args()


class Card(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"name": "not quite a card"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer((args.host, args.port), Card).serve_forever()
"""


@pytest.mark.slow
def test_a_card_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    repo = agent_repo(tmp_path / "agent", BAD_CARD, name="bad_card.py")
    _arm(project, "bad", _command(sys.executable, "bad_card.py", cwd=repo, extra="ready_timeout = 5"))
    done = run_cli(project, state, "run", "--arm", "bad", timeout=120)
    assert done.returncode != 0
    result = report(project, "bad")
    assert result["status"] == "failed" and result["failure"]["kind"] == "infrastructure"
    assert (
        "the agent card has no version, skills, url (a2a-sdk 0.3) or supportedInterfaces (1.x)"
        in (result["failure"]["reason"])
    ), result["failure"]
