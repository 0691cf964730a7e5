"""A planned arm on the mineflayer backend, end to end: `mcu-arms run` starts the green, the purple and the client;
the green's sidecar plays MCU's collect_wood on a real Minecraft-protocol server (flying-squid from npm, with
trees); the planner and the decision service are the stand-ins of tests/planned_stubs.py (the decision service goes
home whenever it is offered). Mid-run the test gives the bot a shield, then hurts it below half health on the
server's console: the damage must reach the agent's reflex and the shield (put in the off-hand by the executor) go
up; while the bot rests, a zombie appears beside it, and the threat loop must take it home; while it rests at home,
a creeper: the bot must get away from it, never attack it (the fixture's creatures stand still: flying-squid has no
mob AI). The
planner is asked with thinking off, and the agent's decisions reach the server's chat tagged by source. Skipped,
saying why, when npm cannot install the server or the sidecar here."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import psutil
import pytest
from minecraft_server import MinecraftServer, runtime
from planned_stubs import PLANNER_MODEL, POLICY_MODEL, POLICY_REVISION, StubDecisionService, StubPlanner, home_first
from run_helpers import Started, report, steps_logged, wait_for

from mcu_arms.contracts.trajectory import TRAJECTORY_FILE, TrajectoryRecord, read_trajectory
from mcu_arms.green.sims.mineflayer.runtime import SIDECAR_SCRIPT

BOT = "planned_bot"
STEPS = 16
HURT = 12  # health 20 -> 8: below half, so the agent rests (flying-squid never regenerates it)
LOGS = {"goal": "oak logs", "steps": [{"subgoal": "chop oak logs", "method": "collect", "item": "oak_log", "count": 2}]}
MORE_LOGS = {
    "goal": "more oak logs",
    "steps": [{"subgoal": "chop more", "method": "collect", "item": "oak_log", "count": 4}],
}
ARM = f"""agent = "planned"
task = "mining_and_collecting"
tasks = ["collect_wood"]
simulator = "mineflayer"
observe = "state"
steps = {STEPS}
step_timeout = 120
save_frames = false

[mineflayer]
port = {{port}}
username = "{BOT}"
chat = true

[planner]
base_url = "{{planner}}/v1"
model = "{PLANNER_MODEL}"
timeout = 30
thinking = false

[policy]
backend = "decision_service"
base_url = "{{policy}}"
model = "{POLICY_MODEL}"
revision = "{POLICY_REVISION}"
timeout = 10

[ports]
green = "auto"
purple = "auto"
"""


def _decided(trajectory: Path, *actions: str) -> bool:
    """The agent's own log shows one of these actions ended (the test waits on it before the next scene)."""
    try:
        lines = trajectory.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(json.loads(line)["selected_action"] in actions for line in lines)


def _count(trajectory: Path, action: str) -> int:
    return sum(json.loads(line)["selected_action"] == action for line in trajectory.read_text().splitlines())


