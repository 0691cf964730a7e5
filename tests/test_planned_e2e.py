"""The planned agent end to end: `mcu-arms run` starts a real green, purple and client per arm on the embedded
simulator; the planner and the decision service are stand-ins served by this test on loopback, with scripted bad
answers (unparseable and invalid plans, an unknown item, a late re-plan, a re-plan that changes a count, decisions
that do not sum, choose a non-candidate or miss one, and one that comes after the timeout)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from planned_stubs import (
    GOOD_PLAN,
    LATE,
    PLANNER_MODEL,
    POLICY_MODEL,
    POLICY_REVISION,
    UNKNOWN_ITEM_PLAN,
    StubDecisionService,
    StubPlanner,
    bad_sum,
    missing_one,
    not_a_candidate,
    reworded,
)
from run_helpers import report, run_cli

pytest.importorskip("crafter")

from mcu_arms.contracts.trajectory import TRAJECTORY_FILE, TrajectoryRecord, read_trajectory

STEPS = 300
POLICY_TIMEOUT_S = 3.0  # generous on a loaded host: only the scripted late answer may miss it
ARM = """agent = "planned"
task = "{task}"
tasks = ["{only}"]
simulator = "embedded"
observe = "state"
seed = 0
steps = {steps}
step_timeout = 30
save_frames = false

[planner]
base_url = "{planner}/v1"
model = "{planner_model}"
revision = "stub-1"
timeout = 20
thinking = false

[policy]
backend = "decision_service"
base_url = "{policy}"
model = "{policy_model}"
revision = "{revision}"
timeout = {policy_timeout}

[ports]
green = "auto"
purple = "auto"
"""


def _write_arm(project: Path, name: str, task: str, steps: int, planner: str, policy: str) -> None:
    (project / "arms").mkdir(parents=True, exist_ok=True)
    category, only = task.split("/")
    (project / "arms" / f"{name}.toml").write_text(
        ARM.format(
            task=category,
            only=only,
            steps=steps,
            planner=planner,
            policy=policy,
            planner_model=PLANNER_MODEL,
            policy_model=POLICY_MODEL,
            revision=POLICY_REVISION,
            policy_timeout=POLICY_TIMEOUT_S,
        )
    )


def _trajectory(project: Path, arm: str) -> Path:
    return project / "output" / arm / "episode_001" / "purple" / "task_01" / TRAJECTORY_FILE


def _passed_the_table(path: Path) -> bool:
    """True once the agent's own log shows the table placed: the step the first re-plan was asked for has passed."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any('"selected_action":"place_table"' in line and '"action_status":"succeeded"' in line for line in lines)


