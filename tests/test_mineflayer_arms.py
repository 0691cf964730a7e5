"""Mineflayer arms without a server: what the arm file allows, what the plan resolves and refuses, what `tasks` and
`doctor` say, and how the sidecar's answers become the GameState contract. No node, no npm, no Minecraft here."""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from cli_support import invoke
from server_procs import free_port
from test_arm_spec import PLANNED as EMBEDDED_PLANNED

from mcu_arms.arms.plan import resolve_settings
from mcu_arms.arms.spec import parse_arm
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import fingerprint
from mcu_arms.green.sims.mineflayer.state import capabilities_from, daylight, facing, game_state

ARM = """agent = "noop"
task = "mining_and_collecting"
tasks = ["collect_wood"]
simulator = "mineflayer"
observe = "state"
steps = 20
save_frames = false

[mineflayer]
port = {port}

[ports]
green = "auto"
purple = "auto"
"""
# The embedded planned arm's two models, on this simulator.
MODELS = EMBEDDED_PLANNED[EMBEDDED_PLANNED.index("[planner]") : EMBEDDED_PLANNED.index("[ports]")]
PLANNED = ARM.replace('agent = "noop"', 'agent = "planned"\nstep_timeout = 120') + "\n" + MODELS


def _error(text: str) -> str:
    with pytest.raises(UserError) as caught:
        parse_arm(text, Path("arms/arm.toml"))
    return caught.value.render()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            ('agent = "noop"', 'agent = "worldmodel"'),
            'agent "worldmodel" reads frames, and the mineflayer simulator serves none',
        ),
        (('agent = "noop"', 'agent = "prolong"'), 'agent "prolong" reads frames, and the mineflayer simulator'),
        (
            ('agent = "noop"', 'agent = "scripted"'),
            'agent "scripted" plays Crafter frames: it needs simulator = "embedded"',
        ),
        (
            ('agent = "noop"', 'agent = "steve1"'),
            'agent "steve1" is a Minecraft policy: it needs simulator = "minestudio"',
        ),
        (('observe = "state"', 'observe = "frame+state"'), 'serves no frames: it needs observe = "state"'),
        (('observe = "state"', 'observe = "state"\nvideo_eval = true'), "video evaluation grades frames"),
        (('simulator = "mineflayer"', 'simulator = "embedded"'), '[mineflayer] is only for simulator = "mineflayer"'),
        (("port = {port}", 'port = 25565\nversion = "latest"'), "key 'mineflayer.version'"),
        (("port = {port}", 'port = 25565\nusername = "a b"'), "key 'mineflayer.username'"),
        (("port = {port}", 'port = 25565\nmotd = "hi"'), "unknown key"),
    ],
)
def test_the_arm_file_refuses_what_the_mineflayer_simulator_cannot_serve(change: tuple[str, str], says: str) -> None:
    message = _error(ARM.replace(*change).replace("{port}", "25565"))
    assert says in message, message


def test_a_planned_arm_resolves_its_server_and_only_the_version_is_in_the_fingerprint() -> None:
    spec = parse_arm(PLANNED.format(port=25570), Path("arms/p.toml"))
    settings, _ = resolve_settings(spec, [])
    assert (settings.mineflayer_host, settings.mineflayer_port, settings.mineflayer_version) == (
        "127.0.0.1",
        25570,
        "1.21.1",
    )
    assert settings.mineflayer_username == "mcu_agent"
    elsewhere, _ = resolve_settings(parse_arm(PLANNED.format(port='25571\nhost = "10.0.0.2"'), Path("arms/q.toml")), [])
    newer, _ = resolve_settings(parse_arm(PLANNED.format(port='25570\nversion = "1.21.4"'), Path("arms/r.toml")), [])
    assert fingerprint(elsewhere) == fingerprint(settings), "which server is placement, as ports are"
    assert fingerprint(newer) != fingerprint(settings), "the Minecraft version changes results"
    embedded, _ = resolve_settings(
        parse_arm(
            PLANNED.replace('simulator = "mineflayer"', 'simulator = "embedded"').replace(
                "[mineflayer]\nport = {port}\n", ""
            ),
            Path("arms/e.toml"),
        ),
        [],
    )
    assert not any(key.startswith("mineflayer_") for key in embedded.fingerprinted())


