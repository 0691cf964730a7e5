"""`mcu-arms plan`: resolution, overrides, fingerprints, collisions, dry-run touching nothing, light imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import SHIPPED_ARMS, invoke, with_shipped_arms

REPO = Path(__file__).resolve().parents[1]

EMBEDDED_ARM = """\
agent = "random"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = 100

[ports]
green = {green}
purple = {purple}
"""


def write_arm(project: Path, name: str, text: str) -> Path:
    path = project / "arms" / f"{name}.toml"
    path.write_text(text)
    return path


def plan_json(project: Path, env: dict[str, str], *args: str) -> dict:
    outcome = invoke(project, env, "plan", "--json", *args)
    assert outcome.exit_code == 0, outcome.err
    return json.loads(outcome.out)


def test_seed_arms_dry_run_prints_three_plans(env):
    outcome = invoke(
        REPO, env, "plan", "--dry-run", "--verbose", "arms/dm_pl.toml", "arms/dm_wm.toml", "arms/dm_wmc.toml"
    )
    assert outcome.exit_code == 0, outcome.err
    for arm in ("dm_pl", "dm_wm", "dm_wmc"):
        assert f"arm {arm}" in outcome.out
    assert "model_auto_compact" not in outcome.out  # the limit is stated in words and numbers, not flags
    assert "summarised at 206400 tokens" in outcome.out  # dm_wmc compacts below the window
    assert "dropped before its next turn" in outcome.out  # dm_pl/dm_wm do not
    assert "session_turns 12" in outcome.out  # the payload warning
    assert "dry run: nothing was created" in outcome.out


def test_plan_with_no_arm_named_plans_every_arm_in_arms_and_run_refuses(tmp_path, env):
    project = with_shipped_arms(tmp_path)  # the shipped arms, never the user's own arms/
    outcome = invoke(project, env, "plan", "--dry-run")
    assert outcome.exit_code == 0, outcome.err
    arms = sorted(SHIPPED_ARMS)
    assert len(arms) >= 5
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]] for line in outcome.out.splitlines() if line.startswith("│")
    ]
    assert [row[0] for row in rows] == arms, "summary first: one line per arm"
    assert {row[7] for row in rows} <= {"ready", "endpoints down", "cannot run here"}, rows
    assert "arm demo (" not in outcome.out and "--verbose" in outcome.out, "each plan whole only when asked"
    assert len(outcome.out.splitlines()) < 40
    verbose = invoke(project, env, "plan", "--dry-run", "--verbose").out
    assert verbose.index("│ demo ") < verbose.index("arm demo (")
    for arm in arms:
        assert f"arm {arm} (" in verbose
    planned = plan_json(project, env, "--dry-run")["plans"]
    assert [plan["arm"] for plan in planned] == arms

    refused = invoke(project, env, "run", "--dry-run")
    assert refused.exit_code == 2
    assert "name at least one arm" in refused.err and f"allowed: {', '.join(arms)}" in refused.err


def test_plan_with_no_arm_named_and_an_empty_arms_dir_says_how_to_make_one(project, env):
    outcome = invoke(project, env, "plan", "--dry-run")
    assert outcome.exit_code == 2
    assert "no arm files in" in outcome.err and "mcu-arms new NAME" in outcome.err


def test_plan_contents(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    plan = plan_json(project, env, "--dry-run", "--arm", "a")["plans"][0]
    roles = [p["role"] for p in plan["processes"]]
    assert roles == ["green", "purple", "client"]
    purple = plan["processes"][1]
    assert "--port" in purple["argv"] and "9202" in purple["argv"]
    assert plan["episode_dir"].endswith("output/a/episode_001")
    assert plan["links"][str(project / "logs" / "a_green.log")].endswith("episode_001/logs/green.log")
    assert plan["settings"]["steps"] == 100
    assert plan["compaction"]["limit"] > plan["compaction"]["context_window"]
    assert plan["fingerprint"].startswith("v2:")


def test_next_episode_never_reuses_an_existing_dir(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    (project / "output" / "a" / "episode_001").mkdir(parents=True)
    (project / "output" / "a" / "episode_004").mkdir()
    plan = plan_json(project, env, "--dry-run", "--arm", "a")["plans"][0]
    assert plan["episode_dir"].endswith("episode_005")


def test_standard_category_steps_are_capped_and_said(project, env):
    write_arm(
        project,
        "c",
        EMBEDDED_ARM.format(green=9201, purple=9202)
        .replace("mine_diamond_from_scratch", "crafting")
        .replace("steps = 100", "steps = 5000"),
    )
    plan = plan_json(project, env, "--dry-run", "--arm", "c")["plans"][0]
    assert plan["settings"]["steps"] == 1200
    assert any("capped at 1200" in w for w in plan["warnings"])


def test_defaults_follow_the_category(project, env):
    text = EMBEDDED_ARM.format(green=9201, purple=9202).replace("steps = 100\n", "")
    write_arm(project, "long", text)
    write_arm(
        project,
        "short",
        text.replace("mine_diamond_from_scratch", "combat").replace("9201", "9211").replace("9202", "9212"),
    )
    plans = {p["arm"]: p for p in plan_json(project, env, "--dry-run", "--arm", "long", "--arm", "short")["plans"]}
    assert plans["long"]["settings"]["steps"] == 12000
    assert plans["short"]["settings"]["steps"] == 1200


def test_overrides_are_applied_and_marked(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    data = plan_json(
        project, env, "--dry-run", "--arm", "a", "--steps", "50", "--step-timeout", "9", "--green-port", "9301"
    )
    plan = data["plans"][0]
    assert plan["settings"]["steps"] == 50 and plan["settings"]["step_timeout"] == 9
    assert plan["green_port"] == 9301
    assert plan["overrides"] == {"steps": 50, "step_timeout": 9.0, "green_port": 9301}
    text = invoke(project, env, "plan", "--dry-run", "--verbose", "--arm", "a", "--steps", "50").out
    assert "50 (override)" in text


def test_override_session_turns_zero_is_refused(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", "--session-turns", "0")
    assert outcome.exit_code == 2
    assert "--session-turns" in outcome.err and "0.4 MB" in outcome.err


def test_fingerprint_ignores_name_and_ports_but_not_steps(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    write_arm(project, "b", EMBEDDED_ARM.format(green=9301, purple='"auto"'))
    write_arm(project, "c", EMBEDDED_ARM.format(green=9401, purple=9402).replace("steps = 100", "steps = 101"))
    plans = {
        p["arm"]: p for p in plan_json(project, env, "--dry-run", "--arm", "a", "--arm", "b", "--arm", "c")["plans"]
    }
    assert plans["a"]["fingerprint"] == plans["b"]["fingerprint"]
    assert plans["a"]["fingerprint"] != plans["c"]["fingerprint"]
    again = plan_json(project, env, "--dry-run", "--arm", "a")["plans"][0]
    assert again["fingerprint"] == plans["a"]["fingerprint"]


def test_two_arms_with_the_same_port_collide(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    write_arm(project, "b", EMBEDDED_ARM.format(green=9202, purple=9203))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", "--arm", "b")
    assert outcome.exit_code == 2
    assert "b.toml:7: key 'ports.green'" in outcome.err
    assert "port 9202" in outcome.err and "arm 'a'" in outcome.err


def test_one_port_for_both_servers_of_an_arm_is_refused_at_plan(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9201))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a")
    assert outcome.exit_code == 2 and "a.toml:8: key 'ports.purple'" in outcome.err and "port 9201" in outcome.err
    write_arm(project, "b", EMBEDDED_ARM.format(green='"auto"', purple='"auto"'))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "b", "--green-port", "9400", "--purple-port", "9400")
    assert outcome.exit_code == 2 and "flag '--purple-port'" in outcome.err and "port 9400" in outcome.err
    write_arm(project, "c", EMBEDDED_ARM.format(green=9500, purple='"auto"'))
    write_arm(project, "d", EMBEDDED_ARM.format(green='"auto"', purple=9500))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "c", "--arm", "d")
    assert outcome.exit_code == 2 and "d.toml:8: key 'ports.purple'" in outcome.err and "arm 'c'" in outcome.err


def test_two_arms_with_the_same_name_collide(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    write_arm(project, "b", 'name = "a"\n' + EMBEDDED_ARM.format(green=9301, purple=9302))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", "--arm", "b")
    assert outcome.exit_code == 2 and "same arm name 'a'" in outcome.err
    assert "a.toml and " in outcome.err and "b.toml share" in outcome.err


def test_auto_ports_are_distinct(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green='"auto"', purple='"auto"'))
    plan = plan_json(project, env, "--dry-run", "--arm", "a")["plans"][0]
    assert plan["green_port"] != plan["purple_port"]
    assert plan["ports_auto"] == ["green", "purple"]


def test_unknown_arm_name_lists_known_ones(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "zzz")
    assert outcome.exit_code == 2 and "no arm named 'zzz'" in outcome.err and "allowed: a" in outcome.err


def test_secrets_in_env_are_redacted(project, env):
    write_arm(
        project, "a", EMBEDDED_ARM.format(green=9201, purple=9202) + '\n[env]\nMY_API_KEY = "sk-secret"\nLEVEL = "3"\n'
    )
    outcome = invoke(project, env, "plan", "--dry-run", "--json", "--arm", "a")
    assert "sk-secret" not in outcome.out
    purple = json.loads(outcome.out)["plans"][0]["processes"][1]
    assert purple["env"]["LEVEL"] == "3"
    assert purple["env"]["MY_API_KEY"].startswith("***") and len(purple["env"]["MY_API_KEY"]) == 9
    assert "sk-secret" not in invoke(project, env, "plan", "--dry-run", "--arm", "a").out


def test_redaction_is_stable_and_idempotent():
    from mcu_arms.contracts.redaction import redact

    once = redact("OPENAI_API_KEY", "sk-one")
    assert once.startswith("***") and "sk-one" not in once
    assert redact("OPENAI_API_KEY", once) == once
    assert redact("OPENAI_API_KEY", "sk-two") != once
    assert redact("LEVEL", "3") == "3"


def snapshot(*roots: Path) -> dict[str, float]:
    files = {}
    for root in roots:
        if root.exists():
            for path in root.rglob("*"):
                files[str(path)] = path.lstat().st_mtime
    return files


def test_dry_run_touches_nothing(project, env):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    write_arm(project, "w", EMBEDDED_ARM.format(green=9301, purple=9302).replace('"random"', '"worldmodel"'))
    state, codex = Path(env["MCU_ARMS_STATE_DIR"]), Path(env["MCU_CODEX_ROOT"])
    before = snapshot(project)
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", "--arm", "w")
    assert outcome.exit_code == 0, outcome.err
    assert snapshot(project) == before
    assert not state.exists() and not codex.exists()


def test_plan_without_dry_run_prepares_the_host_and_leaves_no_episode(project, env):
    Path(env["MCU_CODEX_AUTH"]).write_text("{}")
    write_arm(project, "w", EMBEDDED_ARM.format(green='"auto"', purple='"auto"').replace('"random"', '"worldmodel"'))
    outcome = invoke(project, env, "plan", "--arm", "w")
    assert outcome.exit_code == 0, outcome.err
    assert "`mcu-arms run` creates the episode" in outcome.out
    home = Path(env["MCU_CODEX_ROOT"]) / "w"
    assert (home / "auth.json").is_symlink()
    assert not (project / "output").exists(), "only `run` makes episode directories"
    assert invoke(project, env, "plan", "--arm", "w").exit_code == 0


LIGHT_COMMANDS = [
    ["plan", "--dry-run", "arms/dm_pl.toml", "arms/dm_wm.toml", "arms/dm_wmc.toml", "arms/demo.toml"],
    ["status"],
    ["tasks"],
    ["doctor", "arms/demo.toml"],
    ["compare", "arms/demo.toml", "arms/demo_random.toml"],
    ["new", "--help"],
]


@pytest.mark.parametrize("args", LIGHT_COMMANDS, ids=lambda args: args[0])
def test_light_commands_do_not_import_the_heavy_stack(tmp_path, env, args):
    project = with_shipped_arms(tmp_path / "project")
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from mcu_arms.cli import app\n"
        f"result = CliRunner().invoke(app, {args!r})\n"
        "assert result.exit_code in (0, 1), result.output\n"
        "heavy = ('a2a', 'openai', 'numpy', 'crafter', 'minestudio', 'httpx', 'matplotlib', 'PIL')\n"
        "print('HEAVY=' + ','.join(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY=\n" in done.stdout


def test_unknown_task_is_refused_with_its_line_and_the_valid_ones(project, env):
    text = EMBEDDED_ARM.format(green=9201, purple=9202).replace("steps = 100", 'tasks = ["craft_rocket"]\nsteps = 100')
    text = text.replace("mine_diamond_from_scratch", "crafting")
    write_arm(project, "a", text)
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a")
    assert outcome.exit_code == 2
    assert "a.toml:4" in outcome.err and "'tasks'" in outcome.err and "craft_rocket" in outcome.err
    assert "craft_furnace" in outcome.err  # the valid ones are listed


def test_embedded_refuses_a_named_task_without_an_analogue_before_anything_starts(project, env):
    text = EMBEDDED_ARM.format(green=9201, purple=9202).replace("mine_diamond_from_scratch", "crafting")
    write_arm(project, "a", text.replace("steps = 100", 'tasks = ["craft_ladder"]'))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a")
    assert outcome.exit_code == 2 and "craft_ladder" in outcome.err and "needs minestudio" in outcome.err


def test_embedded_warns_about_skipped_tasks_and_unreachable_milestones(project, env):
    write_arm(
        project, "craft", EMBEDDED_ARM.format(green=9201, purple=9202).replace("mine_diamond_from_scratch", "crafting")
    )
    write_arm(project, "dia", EMBEDDED_ARM.format(green=9301, purple=9302))
    plans = {p["arm"]: p for p in plan_json(project, env, "--dry-run", "--arm", "craft", "--arm", "dia")["plans"]}
    assert any("will be skipped" in w and "craft_ladder" in w for w in plans["craft"]["warnings"])
    assert any("iron_ingot has no Crafter analogue" in note for note in plans["dia"]["notes"])
    assert not any("iron_ingot" in warning for warning in plans["dia"]["warnings"]), "a fixed fact is no warning"


def test_an_override_that_breaks_a_rule_names_the_flag(project, env):
    text = EMBEDDED_ARM.format(green=9201, purple=9202).replace("steps = 100", "compact_limit = 600000")
    write_arm(project, "a", text)
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", "--compact")
    assert outcome.exit_code == 2 and "with --compact" in outcome.err and "below context_window" in outcome.err
    assert "a.toml:4: key 'compact_limit'" in outcome.err


@pytest.mark.parametrize(
    ("args", "flag", "said"),
    [
        (["--green-port", "80"], "--green-port", "a port 1024-65535"),
        (["--purple-port", "99999"], "--purple-port", "a port 1024-65535"),
        (["--task", "cooking"], "--task", "mine_diamond_from_scratch"),
        (["--task", "building", "--steps", "5"], "--task", "no Crafter analogue"),
    ],
)
def test_a_bad_override_names_its_flag(project, env, args, flag, said):
    write_arm(project, "a", EMBEDDED_ARM.format(green=9201, purple=9202))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", *args)
    assert outcome.exit_code == 2 and f"flag '{flag}'" in outcome.err and said in outcome.err


def test_a_provider_is_passed_by_variable_name_and_fingerprinted(project, env):
    base = EMBEDDED_ARM.format(green=9201, purple=9202).replace('"random"', '"prolong"')
    write_arm(project, "plain", base)
    provider = base.replace("9201", "9301").replace("9202", "9302") + (
        '\n[codex]\nprovider_base_url = "http://127.0.0.1:8000/v1"\nprovider_wire_api = "responses"\n'
        'provider_env_key = "LOCAL_API_KEY"\nmodel = "local-model"\n'
    )
    write_arm(project, "local", provider)
    plans = {p["arm"]: p for p in plan_json(project, env, "--dry-run", "--arm", "plain", "--arm", "local")["plans"]}
    purple = plans["local"]["processes"][1]
    argv = purple["argv"]
    assert argv[argv.index("--provider-env-key") + 1] == "LOCAL_API_KEY"
    assert "--provider-base-url" not in argv  # a URL can carry a credential: it goes through the environment
    assert purple["env"]["MCU_ARMS_PROVIDER_BASE_URL"] == "http://127.0.0.1:8000/v1"
    assert plans["local"]["fingerprint"] != plans["plain"]["fingerprint"]
    assert not any("[codex] model is unset" in warning for warning in plans["local"]["warnings"])
    write_arm(project, "pasted", provider.replace('"LOCAL_API_KEY"', '"sk-abc-123"'))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "pasted")
    assert outcome.exit_code == 2 and "'codex.provider_env_key'" in outcome.err and "not the key" in outcome.err


def test_a_local_provider_without_a_model_is_warned_about(project, env):
    arm = EMBEDDED_ARM.format(green=9201, purple=9202).replace('"random"', '"worldmodel"')
    write_arm(project, "local", arm + '\n[codex]\nprovider_base_url = "http://127.0.0.1:8000/v1"\n')
    (plan,) = plan_json(project, env, "--dry-run", "--arm", "local")["plans"]
    assert any("[codex] model is unset with a local provider" in warning for warning in plan["warnings"])
    write_arm(project, "hosted", EMBEDDED_ARM.format(green=9301, purple=9302).replace('"random"', '"worldmodel"'))
    (plan,) = plan_json(project, env, "--dry-run", "--arm", "hosted")["plans"]
    assert not any("[codex] model is unset" in warning for warning in plan["warnings"]), "codex's own provider"


def test_the_plan_states_the_limit_codex_applies_and_warns_when_its_cap_moves_it(project, env):
    base = EMBEDDED_ARM.format(green=9201, purple=9202).replace('"random"', '"prolong"')
    write_arm(
        project,
        "c",
        base.replace(
            "steps = 100",
            "steps = 100\ncompact = true\ncontext_window = 100000\ncompact_limit = 95000\nsession_turns = 2",
        ),
    )
    (plan,) = plan_json(project, env, "--dry-run", "--arm", "c")["plans"]
    assert plan["compaction"]["limit"] == 95_000 and plan["compaction"]["codex_compacts_at"] == 90_000
    assert any("codex caps its limit there and compacts at 90000 tokens" in w for w in plan["warnings"])
    argv = plan["processes"][1]["argv"]
    assert argv[argv.index("--context-window") + 1] == "100000" and argv[argv.index("--compact-limit") + 1] == "95000"
    write_arm(project, "n", base.replace("steps = 100", "steps = 100\ncontext_window = 100000"))
    (plan,) = plan_json(project, env, "--dry-run", "--arm", "n")["plans"]
    assert (
        plan["compaction"]["codex_compacts_at"] is None and "reaches 100000 tokens" in plan["compaction"]["explanation"]
    )


def test_env_that_the_isolation_sets_is_refused_not_silently_dropped(project, env):
    arm = EMBEDDED_ARM.format(green=9201, purple=9202).replace('"random"', '"worldmodel"')
    write_arm(project, "w", arm + '\n[env]\nLEVEL = "3"\nCODEX_HOME = "/home/me/.codex"\n')
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "w")
    assert outcome.exit_code == 2
    assert "w.toml:12: key 'env.CODEX_HOME'" in outcome.err and "remove it from [env]" in outcome.err
    write_arm(project, "r", EMBEDDED_ARM.format(green=9301, purple=9302) + '\n[env]\nCODEX_HOME = "/var/tmp/x"\n')
    plan = plan_json(project, env, "--dry-run", "--arm", "r")["plans"][0]
    assert plan["processes"][1]["env"]["CODEX_HOME"] == "/var/tmp/x"  # not a codex agent: nothing overrides it


def test_two_arms_whose_homes_are_one_directory_collide(project, env):
    root = Path(env["MCU_CODEX_ROOT"])
    (root / "a").mkdir(parents=True)
    (root / "b").symlink_to(root / "a", target_is_directory=True)  # b's home is a's, through a link
    base = EMBEDDED_ARM.replace('"random"', '"prolong"')
    write_arm(project, "a", base.format(green=9201, purple=9202))
    write_arm(project, "b", base.format(green=9301, purple=9302))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "a", "--arm", "b")
    assert outcome.exit_code == 2 and "share the same CODEX_HOME" in outcome.err


def _auto_eval_checkout(folder: Path) -> Path:
    (folder / "prompt").mkdir(parents=True)
    (folder / "prompt" / "single_rating_prompt.txt").write_text("test prompt")
    (folder / "criteria_files").mkdir()
    return folder


def test_observation_and_rubric_settings_reach_the_scenario_and_the_fingerprint(project, env, tmp_path):
    """Existing arms keep their fingerprints (the defaults are left out); a setting that changes what the agent
    sees or which rubric grades changes it; the checkout's path does not."""
    write_arm(project, "plain", EMBEDDED_ARM.format(green=9201, purple=9202))
    write_arm(
        project,
        "explicit",
        'obs_size = [128, 128]\nobs_encoding = "png"\n' + EMBEDDED_ARM.format(green=9203, purple=9204),
    )
    upstream = 'obs_size = [640, 360]\nobs_encoding = "jpeg_bgr"\n'
    write_arm(project, "upstream", upstream + EMBEDDED_ARM.format(green=9205, purple=9206))
    one, two = (
        _auto_eval_checkout(tmp_path / "mcu1" / "auto_eval"),
        _auto_eval_checkout(tmp_path / "mcu2" / "auto_eval"),
    )
    write_arm(project, "mcu1", f'auto_eval_dir = "{one}"\n' + EMBEDDED_ARM.format(green=9207, purple=9208))
    write_arm(project, "mcu2", f'auto_eval_dir = "{two}"\n' + EMBEDDED_ARM.format(green=9209, purple=9210))
    names = ["plain", "explicit", "upstream", "mcu1", "mcu2"]
    plans = {p["arm"]: p for p in plan_json(project, env, "--dry-run", *(f"--arm={n}" for n in names))["plans"]}
    prints = {name: plan["fingerprint"] for name, plan in plans.items()}
    assert prints["plain"] == prints["explicit"] != prints["upstream"]
    assert prints["mcu1"] == prints["mcu2"] != prints["plain"]
    assert plans["upstream"]["settings"]["obs_size"] == [640, 360]
    assert plans["mcu1"]["settings"]["auto_eval_dir"] == str(one)

    from mcu_arms.arms.plan import scenario_toml
    from mcu_arms.contracts.settings import ArmPlan

    scenario = scenario_toml(ArmPlan.model_validate(plans["upstream"]))
    assert "obs_size = [640, 360]" in scenario and 'obs_encoding = "jpeg_bgr"' in scenario
    assert "auto_eval_dir" not in scenario
    assert f'auto_eval_dir = "{one}"' in scenario_toml(ArmPlan.model_validate(plans["mcu1"]))