@pytest.mark.slow
def test_planned_arms_reach_their_milestones_count_every_bad_answer_and_log_every_field(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    diamond_trajectory = _trajectory(project, "planned_diamond")
    planner = StubPlanner(
        ["Sure! First, gather some wood.", UNKNOWN_ITEM_PLAN],
        replan=lambda index, contract: reworded(GOOD_PLAN, contract, change_count=index == 1),
        hold_replan=lambda index: (lambda: _passed_the_table(diamond_trajectory)) if index == 0 else None,
    )
    kev = StubDecisionService([bad_sum, LATE, not_a_candidate, missing_one], late_s=POLICY_TIMEOUT_S + 2)
    combat_planner, combat_kev = StubPlanner([]), StubDecisionService([], late_s=0)
    with contextlib.ExitStack() as servers:
        planner_url, kev_url = servers.enter_context(planner.serving()), servers.enter_context(kev.serving())
        combat_urls = servers.enter_context(combat_planner.serving()), servers.enter_context(combat_kev.serving())
        _write_arm(
            project,
            "planned_diamond",
            "mine_diamond_from_scratch/mine_diamond_from_scratch",
            STEPS,
            planner_url,
            kev_url,
        )
        _write_arm(project, "planned_combat", "combat/combat_zombies", 80, *combat_urls)
        done = run_cli(project, state, "run", "--arm", "planned_diamond", "--arm", "planned_combat", timeout=480)
    assert done.returncode == 0, done.stdout + done.stderr

    diamond = report(project, "planned_diamond")
    assert diamond["status"] == "finished" and diamond["steps_run"] == STEPS
    reached = {m["identity"]: m["step"] for m in diamond["milestones"]}
    assert reached["crafting_table"] is not None and reached["wooden_pickaxe"] is not None, reached
    assert reached["crafting_table"] < reached["wooden_pickaxe"] < STEPS
    assert diamond["noops"] == {}, "every step got an action in time"

    agent = diamond["agent"]
    assert agent["kind"] == "planned" and agent["report_file"] == "planned_report.json"
    invalid = agent["invalid_outputs_by_kind"]
    assert invalid["invalid_plan"] == 2, "the unparseable answer and the unknown item"
    assert invalid["invalid_policy_output"] == kev.invalid_given == 3
    assert kev.late_given == 1 and agent["failed_turns_by_reason"] == {"policy_timeout": 1}
    assert planner.released_late == [0], "the first re-plan was held until its step had passed"
    # It was discarded as stale; the one that changed a count was rejected, or discarded too had its step passed.
    assert agent["stale_replans"] >= 1 and invalid.get("invalid_replan", 0) + agent["stale_replans"] >= 2
    assert agent["invalid_outputs"] == sum(invalid.values())
    assert agent["median_planner_ms"] is not None and agent["median_decision_ms"] is not None
    assert any("invalid_policy_output" in alert for alert in diamond["alerts"]), "bad answers are raised as alerts"

    records = read_trajectory(diamond_trajectory)
    assert records and all(r.planner.model == PLANNER_MODEL and r.policy.revision == POLICY_REVISION for r in records)
    assert all(r.world_seed == 0 for r in records), "the embedded world is the arm's seed's"
    assert planner.requests and all(
        body.get("chat_template_kwargs") == {"enable_thinking": False} for body in planner.requests
    ), "thinking off in every planner request"
    fallbacks = [r for r in records if r.invalid_output is not None]
    assert len(fallbacks) == kev.invalid_given and all(r.decision_source == "fallback" for r in fallbacks)
    assert any(
        r.subgoal is not None and r.subgoal.item == "wood_pickaxe" and r.action_status == "succeeded" for r in records
    )
    assert records[0].planner_latency_ms is not None, "the opening plan's latency is on the first line"
    accepted = {(s["method"], s["item"], s["count"]) for s in GOOD_PLAN["steps"]}
    aliases = {"oak_log": "wood", "crafting_table": "table", "wooden_pickaxe": "wood_pickaxe"}
    accepted = {(method, aliases.get(item, item), count) for method, item, count in accepted}
    assert {r.subgoal.contract() for r in records if r.subgoal is not None} <= accepted, "no re-plan changed a step"
    for arm in ("planned_diamond", "planned_combat"):
        for line in _trajectory(project, arm).read_text().splitlines():
            assert set(json.loads(line)) == set(TrajectoryRecord.model_fields), "every field on every line"

    combat = report(project, "planned_combat")
    assert combat["status"] == "finished"
    combat_records = read_trajectory(_trajectory(project, "planned_combat"))
    hits = [r for r in combat_records if r.reflex is not None]
    assert hits, "the summoned zombie never hurt the player"
    assert all(r.reflex.observed_step == r.reflex.interrupted_step == r.end_step for r in hits)
    assert combat["agent"]["reflex_interrupts"] == len(hits)

    compared = run_cli(project, state, "compare", "planned_diamond", "planned_combat", "--json")
    rows = json.loads(compared.stdout)
    (diamond_arm, combat_arm) = rows["arms"]
    assert (
        diamond_arm["latest"]["decisions"] > 0 and diamond_arm["latest"]["invalid_outputs"] == agent["invalid_outputs"]
    )
    assert combat_arm["latest"]["reflex_interrupts"] == len(hits)
    markdown = run_cli(project, state, "compare", "planned_diamond", "planned_combat", "--markdown").stdout
    assert "| decision ms (median) |" in markdown and "invalid_policy_output=3" in markdown
    assert "policy_timeout=1" in markdown, "the model failure shown by name"