def test_plan_names_the_server_in_the_scenario_and_blocks_an_arm_whose_server_does_not_answer(
    project: Path, env
) -> None:
    port = free_port()
    (project / "arms" / "logs.toml").write_text(ARM.format(port=port))
    planned = invoke(project, env, "plan", "--arm", "logs", "--dry-run", "--json")
    assert planned.exit_code == 0, planned.out + planned.err
    (plan,) = json.loads(planned.out)["plans"]
    assert plan["tasks"] == ["collect_wood"] and plan["settings"]["mineflayer_port"] == port
    assert any(f"no Minecraft server answers at 127.0.0.1:{port}" in reason for reason in plan["blocked"]), plan[
        "blocked"
    ]
    from mcu_arms.arms.plan import scenario_toml
    from mcu_arms.contracts.settings import ArmPlan

    config = tomllib.loads(scenario_toml(ArmPlan.model_validate(plan)))["config"]
    assert config["simulator"] == "mineflayer" and config["observe"] == "state"
    assert config["mineflayer"] == {
        "host": "127.0.0.1",
        "port": port,
        "version": "1.21.1",
        "username": "mcu_agent",
        "chat": False,
    }


def test_doctor_fails_when_the_server_does_not_answer(project: Path, env) -> None:
    port = free_port()
    (project / "arms" / "logs.toml").write_text(ARM.format(port=port))
    done = invoke(project, env, "doctor", "--json")
    checks = {check["name"]: check for check in json.loads(done.out)["checks"]}
    server = checks[f"Minecraft server 127.0.0.1:{port}"]
    assert done.exit_code == 1 and server["status"] == "fail" and server["needed_by"] == ["logs"]
    assert "online-mode=false" in server["detail"], "it says what to start there"
    assert {"node", "mineflayer libraries"} <= set(checks)


def test_tasks_say_what_the_mineflayer_backend_can_score(project: Path, env) -> None:
    done = invoke(project, env, "tasks", "mining_and_collecting", "--simulator", "mineflayer", "--json")
    rows = {row["task"]: row for row in json.loads(done.out)}
    assert rows["collect_wood"]["runs_on"]["mineflayer"] and not rows["collect_wool"]["runs_on"]["mineflayer"]
    assert "pickup 'wool' is no Minecraft 1.21 item" in rows["collect_wool"]["notes"]["mineflayer"]
    assert not rows["mine_horizontally"]["runs_on"]["mineflayer"], "video only: no frames to grade here"
    diamond = invoke(project, env, "tasks", "mine_diamond_from_scratch", "--simulator", "mineflayer", "--json")
    note = json.loads(diamond.out)[0]["notes"]["mineflayer"]
    assert (
        "mine_log: mine_block 'log' is no Minecraft 1.21 item" in note
        and "oak_log, birch_log, spruce_log count" in note
    )


CAPABILITIES = {
    "items": ["oak_log", "oak_planks", "stick", "crafting_table", "apple", "wooden_pickaxe"],
    "recipes": [
        {"method": "collect", "item": "oak_log", "source": "oak_log", "requires": {}},
        {"method": "craft", "item": "oak_planks", "consumes": {"oak_log": 1}, "stations": [], "yields": 4},
    ],
    "walkable": ["air", "short_grass"],
    "hostile": ["zombie"],
    "foods": {"apple": 4},
    "timeouts_ms": {},
}
OBSERVED = {
    "health": 17,
    "food": 19,
    "position": [8.5, 24.0, 8.5],
    "yaw": 0.0,
    "inventory": {"oak_log": 2, "apple": 0},
    "equipment": {"hand": "wooden_axe"},
    "sideways": 16,
    "up_down": 8,
    "blocks": {"oak_log": {"count": 5, "offset": [-1, 0, 14], "distance": 15}},
    "adjacent": {"north": "air", "south": "oak_log", "east": None, "west": "air"},
    "entities": [
        {"name": "zombie", "kind": "hostile", "offset": [2.4, 0.0, -1.2]},
        {"name": "cow", "kind": "animal", "offset": [0.0, 0.0, 1.0]},
    ],
    "faced": {"block": "grass_block", "entity": None},
    "stations": [],
    "time_of_day": 6000,
    "sleeping": False,
    "feasible": ["collect:oak_log"],
    "home": [2, 23, 10],
}


