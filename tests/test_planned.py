"""The planned agent's parts against stand-in model servers on loopback: plan validation and re-planning, decision
validation for both policy backends, the start-up checks, and the reflex on the real embedded simulator."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from planned_stubs import (
    GOOD_PLAN,
    LATE,
    PLANNER_MODEL,
    POLICY_MODEL,
    POLICY_REVISION,
    UNKNOWN_ITEM_PLAN,
    StubChatPolicy,
    StubDecisionService,
    StubPlanner,
    choose_first,
    reworded,
)

pytest.importorskip("crafter")

from mcu_arms.contracts.agent_report import PlannedEpisode
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.tasks import TASKS_ROOT, TaskSpec, load_task
from mcu_arms.contracts.trajectory import TRAJECTORY_FILE, TrajectoryRecord, read_trajectory
from mcu_arms.contracts.wire import InitPayload, ObservationPayload
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator
from mcu_arms.purple.planned.agent import PlannedPolicy
from mcu_arms.purple.planned.models import ChatModel
from mcu_arms.purple.planned.planner import PlanRejected, PlanTracker, parse_plan
from mcu_arms.purple.planned.policy import ChatPolicy, InvalidDecision, validate_decision

CANDIDATES = ["collect_wood", "explore_tree", "drink_water"]


@pytest.fixture(scope="module")
def state():
    sim = EmbeddedSimulator()
    sim.reset(TaskSpec(name="t", category="crafting", text="t"), 0)
    return sim.state()


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("choose wood", "unparseable"),
        ({"choice": "teleport", "probabilities": {c: 1 / 3 for c in CANDIDATES}}, "choice_not_a_candidate"),
        ({"choice": "collect_wood"}, "no_probabilities"),
        (
            {"choice": "collect_wood", "probabilities": {"collect_wood": 0.5, "explore_tree": 0.5}},
            "probabilities_not_the_candidates",
        ),
        (
            {"choice": "collect_wood", "probabilities": {**{c: 0.25 for c in CANDIDATES}, "fly": 0.25}},
            "probabilities_not_the_candidates",
        ),
        (
            {
                "choice": "collect_wood",
                "probabilities": {"collect_wood": 1.2, "explore_tree": -0.1, "drink_water": -0.1},
            },
            "probability_out_of_range",
        ),
        (
            {"choice": "collect_wood", "probabilities": {"collect_wood": True, "explore_tree": 0, "drink_water": 0}},
            "probability_not_a_number",
        ),
        (
            {
                "choice": "collect_wood",
                "probabilities": {"collect_wood": math.nan, "explore_tree": 0, "drink_water": 0},
            },
            "probability_not_a_number",
        ),
        ({"choice": "collect_wood", "probabilities": {c: 0.5 for c in CANDIDATES}}, "probabilities_do_not_sum_to_1"),
    ],
)
def test_every_malformed_decision_is_rejected_saying_why(answer, code: str) -> None:
    with pytest.raises(InvalidDecision) as rejected:
        validate_decision(answer, CANDIDATES)
    assert rejected.value.code == code


def test_a_decision_within_the_tolerance_is_accepted() -> None:
    decision = validate_decision(
        {"choice": "explore_tree", "probabilities": {"collect_wood": 0.3, "explore_tree": 0.6995, "drink_water": 0}},
        CANDIDATES,
    )
    assert decision.choice == "explore_tree" and decision.source == "policy"
    assert set(decision.probabilities) == set(CANDIDATES)


def test_plans_are_checked_against_the_capability_list(state) -> None:
    capabilities = state.capabilities
    plan = parse_plan("```json\n" + json.dumps(GOOD_PLAN) + "\n```", capabilities)
    assert [(s.method, s.item, s.count) for s in plan.steps] == [
        ("collect", "wood", 4),
        ("place", "table", 1),
        ("craft", "wood_pickaxe", 1),
        ("collect", "stone", 2),
    ]  # Minecraft names mapped through the aliases
    with pytest.raises(PlanRejected, match="unknown item 'diamond_hoe'"):
        parse_plan(json.dumps(UNKNOWN_ITEM_PLAN), capabilities)
    with pytest.raises(PlanRejected, match=r"cannot craft 'crafting_table' \(it is obtained by: place\)"):
        parse_plan(
            json.dumps({"goal": "g", "steps": [{"method": "craft", "item": "crafting_table", "count": 1}]}),
            capabilities,
        )
    with pytest.raises(PlanRejected, match="count 12 is above the inventory cap 9"):
        parse_plan(
            json.dumps({"goal": "g", "steps": [{"method": "collect", "item": "wood", "count": 12}]}), capabilities
        )
    with pytest.raises(PlanRejected, match="not a JSON object"):
        parse_plan("Sure! First gather wood.", capabilities)
    with pytest.raises(PlanRejected, match="not a plan"):
        parse_plan(json.dumps({"goal": "g", "steps": [{"method": "mine", "item": "wood", "count": 1}]}), capabilities)


def _tracker(chat: ChatModel, state) -> tuple[PlanTracker, PlannedEpisode, list[str]]:
    episode = PlannedEpisode(task_dir="t", task="t", started_at="now", trajectory="t")
    warnings: list[str] = []
    return PlanTracker(chat, "get a pickaxe", state.capabilities, episode, warnings.append), episode, warnings


def test_an_invalid_plan_is_rejected_with_its_reason_and_asked_again(state) -> None:
    planner = StubPlanner(["not json at all", UNKNOWN_ITEM_PLAN])

    async def plan() -> PlanTracker:
        with planner.serving() as url:
            chat = ChatModel("planner", url + "/v1", PLANNER_MODEL, None, 10)
            tracker, episode, warnings = _tracker(chat, state)
            await tracker.first(state)
            await chat.close()
            return tracker, episode, warnings

    tracker, episode, warnings = asyncio.run(plan())
    assert tracker.plan is not None and tracker.plan.steps[0].item == "wood"
    assert episode.invalid_outputs == {"invalid_plan": 2} and episode.planner_calls == 3
    assert len(warnings) == 2 and "unknown item 'diamond_hoe'" in warnings[1]
    third = planner.requests[2]["messages"]
    assert "Rejected: step 1: unknown item 'diamond_hoe'" in third[-1]["content"], "the model is told why"
    assert len(episode.planner_latency_ms) == 3


def test_a_late_replan_is_discarded_and_a_changed_one_rejected(state) -> None:
    release_flag: list[bool] = []

    def replan(index: int, contract: list[dict]) -> dict:
        return reworded(GOOD_PLAN, contract, change_count=index == 1)

    planner = StubPlanner(
        [], replan=replan, hold_replan=lambda index: (lambda: bool(release_flag)) if index == 0 else None
    )

    async def scenario() -> tuple[PlanTracker, PlannedEpisode]:
        with planner.serving() as url:
            chat = ChatModel("planner", url + "/v1", PLANNER_MODEL, None, 30)
            tracker, episode, _ = _tracker(chat, state)
            await tracker.first(state)
            accepted = [step.contract() for step in tracker.plan.steps]
            tracker.request("replan", state, "step 1 reached")  # held by the stub: late
            tracker.cursor += 1  # the agent moves on past the step the re-plan was asked for
            tracker.revision += 1
            release_flag.append(True)
            await asyncio.wait_for(asyncio.shield(tracker.pending), 30)
            tracker.poll()
            assert episode.stale_replans == 1 and tracker.plan.steps[0].subgoal == "gather wood"
            tracker.request("replan", state, "step 2 reached")  # changes a count: rejected
            await asyncio.wait_for(asyncio.shield(tracker.pending), 30)
            tracker.poll()
            assert episode.invalid_outputs["invalid_replan"] == 1
            assert [step.contract() for step in tracker.plan.steps] == accepted
            tracker.request("replan", state, "step 3 reached")  # rewords only: accepted
            await asyncio.wait_for(asyncio.shield(tracker.pending), 30)
            tracker.poll()
            await tracker.close()
            await chat.close()
            return tracker, episode

    tracker, episode = asyncio.run(scenario())
    assert episode.replans_accepted == 1 and tracker.plan.steps[0].subgoal == "now: gather wood"
    assert [step.contract() for step in tracker.plan.steps][0] == ("collect", "wood", 4)
    assert planner.released_late == [0]


def test_a_chat_policy_is_held_to_the_same_contract(state) -> None:
    stub = StubChatPolicy(
        [
            lambda ids: "```json\n" + json.dumps(choose_first(ids)) + "\n```",
            lambda ids: "I would collect wood.",
            lambda ids: json.dumps({"choice": ids[0], "probabilities": {i: 0.6 for i in ids}}),
        ]
    )

    async def ask() -> list:
        with stub.serving() as url:
            policy = ChatPolicy(ChatModel("policy", url + "/v1", POLICY_MODEL, None, 10))
            answers = [await policy.ask({"goal": "g"}, _candidates(state)) for _ in range(3)]
            await policy.close()
            return answers

    (first, _), (second, _), (third, _) = asyncio.run(ask())
    ids = [c.id for c in _candidates(state)]
    assert validate_decision(first, ids).choice == ids[0]
    for bad, code in ((second, "unparseable"), (third, "probabilities_do_not_sum_to_1")):
        with pytest.raises(InvalidDecision) as rejected:
            validate_decision(bad, ids)
        assert rejected.value.code == code
    assert set(json.loads(stub.requests[0]["messages"][1]["content"])["allowed_actions"]) == set(ids)


def test_thinking_off_is_sent_with_every_request_and_nothing_when_unset(state) -> None:
    script = [lambda ids: json.dumps(choose_first(ids))] * 4
    off, unset = StubChatPolicy(list(script)), StubChatPolicy(list(script))

    async def ask(stub: StubChatPolicy, thinking: bool | None) -> None:
        with stub.serving() as url:
            policy = ChatPolicy(ChatModel("policy", url + "/v1", POLICY_MODEL, None, 10, thinking))
            for _ in range(2):
                await policy.ask({"goal": "g"}, _candidates(state))
            await policy.close()

    asyncio.run(ask(off, False))
    asyncio.run(ask(unset, None))
    assert len(off.requests) == 2 and all(r["chat_template_kwargs"] == {"enable_thinking": False} for r in off.requests)
    assert unset.requests and not any("chat_template_kwargs" in r for r in unset.requests), "the server's default"


def _candidates(state):
    from mcu_arms.contracts.trajectory import CandidateAction

    return [CandidateAction(id=i, skill="explore", description=i) for i in ("explore", "wait", "sleep")]


def _options(tmp_path: Path, planner_url: str, policy_url: str, **extra) -> PurpleOptions:
    return PurpleOptions(
        seed=0,
        output_dir=tmp_path,
        planner_base_url=planner_url + "/v1",
        planner_model=PLANNER_MODEL,
        policy_backend="decision_service",
        policy_base_url=policy_url,
        policy_model=POLICY_MODEL,
        policy_revision=POLICY_REVISION,
        policy_timeout=3.0,
        **extra,
    )


def test_a_decision_service_with_another_revision_refuses_the_episode(tmp_path: Path) -> None:
    planner, kev = StubPlanner([]), StubDecisionService([], late_s=0, revision="ffff0000")

    async def start():
        with planner.serving() as planner_url, kev.serving() as kev_url:
            policy = PlannedPolicy(_options(tmp_path, planner_url, kev_url))
            ack = await policy.init(InitPayload(prompt="", text="task"))
            await policy.close()
            return ack

    ack = asyncio.run(start())
    assert not ack.success
    assert f"runs '{POLICY_MODEL}@ffff0000', not {POLICY_MODEL}@{POLICY_REVISION}" in ack.message
    report = json.loads((tmp_path / "planned_report.json").read_text())
    assert any("ffff0000" in warning for warning in report["warnings"])


def test_missing_settings_and_unset_key_variables_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--planner-base-url"):
        PlannedPolicy(PurpleOptions(output_dir=tmp_path))
    options = _options(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9", policy_env_key="KEV_KEY_FOR_TEST")
    with pytest.raises(UserError, match="KEV_KEY_FOR_TEST is not set"):
        PlannedPolicy(options, environ={})


def test_a_health_drop_interrupts_the_running_action_in_the_same_step(tmp_path: Path) -> None:
    """On the real simulator, with a zombie summoned next to the player: each drop ends the running action on the
    step it was seen, and the threat decision it leads to is taken on that same step."""
    planner = StubPlanner([])
    kev = StubDecisionService([LATE], late_s=5.0)  # the first decision comes late: the agent must not wait on it
    task = load_task(TASKS_ROOT / "combat" / "combat_zombies.yaml")

    async def play() -> None:
        with planner.serving() as planner_url, kev.serving() as kev_url:
            policy = PlannedPolicy(_options(tmp_path, planner_url, kev_url))
            assert (await policy.init(InitPayload(prompt="", text=task.text))).success
            sim = EmbeddedSimulator()
            sim.set_frames(False)
            sim.reset(task, 0)
            for step in range(80):
                answer = await policy.act(ObservationPayload(step=step, obs="", state=sim.state()))
                sim.step(answer.action)
                await asyncio.sleep(0.002)  # the server's loop runs between steps: background re-plans progress
            await policy.close()

    asyncio.run(play())
    records = read_trajectory(tmp_path / "task_01" / TRAJECTORY_FILE)
    reflexes = [(index, record) for index, record in enumerate(records) if record.reflex is not None]
    assert reflexes, "the zombie never hurt the player"
    for index, record in reflexes:
        reflex = record.reflex
        assert reflex.observed_step == reflex.interrupted_step == record.end_step
        assert reflex.health_after < reflex.health_before and reflex.latency_ms < 1000
        assert record.action_status in ("interrupted", "action_needs_replan")
        if index + 1 < len(records):
            assert records[index + 1].step == record.end_step, "the threat decision waits for no further step"
            assert records[index + 1].phase == "threat"
    assert any(r.phase == "threat" and r.selected_action.startswith(("fight", "flee")) for r in records)
    report = json.loads((tmp_path / "planned_report.json").read_text())
    assert report["reflex_interrupts"] == len(reflexes)
    assert report["model_failures"] == {"policy_timeout": 1}
    for line in (tmp_path / "task_01" / TRAJECTORY_FILE).read_text().splitlines():
        assert set(json.loads(line)) == set(TrajectoryRecord.model_fields)


def test_an_unreachable_planner_or_an_unserved_model_refuses_the_episode(tmp_path: Path) -> None:
    from server_procs import free_port

    kev = StubDecisionService([], late_s=0)
    other_planner = StubPlanner([], model="some-other-model")

    async def start(planner_url: str, kev_url: str, output: Path):
        policy = PlannedPolicy(_options(output, planner_url, kev_url))
        ack = await policy.init(InitPayload(prompt="", text="task"))
        refused = await policy.act(ObservationPayload(step=0, obs=""))
        await policy.close()
        return ack, refused

    with kev.serving() as kev_url, other_planner.serving() as other_url:
        nobody = f"http://127.0.0.1:{free_port()}"
        unreachable, noop = asyncio.run(start(nobody, kev_url, tmp_path / "a"))
        unserved, _ = asyncio.run(start(other_url, kev_url, tmp_path / "b"))
    assert not unreachable.success and "planner_error" in unreachable.message and "unreachable" in unreachable.message
    assert noop.reason == unreachable.message, "every step then says why it does nothing"
    assert not unserved.success and f"serves ['some-other-model'], not '{PLANNER_MODEL}'" in unserved.message


def test_an_interrupted_action_with_side_effects_needs_a_replan_and_success_is_the_inventory_delta(state) -> None:
    import random

    from mcu_arms.contracts.trajectory import CandidateAction
    from mcu_arms.purple.planned.action_runner import ActionRunner

    action_runner = ActionRunner(state.capabilities, random.Random(0))
    rich = state.model_copy(update={"inventory": {"wood": 3}})
    place = action_runner.start(
        CandidateAction(id="place_table", skill="place", target="table", description="d"), rich, 0
    )
    assert isinstance(place.next(rich), str)  # it acted: its effect may or may not have happened
    assert place.interrupt(rich).status == "action_needs_replan"
    claimed = place.next(rich)  # "placed", says its own step; the state shows no wood spent and no table
    assert claimed.status == "failed" and claimed.inventory_delta == {}
    walk = action_runner.start(CandidateAction(id="explore", skill="explore", description="d"), state, 0)
    assert isinstance(walk.next(state), str)
    assert walk.interrupt(state).status == "interrupted", "a resumable action is offered again, not replayed"


def test_a_creeper_is_fled_beyond_its_blast_never_fought_and_gear_and_food_are_offered(state) -> None:
    """The embedded simulator cannot host a creeper (Crafter's creatures are zombies, skeletons, cows and plants), so
    the encounter is a state with one added; tests/test_mineflayer_e2e.py meets a real one on a Minecraft server."""
    import random

    from mcu_arms.contracts.game_state import Entity, Offset, Position
    from mcu_arms.purple.planned.action_runner import ActionRunner
    from mcu_arms.purple.planned.running import BLAST_RADIUS
    from mcu_arms.purple.planned.skills import request_for

    action_runner = ActionRunner(state.capabilities, random.Random(0))
    creeper = Entity(kind="creeper", offset=Offset(east=0, south=5), distance=5, hostile=True)
    zombie = Entity(kind="zombie", offset=Offset(east=3, south=0), distance=3, hostile=True)
    near = state.model_copy(update={"entities": [zombie, creeper], "home": Offset(east=-6, south=2)})
    assert action_runner.threatened(near.model_copy(update={"entities": [creeper]})), "5 steps away: inside its blast"
    offered = [c.id for c in action_runner.threat(near)]
    assert offered[:2] == ["flee", "go_home"] and "fight_creeper" not in offered and "fight_zombie" in offered
    by_the_creeper = near.model_copy(update={"home": Offset(east=1, south=4)})  # home inside the creeper's blast
    assert [c.id for c in action_runner.threat(by_the_creeper)][:1] == ["flee"]
    assert "go_home" not in [c.id for c in action_runner.threat(by_the_creeper)], "home beside a creeper is no refuge"
    far = creeper.model_copy(update={"offset": Offset(east=0, south=BLAST_RADIUS + 1), "distance": BLAST_RADIUS + 1})
    assert not action_runner.threatened(near.model_copy(update={"entities": [far]}))
    flee = next(c for c in action_runner.threat(near) if c.id == "flee")
    minecraft = near.model_copy(update={"position": Position(x=0.0, y=64.0, z=0.0)})
    request, _ = request_for(action_runner, flee, minecraft)
    assert request.kind == "retreat" and request.args["from"] == "creeper" and request.args["distance"] > BLAST_RADIUS
    home = next(c for c in action_runner.threat(near) if c.id == "go_home")
    request, _ = request_for(action_runner, home, minecraft)
    assert (request.kind, request.args["x"], request.args["z"]) == ("go_to", -6.0, 2.0)
    hungry = state.model_copy(
        update={
            "vitals": state.vitals.model_copy(update={"food": state.vitals.food.model_copy(update={"value": 6.0})}),
            "entities": [Entity(kind="cow", offset=Offset(east=2, south=0), distance=2, hostile=False)],
        }
    )
    assert [c.id for c in action_runner.survival(hungry)] == ["eat_cow"], (
        "the food stock: topped up while a cow is near"
    )
    armed = state.model_copy(update={"inventory": {"shield": 1, "iron_helmet": 1}, "equipment": {"hand": "stick"}})
    assert [c.id for c in action_runner.survival(armed)] == ["equip_iron_helmet", "equip_shield"]
    worn = armed.model_copy(update={"equipment": {"off-hand": "shield", "head": "iron_helmet"}})
    assert action_runner.survival(worn) == []


def test_the_reflex_takes_the_player_home_on_the_embedded_simulator(tmp_path: Path) -> None:
    """A zombie summoned beside a player who has walked away from its spawn: when it hurts, the threat loop offers
    going home, and the (stand-in) policy that prefers it takes the player back towards the spawn."""
    from planned_stubs import home_first

    from mcu_arms.contracts.crafter_keymap import env_action_for

    planner, kev = StubPlanner([]), StubDecisionService([], late_s=0, then=home_first)
    task = load_task(TASKS_ROOT / "combat" / "combat_zombies.yaml")

    async def play() -> None:
        with planner.serving() as planner_url, kev.serving() as kev_url:
            policy = PlannedPolicy(_options(tmp_path, planner_url, kev_url))
            assert (await policy.init(InitPayload(prompt="", text=task.text, world_seed=0))).success
            sim = EmbeddedSimulator()
            sim.set_frames(False)
            sim.reset(task, 0)
            for _ in range(4):
                sim.step(env_action_for("move_left"))
            for step in range(120):
                answer = await policy.act(ObservationPayload(step=step, obs="", state=sim.state()))
                sim.step(answer.action)
                await asyncio.sleep(0.002)
            await policy.close()

    asyncio.run(play())
    records = read_trajectory(tmp_path / "task_01" / TRAJECTORY_FILE)
    assert any(r.reflex is not None for r in records), "the zombie never hurt the player"
    home = [r for r in records if r.selected_action == "go_home"]
    assert home and home[0].phase == "threat", [r.selected_action for r in records]
    before, after = home[0].state.home, home[0].next_state.home
    assert abs(after.east) + abs(after.south) < abs(before.east) + abs(before.south), "it went towards home"
    assert all(r.world_seed == 0 for r in records)
