"""What an arm on MineStudio says before it runs: the reset mode and STEVE-1's condition text as settings (in the
fingerprint, the scenario and the purple's command line), and the reward entries MineStudio 1.1.6 can never pay,
with the reason, in `tasks` and `plan`."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import invoke

from mcu_arms.arms.plan import scenario_toml
from mcu_arms.client.scenario import load_scenario
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.contracts.simulators import task_support
from mcu_arms.contracts.tasks import all_tasks

MINESTUDIO_ARM = """\
agent = "{agent}"
task = "{task}"
simulator = "minestudio"
steps = 100
{extra}
[ports]
green = "auto"
purple = "auto"
"""
DEAD_ENTRIES = {
    "explore_boat": ["craft_boat", "use_boat"],
    "collect_wool": ["collect_wool"],
    "explore_the_treasure": ["open_buried_treasure_chest"],
    "build_snow_golem": ["spawn_snow_golem"],
}


def _arm(project: Path, name: str, *, agent: str = "random", task: str = "explore", extra: str = "") -> None:
    (project / "arms" / f"{name}.toml").write_text(MINESTUDIO_ARM.format(agent=agent, task=task, extra=extra))


def _plans(project: Path, env: dict[str, str], *names: str) -> dict[str, dict]:
    args = [arg for name in names for arg in ("--arm", name)]
    outcome = invoke(project, env, "plan", "--dry-run", "--json", *args)
    assert outcome.exit_code == 0, outcome.err
    return {plan["arm"]: plan for plan in json.loads(outcome.out)["plans"]}


def test_exactly_the_four_dead_reward_tasks_have_entries_minestudio_can_never_pay() -> None:
    found = {}
    for task in (task for tasks in all_tasks().values() for task in tasks):
        support = task_support("minestudio", task)
        assert support.runnable
        if support.unavailable:
            found[task.name] = support.unavailable
            assert set(support.reasons) == set(support.unavailable)
    assert found == DEAD_ENTRIES
    boat = task_support("minestudio", next(t for t in all_tasks()["explore"] if t.name == "explore_boat"))
    assert "oak_boat" in boat.reasons["craft_boat"] and "not renamed" in boat.reasons["craft_boat"]
    golem = task_support("minestudio", next(t for t in all_tasks()["building"] if t.name == "build_snow_golem"))
    assert "no Minecraft statistic" in golem.reasons["spawn_snow_golem"]


def test_dead_objects_of_entries_that_still_pay_are_noted() -> None:
    task = next(t for t in all_tasks()["mine_diamond_from_scratch"])
    support = task_support("minestudio", task)
    assert support.unavailable == []
    assert any(note.startswith("mine_log: mine_block 'log' is no Minecraft 1.16 statistic") for note in support.notes)
    assert any("deepslate_iron_ore" in note and "iron_ore count" in note for note in support.notes)


def test_tasks_shows_the_reason_each_entry_never_pays(project: Path, env: dict[str, str]) -> None:
    outcome = invoke(project, env, "tasks", "mining_and_collecting", "--simulator", "minestudio", "--json")
    assert outcome.exit_code == 0, outcome.err
    rows = {row["task"]: row for row in json.loads(outcome.out)}
    note = rows["collect_wool"]["notes"]["minestudio"]
    assert note.startswith("collect_wool never pays: pickup 'wool' is no Minecraft 1.16 statistic")
    assert "white_wool" in note and rows["collect_wool"]["runs_on"]["minestudio"] is True
    assert "minestudio" not in rows["mine_iron_ore"]["notes"]


def test_plan_warns_about_each_dead_entry_with_the_reason(project: Path, env: dict[str, str]) -> None:
    _arm(project, "explore")
    warnings = _plans(project, env, "explore")["explore"]["notes"]
    boat = [w for w in warnings if w.startswith("explore_boat: ")]
    assert len(boat) == 2 and all("never reachable on the minestudio simulator" in w for w in boat)
    assert any("craft_boat never pays: craft_item 'boat'" in w for w in boat)
    assert any(
        w.startswith("explore_the_treasure: open_buried_treasure_chest never pays") and "custom/open_chest" in w
        for w in warnings
    )


def test_reset_mode_is_a_setting_in_the_fingerprint_and_the_scenario(project: Path, env: dict[str, str]) -> None:
    _arm(project, "hard")
    _arm(project, "fast", extra='reset_mode = "seeded_fast"\n')
    plans = _plans(project, env, "hard", "fast")
    assert plans["hard"]["settings"]["reset_mode"] == "hard", "the default, stated in the plan"
    assert plans["fast"]["settings"]["reset_mode"] == "seeded_fast"
    assert plans["hard"]["fingerprint"] != plans["fast"]["fingerprint"]
    scenario = project / "scenario.toml"
    scenario.write_text(scenario_toml(ArmPlan.model_validate(plans["fast"])))
    assert load_scenario(scenario).config.reset_mode == "seeded_fast"


def test_action_mode_defaults_to_upstreams_agent_mode_and_env_keeps_the_fingerprint_of_older_results(
    project: Path, env: dict[str, str]
) -> None:
    """Every MineStudio result before the setting ran env mode: an arm asking for env mode keeps exactly that
    fingerprint (its settings without action_mode), while the new default, agent mode, gets its own. Arms on the other
    simulators have no action_mode at all, so their fingerprints do not move."""
    from mcu_arms.contracts.settings import Settings, fingerprint

    _arm(project, "agent")
    _arm(project, "env", extra='action_mode = "env"\n')
    plans = _plans(project, env, "agent", "env")
    assert plans["agent"]["settings"]["action_mode"] == "agent", "the default, stated in the plan"
    assert plans["agent"]["fingerprint"] != plans["env"]["fingerprint"]
    older = Settings.model_validate({**plans["env"]["settings"], "action_mode": None})  # a report from before
    assert fingerprint(older) == plans["env"]["fingerprint"]
    scenario = project / "scenario.toml"
    scenario.write_text(scenario_toml(ArmPlan.model_validate(plans["env"])))
    assert load_scenario(scenario).config.action_mode == "env"
    embedded = MINESTUDIO_ARM.format(agent="random", task="crafting", extra="").replace('"minestudio"', '"embedded"')
    (project / "arms" / "emb.toml").write_text(embedded)
    assert _plans(project, env, "emb")["emb"]["settings"]["action_mode"] is None


def test_reset_mode_is_refused_on_the_embedded_simulator(project: Path, env: dict[str, str]) -> None:
    text = MINESTUDIO_ARM.format(agent="random", task="crafting", extra='reset_mode = "hard"\n')
    (project / "arms" / "emb.toml").write_text(text.replace('simulator = "minestudio"', 'simulator = "embedded"'))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "emb")
    assert outcome.exit_code == 2
    assert "key 'reset_mode'" in outcome.err and 'only for simulator = "minestudio"' in outcome.err
    _arm(project, "bad", extra='reset_mode = "fast"\n')
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "bad")
    assert outcome.exit_code == 2 and "hard, seeded_fast" in outcome.err


def test_steve1_condition_reaches_the_purple_and_is_fingerprinted(project: Path, env: dict[str, str]) -> None:
    _arm(project, "steve", agent="steve1", task="mining_and_collecting", extra='steve1_condition = "chop a tree"\n')
    _arm(project, "steve_text", agent="steve1", task="mining_and_collecting")
    plans = _plans(project, env, "steve", "steve_text")
    argv = next(p for p in plans["steve"]["processes"] if p["role"] == "purple")["argv"]
    assert argv[argv.index("--steve1-condition") + 1] == "chop a tree"
    assert (
        "--steve1-condition" not in next(p for p in plans["steve_text"]["processes"] if p["role"] == "purple")["argv"]
    )
    assert plans["steve"]["fingerprint"] != plans["steve_text"]["fingerprint"]
    assert any(w.startswith("steve1_condition: all ") and "'chop a tree'" in w for w in plans["steve"]["warnings"])
    _arm(project, "not_steve", extra='steve1_condition = "chop a tree"\n')
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "not_steve")
    assert outcome.exit_code == 2 and "key 'steve1_condition'" in outcome.err


def test_doctor_rows_are_the_backends_own_checks(
    project: Path, env: dict[str, str], minestudio_host: dict, tmp_path: Path
) -> None:
    hub = tmp_path / "hub" / "models--CraftJarvis--MineStudio_STEVE-1.official"
    (hub / "snapshots" / ("b" * 40)).mkdir(parents=True)
    (hub / "snapshots" / ("b" * 40) / "config.json").write_text("{}")
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("b" * 40)
    _arm(project, "ms")
    _arm(
        project,
        "steve",
        agent="steve1",
        task="mining_and_collecting",
        extra=f'\n[env]\nHF_HUB_CACHE = "{tmp_path / "hub"}"\n',
    )
    host = {**env, **minestudio_host["env"], "MINESTUDIO_GPU_RENDER": "1"}
    outcome = invoke(project, host, "doctor", "--json", *(str(project / "arms" / f"{a}.toml") for a in ("ms", "steve")))
    rows = {(row["name"], tuple(row["needed_by"])): row for row in json.loads(outcome.out)["checks"]}
    for name in ("minestudio import", "java", "xvfb-run", "xauth", "MineStudio engine", "MINESTUDIO_DIR"):
        assert rows[(name, ("ms", "steve"))]["status"] == "ok", rows[(name, ("ms", "steve"))]
    assert (
        "imports as the green imports it (minestudio 1.1.6+fake"
        in rows[("minestudio import", ("ms", "steve"))]["detail"]
    )
    assert rows[("MINESTUDIO_GPU_RENDER", ("ms", "steve"))]["status"] == "warn"
    assert rows[("STEVE-1 weights", ("steve",))]["status"] == "ok", "found through the arm's [env]"
    tokenizer = rows[("MineCLIP tokenizer", ("steve",))]
    assert (
        tokenizer["status"] == "fail" and "huggingface-cli download openai/clip-vit-base-patch16" in tokenizer["detail"]
    )
    assert outcome.exit_code == 1