def test_bad_observation_and_rubric_settings_name_their_line(project, env, tmp_path):
    write_arm(project, "s", "obs_size = [640]\n" + EMBEDDED_ARM.format(green=9201, purple=9202))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "s")
    assert outcome.exit_code == 2 and "s.toml:1" in outcome.err and "obs_size" in outcome.err
    write_arm(project, "e", 'obs_encoding = "webp"\n' + EMBEDDED_ARM.format(green=9201, purple=9202))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "e")
    assert outcome.exit_code == 2 and "jpeg_bgr" in outcome.err
    write_arm(project, "r", f'auto_eval_dir = "{tmp_path}"\n' + EMBEDDED_ARM.format(green=9201, purple=9202))
    outcome = invoke(project, env, "plan", "--dry-run", "--arm", "r")
    assert outcome.exit_code == 2 and "r.toml:1" in outcome.err and "single_rating_prompt.txt" in outcome.err


def test_the_shells_auto_eval_dir_never_picks_an_arms_rubric(project, env, tmp_path):
    checkout = _auto_eval_checkout(tmp_path / "auto_eval")
    write_arm(
        project,
        "a",
        'obs_encoding = "jpeg_bgr"\n' + EMBEDDED_ARM.format(green=9201, purple=9202).replace('"random"', '"scripted"'),
    )
    (plan,) = plan_json(project, {**env, "MCU_AUTO_EVAL_DIR": str(checkout)}, "--dry-run", "--arm", "a")["plans"]
    green = next(process for process in plan["processes"] if process["role"] == "green")
    assert green["env"] == {"MCU_AUTO_EVAL_DIR": ""}
    assert any("MCU_AUTO_EVAL_DIR is set here" in warning for warning in plan["warnings"])
    assert any("decodes with Pillow and will see red and blue swapped" in w for w in plan["warnings"])


def test_plan_summary_on_a_narrow_terminal_is_a_whole_line_per_arm(env):
    """At 80 columns the summary table would cut arm names: each arm becomes a plain line instead (wrapped, never
    cut)."""
    from cli_support import make_environment
    from rich.console import Console

    from mcu_arms.arms.campaign import select_arms
    from mcu_arms.arms.plan import plan_specs, resolve_sources
    from mcu_arms.cli.plan import plan_summary
    from mcu_arms.contracts.settings import Overrides

    environment, _, _ = make_environment(REPO, env)
    selection = select_arms(
        resolve_sources([], ["demo", "demo_random"], environment), Overrides(), environment.arms_dir
    )
    plans = plan_specs(selection.specs, Overrides(), environment)
    narrow = Console(width=80, record=True, color_system=None)
    narrow.print(plan_summary(plans, environment.__class__(**{**environment.__dict__, "console": narrow})))
    text = narrow.export_text()
    assert text.startswith("demo: ready (scripted on embedded, mine_diamond_from_scratch, 3000 steps, seed")
    assert "\ndemo_random: ready (random on embedded" in text
    assert all(plan.fingerprint in text.replace("\n", "") for plan in plans), "nothing cut"