def test_the_sidecars_observation_becomes_the_game_state_contract() -> None:
    capabilities = capabilities_from(CAPABILITIES)
    assert capabilities.actions == "skills" and capabilities.keymap is None and capabilities.foods == {"apple": 4}
    assert capabilities.aliases["wood"] == "oak_log" and "iron" not in capabilities.aliases, "only items it has"
    state = game_state(OBSERVED, capabilities)
    assert state.inventory == {"oak_log": 2} and state.vitals.health.value == 17 and state.vitals.health.max == 20
    log = state.view.tiles["oak_log"]
    assert (log.nearest.east, log.nearest.south, log.nearest.up, log.distance) == (-1, 14, 0, 15)
    assert state.adjacent == {"north": "air", "south": "oak_log", "west": "air"}
    assert [(e.kind, e.distance, e.hostile) for e in state.entities] == [("cow", 1, False), ("zombie", 3, True)]
    assert (state.facing.east, state.facing.south) == (0, -1), "yaw 0 looks north"
    assert state.position.y == 24.0 and state.equipment == {"hand": "wooden_axe"} and state.daylight == 1.0
    assert (state.home.east, state.home.south, state.home.up) == (-6, 2, -1), "home, from where the bot stands"
    quirks: Counter[str] = Counter()
    texts = game_state({**OBSERVED, "inventory": {"oak_log": "10", "apple": "0"}}, capabilities, quirks)
    assert texts.inventory == {"oak_log": 10} and quirks["server_quirk.count_converted"] == 2, (
        "a string count is an int"
    )


@pytest.mark.parametrize(("yaw", "east", "south"), [(0.0, 0, -1), (3.1416, 0, 1), (1.5708, -1, 0), (-1.5708, 1, 0)])
def test_facing_follows_minecrafts_yaw(yaw: float, east: int, south: int) -> None:
    assert (facing(yaw).east, facing(yaw).south) == (east, south)


def test_daylight_follows_minecrafts_sky() -> None:
    assert daylight(6000) == 1.0 and daylight(18000) == 0.0
    assert daylight(0) > 0.5 > daylight(13500) > daylight(18000)


def test_the_planned_agents_action_runner_sends_one_skill_per_action_and_judges_it_by_the_state() -> None:
    import random

    from mcu_arms.contracts.planned import PlanStep
    from mcu_arms.contracts.skills import SkillOutcome, SkillRequest
    from mcu_arms.purple.planned.action_runner import ActionRunner
    from mcu_arms.purple.planned.running import Outcome

    capabilities = capabilities_from(CAPABILITIES)
    action_runner = ActionRunner(capabilities, random.Random(0))
    calm = game_state({**OBSERVED, "entities": []}, capabilities)
    offered = action_runner.for_step(PlanStep(method="collect", item="oak_log", count=5), calm)
    assert [c.id for c in offered] == ["collect_oak_log", "explore_oak_log"]
    collect = action_runner.start(offered[0], calm, 0)
    request = collect.next(calm)
    assert isinstance(request, SkillRequest) and request.kind == "collect"
    assert request.args == {"block": "oak_log", "count": 3}, "what is still missing of the step's count"
    action_runner.last_skill = SkillOutcome(kind="collect", status="success", duration_ms=900.0)
    claimed = collect.next(calm)
    assert isinstance(claimed, Outcome) and claimed.status == "failed", "the skill said success; nothing was gained"
    assert "the simulator said success" in claimed.detail
    richer = calm.model_copy(update={"inventory": {"oak_log": 3}})
    gained = action_runner.start(offered[0], calm, 1)
    gained.next(calm)
    assert gained.next(richer).status == "succeeded"

    planks = action_runner.start(
        action_runner.for_step(PlanStep(method="craft", item="oak_planks", count=4), richer)[0], richer, 2
    )
    assert planks.next(richer).kind == "craft" and planks.interrupt(richer).status == "action_needs_replan"
    hungry = game_state({**OBSERVED, "entities": [], "food": 5, "inventory": {"apple": 2}}, capabilities)
    assert [c.id for c in action_runner.survival(hungry)] == ["eat_apple"]
    threatened = game_state(OBSERVED, capabilities)
    assert action_runner.threatened(threatened) and [c.skill for c in action_runner.threat(threatened)][:2] == [
        "fight",
        "flee",
    ]
    assert action_runner.start(action_runner.threat(threatened)[0], threatened, 3).next(threatened).kind == "attack"


def test_the_episode_page_shows_the_skill_a_step_carried_out() -> None:
    from mcu_arms.contracts.steps import StepRecord
    from mcu_arms.contracts.wire import noop_action
    from mcu_arms.view.episode import step_detail

    skill = {"kind": "collect", "args": {"block": "oak_log", "count": 2}, "timeout_ms": 50000}
    outcome = {"kind": "collect", "status": "success", "duration_ms": 9000.0, "inventory_delta": {"oak_log": 2}}
    applied = {**noop_action(), "camera": [0.0, 0.0]}
    record = StepRecord(
        step=0, t=0.0, received="{}", applied=applied, agent_ms=1.0, sim_ms=9000.0, skill=skill, skill_outcome=outcome
    )
    assert step_detail(record).applied == {"skill": skill, "outcome": outcome}
    keys = record.model_copy(update={"skill": None, "skill_outcome": None, "applied": {**applied, "forward": 1}})
    assert step_detail(keys).applied == {"forward": 1}