def _sidecars() -> list[int]:
    """Running sidecars of this checkout (to prove none is left behind; nothing here signals them)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if str(SIDECAR_SCRIPT) in (process.info["cmdline"] or []):
            found.append(process.pid)
    return found


@pytest.mark.slow
def test_a_planned_arm_collects_oak_logs_on_a_minecraft_server_and_feels_the_damage(tmp_path: Path) -> None:
    found = runtime()
    if isinstance(found, str):
        pytest.skip(found)
    project, state = tmp_path / "project", tmp_path / "state"
    (project / "arms").mkdir(parents=True)
    planner, kev = StubPlanner([LOGS], next_plan=MORE_LOGS), StubDecisionService([], late_s=0, then=home_first)
    trajectory = project / "output" / "mined" / "episode_001" / "purple" / "task_01" / TRAJECTORY_FILE
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(MinecraftServer(found, tmp_path / "server.log"))
        planner_url, kev_url = stack.enter_context(planner.serving()), stack.enter_context(kev.serving())
        (project / "arms" / "mined.toml").write_text(ARM.format(port=server.port, planner=planner_url, policy=kev_url))
        run = Started(project, state, "run", "--arm", "mined")
        stack.callback(run.kill_if_running)
        wait_for(lambda: steps_logged(project, "mined") >= 1 or run.popen.poll() is not None, "the first skill", 300)
        run.remember_family()
        server.command(f"give {BOT} shield 1")
        wait_for(lambda: _decided(trajectory, "equip_shield") or run.popen.poll() is not None, "the shield put on", 300)
        server.command(f"damage {BOT} {HURT}")  # below half health: the agent waits to recover, standing still
        wait_for(lambda: _decided(trajectory, "wait") or run.popen.poll() is not None, "resting", 300)
        server.command(f"spawnmob {BOT} zombie 1 1")
        wait_for(lambda: _decided(trajectory, "go_home") or run.popen.poll() is not None, "going home", 300)
        wait_for(lambda: _count(trajectory, "wait") >= 2 or run.popen.poll() is not None, "resting at home", 300)
        server.command(f"spawnmob {BOT} creeper 0 2")
        code = run.wait(timeout=600)
    assert code == 0, run.output

    result = report(project, "mined")
    assert result["status"] == "finished" and result["steps_run"] == STEPS, result
    assert "Minecraft 1.21.1" in result["simulator_label"]
    reached = {milestone["identity"]: milestone["step"] for milestone in result["milestones"]}
    assert reached["collect_oak_log"] is not None and result["sim_score"] >= 2, "pickups of oak_log counted and paid"
    assert result["behaviour"].get("init_command_refused") == 1, "flying-squid has no /execute: counted, not hidden"

    records = read_trajectory(trajectory)
    for line in trajectory.read_text().splitlines():
        assert set(json.loads(line)) == set(TrajectoryRecord.model_fields), (
            "the same fields as on the embedded simulator"
        )
    collected = [r for r in records if r.selected_action == "collect_oak_log" and r.action_status == "succeeded"]
    assert collected and all(r.result.inventory_delta.get("oak_log", 0) > 0 for r in collected), "judged by the delta"
    hurt = [r for r in records if r.reflex is not None]
    assert hurt and hurt[0].reflex.health_before - hurt[0].reflex.health_after == HURT, "the damage reached the reflex"
    assert hurt[0].reflex.observed_step == hurt[0].reflex.interrupted_step == hurt[0].end_step
    assert all(r.world_seed == server.ready["seed"] for r in records), "the server's world seed, not the arm's"

    equipped = next(r for r in records if r.selected_action == "equip_shield")
    assert equipped.action_status == "succeeded" and equipped.next_state.equipment["off-hand"] == "shield"
    raised = [r for r in server.reports if r.get("event") == "use_item" and r.get("username") == BOT]
    assert raised and raised[0]["hand"] == "off", "the reflex raised the shield held in the off-hand"
    home = [r for r in records if r.selected_action == "go_home"]
    assert home[0].phase == "threat" and home[0].action_status == "succeeded", home[0].result
    assert abs(home[0].next_state.home.east) + abs(home[0].next_state.home.south) <= 3, "it got home"

    near_creeper = [r for r in records if any(e.kind == "creeper" and e.distance <= 7 for e in r.state.entities or [])]
    assert near_creeper, "the creeper was seen"
    assert all(c.id != "fight_creeper" for r in records for c in r.available_actions), "a creeper is never fought"
    assert near_creeper[0].phase == "threat" and near_creeper[0].selected_action in ("flee", "go_home")
    away = [r for r in records if r.step >= near_creeper[0].step and r.selected_action in ("flee", "go_home")]
    assert any(not any(e.kind == "creeper" and e.distance <= 7 for e in r.next_state.entities or []) for r in away), (
        "it got beyond the creeper's blast"
    )

    assert planner.requests and all(
        body.get("chat_template_kwargs") == {"enable_thinking": False} for body in planner.requests
    ), "thinking off in every planner request"
    chat = [r["message"] for r in server.reports if r.get("event") == "chat" and r.get("username") == BOT]
    for tag in ("[planner] plan: collect oak_log 2", "[policy] plan: collect_oak_log", "[reflex] health 20 -> 8"):
        assert any(line.startswith(tag) for line in chat), (tag, chat)

    steps = [
        json.loads(line)
        for line in next((project / "output" / "mined" / "episode_001" / "green").glob("*/steps.jsonl"))
        .read_text()
        .splitlines()
    ]
    assert steps[0]["skill"]["kind"] == "collect" and steps[0]["skill_outcome"]["kind"] == "collect"
    attacked = [s["skill"]["args"] for s in steps if s.get("skill") and s["skill"]["kind"] == "attack"]
    assert all(args.get("entity") != "creeper" for args in attacked), attacked
    assert run.family and not [p.pid for p in run.family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert _sidecars() == [], "the green stopped its sidecar"
