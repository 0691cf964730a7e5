"""A fourth simulator that no package file names: defined under tests/toysim/, registered through the registry API
(in this process) or the `mcu_arms.simulators` entry point (tests/toysim/mcu_toysim-0.1.dist-info, found on
PYTHONPATH by every process a run starts), it is listed by `tasks`, checked by `doctor`, planned, run end to end by
real green, purple and client processes, compared (paired by seed, as its descriptor allows) and shown in the
viewer's index. A toy agent beside it registers through `mcu_arms.agents` and plays it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import cli_env, report

from mcu_arms.arms.spec import parse_arm
from mcu_arms.contracts import simulators as registry
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.stats.design import pairing

TOYSIM = Path(__file__).resolve().parent / "toysim"
PACKAGE = Path(__file__).resolve().parents[1] / "mcu_arms"
TOY = "toyworld"

TOY_ARM = """agent = "{agent}"
task = "mining_and_collecting"
tasks = ["collect_dirt"]
simulator = "{simulator}"
seeds = [0, 1]
steps = 20
step_timeout = 10
save_frames = false
"""


def _toy_env(state: Path, *, registered: bool = True) -> dict[str, str]:
    env = cli_env(state)
    if registered:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TOYSIM), env.get("PYTHONPATH")]))
    return env


def _cli(project: Path, env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _write_arm(project: Path, name: str, agent: str, simulator: str = TOY, table: str = "") -> Path:
    (project / "arms").mkdir(parents=True, exist_ok=True)
    path = project / "arms" / f"{name}.toml"
    path.write_text(TOY_ARM.format(agent=agent, simulator=simulator) + table)
    return path


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> registry.SimulatorDescriptor:
    """The toy simulator registered through the registry API, for this test only."""
    monkeypatch.syspath_prepend(str(TOYSIM))
    from mcu_toysim import TOYWORLD

    monkeypatch.setitem(registry._registered, TOY, TOYWORLD)
    return TOYWORLD


def test_no_package_file_names_the_toy_simulator() -> None:
    assert [path for path in PACKAGE.rglob("*") if path.is_file() and TOY.encode() in path.read_bytes()] == []


def test_a_simulator_registered_through_the_api_is_validated_planned_and_paired(
    tmp_path: Path, toy_registered: registry.SimulatorDescriptor
) -> None:
    assert registry.simulator_names()[-1] == TOY and registry.simulator_descriptor(TOY) is toy_registered
    spec = parse_arm(TOY_ARM.format(agent="random", simulator=TOY), tmp_path / "toy.toml")
    assert spec.simulator_descriptor is toy_registered and spec.simulator_table() is None
    with pytest.raises(UserError) as typo:
        parse_arm(TOY_ARM.format(agent="random", simulator="toywrld"), tmp_path / "typo.toml")
    message = typo.value.render()
    assert "typo.toml:4: key 'simulator'" in message and "did you mean 'toyworld'?" in message
    assert "allowed: minestudio, embedded, mineflayer, toyworld" in message
    with pytest.raises(UserError, match='it needs simulator = "embedded"'):
        parse_arm(TOY_ARM.format(agent="scripted", simulator=TOY), tmp_path / "scripted.toml")
    assert pairing(TOY, None, [0, 1], TOY, None, [1, 0]).design == "paired", "its world is a function of the seed"


def test_a_simulators_own_table_is_validated_at_its_file_line_and_key(
    tmp_path: Path, toy_registered: registry.SimulatorDescriptor
) -> None:
    arm = TOY_ARM.format(agent="random", simulator=TOY)
    spec = parse_arm(arm + "\n[toyworld]\nattacks_per_pickup = 4\n", tmp_path / "toy.toml")
    assert spec.simulator_table() == toy_registered.table_model(attacks_per_pickup=4)
    assert spec.model_dump(exclude_unset=True)["toyworld"] == {"attacks_per_pickup": 4}, "dumped as the file wrote it"
    for table, expected in (
        (
            "attacks_per_pikup = 4",
            "toy.toml:11: key 'toyworld.attacks_per_pikup': unknown key (did you mean "
            "'attacks_per_pickup'?) (known keys here: attacks_per_pickup)",
        ),
        (
            "attacks_per_pickup = 0",
            "toy.toml:11: key 'toyworld.attacks_per_pickup': Input should be greater than or "
            "equal to 1 (allowed: an integer from 1 to 100: the attacks that pick up one of each object)",
        ),
        (
            'attacks_per_pickup = "4"',
            "toy.toml:11: key 'toyworld.attacks_per_pickup': Input should be a valid "
            "integer (allowed: an integer from 1 to 100",
        ),
    ):  # fmt: skip - one refused table and the message it gets, a line each
        with pytest.raises(UserError) as refused:
            parse_arm(f"{arm}\n[toyworld]\n{table}\n", tmp_path / "toy.toml")
        assert expected in refused.value.render()
    with pytest.raises(UserError) as elsewhere:
        parse_arm(TOY_ARM.format(agent="random", simulator="embedded") + "\n[toyworld]\n", tmp_path / "emb.toml")
    assert "emb.toml:10: key 'toyworld': [toyworld] is only for simulator = \"toyworld\"" in elsewhere.value.render()
    with pytest.raises(UserError, match=r"key 'mineflayer': \[mineflayer\] is only for simulator = \"mineflayer\""):
        parse_arm(arm + '\n[mineflayer]\nhost = "127.0.0.1"\n', tmp_path / "mf.toml")


def test_a_simulator_whose_table_is_one_of_the_arms_own_is_refused(
    tmp_path: Path, toy_registered: registry.SimulatorDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    monkeypatch.setitem(registry._registered, TOY, replace(toy_registered, table="ports"))
    with pytest.raises(UserError) as refused:
        parse_arm(TOY_ARM.format(agent="random", simulator=TOY), tmp_path / "ports.toml")
    assert "ports.toml:4: key 'simulator': the toyworld simulator's descriptor names the table [ports]" in (
        refused.value.render()
    )


def test_a_simulators_options_reach_the_settings_the_request_and_the_fingerprint(
    tmp_path: Path, toy_registered: registry.SimulatorDescriptor
) -> None:
    from mcu_arms.arms.plan import resolve_settings, simulator_table
    from mcu_arms.contracts.settings import differing_keys, fingerprint

    arm = TOY_ARM.format(agent="random", simulator=TOY)
    default, _ = resolve_settings(parse_arm(arm, tmp_path / "a.toml"), [])
    same, _ = resolve_settings(parse_arm(arm + "[toyworld]\nattacks_per_pickup = 1\n", tmp_path / "b.toml"), [])
    slower, _ = resolve_settings(parse_arm(arm + "[toyworld]\nattacks_per_pickup = 4\n", tmp_path / "c.toml"), [])
    assert default.simulator_options == {"attacks_per_pickup": 1} and slower.simulator_options == {
        "attacks_per_pickup": 4
    }
    assert fingerprint(default) == fingerprint(same), "the table's defaults are the values in force without it"
    assert fingerprint(slower) != fingerprint(default)
    assert differing_keys([default, slower]) == {"simulator_options.attacks_per_pickup"}
    assert simulator_table(slower) == toy_registered.table_model(attacks_per_pickup=4)


def test_a_campaign_variant_that_changes_a_simulator_option_differs_in_it_alone(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _write_arm(project, "toy_slow", "random", table="\n[toyworld]\nattacks_per_pickup = 4\n")
    (project / "campaigns").mkdir()
    campaign = '[baseline]\narm = "toy_slow"\n\n[[variants]]\nname = "toy_fast"\ndiffers_in = ["{key}"]\n'
    variant = "[variants.toyworld]\n{line}\n"
    (project / "campaigns" / "fast.toml").write_text(
        campaign.format(key="simulator_options.attacks_per_pickup") + variant.format(line="attacks_per_pickup = 1")
    )
    plan = _cli(project, _toy_env(state), "plan", "--dry-run", "--json", "campaigns/fast.toml")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    options = {p["arm"]: p["settings"]["simulator_options"] for p in json.loads(plan.stdout)["plans"]}
    assert options == {"toy_slow": {"attacks_per_pickup": 4}, "toy_fast": {"attacks_per_pickup": 1}}
    (project / "campaigns" / "typo.toml").write_text(
        campaign.format(key="simulator_options.attacks_per_pickup") + variant.format(line="attacks_per_pikup = 1")
    )
    typo = _cli(project, _toy_env(state), "plan", "--dry-run", "campaigns/typo.toml")
    assert typo.returncode == 2 and "campaigns/typo.toml:8: key 'variants[0].toyworld.attacks_per_pikup'" in (
        typo.stderr
    ), typo.stderr


# Fingerprints of existing arms (a built-in simulator each, one with its own [mineflayer] table) as they were before
# simulators could carry options of their own: an added setting must leave every one unchanged.
PINNED_ARMS: dict[str, tuple[str, str]] = {
    "embedded": (
        'agent = "random"\ntask = "mining_and_collecting"\nsimulator = "embedded"\nseed = 3\nsteps = 50\n',
        "v2:c64a628053805697",
    ),
    "mineflayer": (
        'agent = "noop"\ntask = "mining_and_collecting"\nsimulator = "mineflayer"\nobserve = "state"\n'
        '[mineflayer]\nhost = "127.0.0.1"\nport = 25570\nversion = "1.21.1"\n',
        "v2:1403e176b9f1f50f",
    ),
}  # fmt: skip - each arm beside its fingerprint


@pytest.mark.parametrize("simulator", sorted(PINNED_ARMS))
def test_the_fingerprint_of_an_arm_without_simulator_options_is_unchanged(tmp_path: Path, simulator: str) -> None:
    from mcu_arms.arms.plan import resolve_settings
    from mcu_arms.contracts.settings import fingerprint

    text, pinned = PINNED_ARMS[simulator]
    settings, _ = resolve_settings(parse_arm(text, tmp_path / f"{simulator}.toml"), [])
    assert settings.simulator_options is None
    assert fingerprint(settings) == pinned
    assert fingerprint(settings.model_copy(update={"simulator_options": {}})) == pinned


def test_an_agent_kind_registered_through_its_entry_point_is_accepted_and_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(TOYSIM))
    from mcu_arms.contracts.agents import agent_kinds
    from mcu_arms.purple.registry import policy_factory

    assert agent_kinds()[-1] == "toy_attacker"
    policy = policy_factory("toy_attacker")(PurpleOptions())
    assert type(policy).__name__ == "AttackingPolicy"
    with pytest.raises(UserError, match="did you mean 'toy_attacker'"):
        policy_factory("toy_atacker")
    with pytest.raises(UserError) as typo:
        parse_arm(TOY_ARM.format(agent="toy_atacker", simulator="embedded"), tmp_path / "agent.toml")
    assert "agent.toml:1: key 'agent': 'toy_atacker' is not allowed (did you mean 'toy_attacker'?)" in (
        typo.value.render()
    )


def test_an_unregistered_simulator_is_refused_with_the_registered_ones(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _write_arm(project, "toy", "random")
    done = _cli(project, _toy_env(state, registered=False), "plan", "--dry-run", "--arm", "toy")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "arms/toy.toml:4: key 'simulator': unknown simulator 'toyworld'" in done.stderr
    assert "allowed: minestudio, embedded, mineflayer" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_an_arm_on_an_entry_point_simulator_runs_end_to_end_and_shows_everywhere(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    _write_arm(project, "toy_attacker", "toy_attacker")
    _write_arm(project, "toy_noop", "noop")
    _write_arm(project, "toy_slow", "toy_attacker", table="\n[toyworld]\nattacks_per_pickup = 4\n")
    env = _toy_env(state)

    tasks = _cli(project, env, "tasks", "mining_and_collecting", "--simulator", TOY, "--json")
    assert tasks.returncode == 0, tasks.stderr
    rows = {row["task"]: row for row in json.loads(tasks.stdout)}
    assert rows["collect_dirt"]["runs_on"][TOY] is True and rows["cut_stone"]["runs_on"][TOY] is False
    assert "counts 'pickup' events only" in rows["cut_stone"]["notes"][TOY]

    doctor = _cli(project, env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["toyworld engine"]["status"] == "ok"
    assert sorted(checks["toyworld engine"]["needed_by"]) == ["toy_attacker", "toy_noop", "toy_slow"]
    assert "3 toyworld at ~0.125 GB" in checks["memory"]["detail"]

    plan = _cli(project, env, "plan", "--dry-run", "--json", "--arm", "toy_attacker", "--arm", "toy_slow")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    planned = {p["settings"]["simulator_options"]["attacks_per_pickup"]: p for p in json.loads(plan.stdout)["plans"]}
    assert {p["settings"]["simulator"] for p in planned.values()} == {TOY} and set(planned) == {1, 4}
    assert planned[1]["fingerprint"] != planned[4]["fingerprint"]
    shown = _cli(project, env, "plan", "--dry-run", "--verbose", "--arm", "toy_slow")
    assert (
        shown.returncode == 0
        and "simulator_options" in shown.stdout
        and "[toyworld] attacks_per_pickup = 4" in shown.stdout
    )

    run = _cli(project, env, "run", "--arm", "toy_attacker", "--arm", "toy_noop", "--arm", "toy_slow")
    assert run.returncode == 0, run.stdout + run.stderr
    for arm in ("toy_attacker", "toy_noop", "toy_slow"):
        for episode in (1, 2):
            data = report(project, arm, episode)
            assert data is not None and data["status"] == "finished" and data["steps_run"] == 20, data
            assert data["simulator_label"].startswith("toyworld (a toy world defined under tests/)")
            assert set(data["processes"]) == {"mcu-arms", "green", "purple", "client"}
            assert all(data["processes"][role]["pid"] for role in ("green", "purple", "client"))
    assert report(project, "toy_noop", 1)["score"] == 0
    attacked = report(project, "toy_attacker", 1)
    assert attacked["score"] == attacked["max_score"] > 0, "the registered agent played: it attacks every step"
    slow = report(project, "toy_slow", 1)
    assert slow["score"] == 20 // 4, "the backend got the arm's [toyworld]: one pickup every 4 attacks"
    assert slow["simulator_label"].endswith("4 attacks a pickup")
    evaluation = json.loads((project / "output" / "toy_slow" / "episode_001" / "green" / "evaluation.json").read_text())
    assert evaluation["config"][TOY] == {"attacks_per_pickup": 4} and evaluation["ignored_config_keys"] == []

    compare = _cli(project, env, "compare", "toy_attacker", "toy_noop", "--json")
    assert compare.returncode == 0, compare.stderr
    analysis = json.loads(compare.stdout)
    assert '"design": "paired"' in compare.stdout, "same seeds on a simulator whose world is the seed's"
    assert TOY in json.dumps(analysis["arms"])

    html = _cli(project, env, "report", "--html", "site")
    assert html.returncode == 0, html.stdout + html.stderr
    assert "toyworld (a toy world defined under tests/)" in (project / "site" / "index.html").read_text()
