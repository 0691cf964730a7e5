"""Arm files: every kind of bad input is an error naming the file, the line, the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import SHIPPED_ARMS

from mcu_arms.arms.spec import load_arm, parse_arm
from mcu_arms.contracts.errors import UserError

VALID = """\
agent = "noop"
task = "crafting"
simulator = "embedded"

[ports]
green = 9101
purple = "auto"
"""


def error_for(text: str, name: str = "arm.toml") -> str:
    with pytest.raises(UserError) as caught:
        parse_arm(text, Path("arms") / name)
    return caught.value.render()


def test_valid_arm_takes_its_name_from_the_file():
    spec = parse_arm(VALID, Path("arms/my_arm.toml"))
    assert spec.name == "my_arm"
    assert spec.ports.green == 9101 and spec.ports.purple == "auto"
    assert spec.session_turns == 1 and spec.step_timeout == 600


def test_unknown_key_names_line_and_known_keys():
    message = error_for(VALID.replace('task = "crafting"', 'task = "crafting"\ncolour = "red"'))
    assert "arms/arm.toml:3" in message
    assert "'colour'" in message and "unknown key" in message and "session_turns" in message


def test_unknown_key_inside_a_table():
    message = error_for(VALID + "extra = 1\n")
    assert "arms/arm.toml:8" in message and "'ports.extra'" in message and "green, purple, host" in message


def test_wrong_type_names_key_and_allowed():
    message = error_for(VALID.replace('agent = "noop"', "agent = 3"))
    assert "arms/arm.toml:1" in message and "'agent'" in message
    assert "worldmodel, prolong, steve1, scripted, planned, random, noop" in message


def test_the_chat_wire_api_is_refused_naming_the_key_and_why():
    message = error_for(
        VALID + '\n[codex]\nprovider_base_url = "http://127.0.0.1:8000/v1"\nprovider_wire_api = "chat"\n'
    )
    assert "key 'codex.provider_wire_api'" in message and "is no longer supported" in message
    assert "allowed: responses" in message
    assert "allowed: responses" in error_for(VALID + '\n[codex]\nprovider_wire_api = "completions"\n')


def test_unknown_category_lists_the_valid_ones():
    message = error_for(VALID.replace('"crafting"', '"minecraft"'))
    assert "'task'" in message and "mine_diamond_from_scratch" in message and "trapping" in message


def test_bad_port_values():
    message = error_for(VALID.replace("green = 9101", "green = 80"))
    assert "arms/arm.toml:6" in message and "'ports.green'" in message and '"auto"' in message
    message = error_for(VALID.replace("green = 9101", 'green = "9101"'))
    assert "'9101' is not a port" in message


def test_an_arm_without_ports_gets_auto_ports():
    spec = parse_arm('agent = "noop"\ntask = "crafting"\nsimulator = "embedded"\n', Path("arms/arm.toml"))
    assert (spec.ports.green, spec.ports.purple, spec.ports.host) == ("auto", "auto", "127.0.0.1")


def test_an_unknown_key_or_value_says_what_was_probably_meant():
    message = error_for(VALID.replace('simulator = "embedded"', 'simulator = "embedded"\nstepz = 3'))
    assert "'stepz'" in message and "did you mean 'steps'?" in message
    message = error_for(VALID.replace('agent = "noop"', 'agent = "scriptd"'))
    assert "did you mean 'scripted'?" in message
    message = error_for(VALID.replace("[ports]", '[ports]\nhots = "::1"'))
    assert "'ports.hots'" in message and "did you mean 'host'?" in message


def test_session_turns_zero_is_refused_with_the_reason():
    message = error_for(VALID.replace('simulator = "embedded"', 'simulator = "embedded"\nsession_turns = 0'))
    assert "arms/arm.toml:4" in message
    assert "0.4 MB" in message and "600 s" in message


def test_negative_and_zero_numbers():
    assert "'steps'" in error_for(VALID.replace('agent = "noop"', 'agent = "noop"\nsteps = 0'))
    assert "'step_timeout'" in error_for(VALID.replace('agent = "noop"', 'agent = "noop"\nstep_timeout = -1'))
    assert "'seed'" in error_for(VALID.replace('agent = "noop"', 'agent = "noop"\nseed = -5'))


def test_invalid_name():
    message = error_for(VALID.replace('agent = "noop"', 'name = "../escape"\nagent = "noop"'))
    assert "'name'" in message and "letters, digits" in message


def test_embedded_refuses_a_category_without_an_analogue():
    message = error_for(VALID.replace('"crafting"', '"building"'))
    assert 'needs simulator = "minestudio"' in message


def test_scripted_needs_embedded_and_steve1_needs_minestudio():
    assert 'needs simulator = "embedded"' in error_for(
        VALID.replace('"noop"', '"scripted"').replace('"embedded"', '"minestudio"')
    )
    assert 'needs simulator = "minestudio"' in error_for(VALID.replace('"noop"', '"steve1"'))


def test_cuda_device_only_for_steve1():
    message = error_for(VALID.replace('agent = "noop"', 'agent = "noop"\ncuda_device = "0"'))
    assert "arms/arm.toml:2: key 'cuda_device'" in message and 'only for agent = "steve1"' in message


def test_compact_limit_must_match_compact():
    with_compact = VALID.replace('agent = "noop"', 'agent = "noop"\ncompact = true\ncompact_limit = 300000')
    message = error_for(with_compact)
    assert "arms/arm.toml:3: key 'compact_limit'" in message and "below context_window" in message
    without = VALID.replace('agent = "noop"', 'agent = "noop"\ncompact_limit = 1000')
    assert "set compact = true" in error_for(without)


def test_a_rule_between_settings_points_at_the_setting_to_change():
    message = error_for(VALID.replace('"crafting"', '"building"'))
    assert "arms/arm.toml:2: key 'task'" in message


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('compact = "yes"', "compact"),
        ('video_eval = "true"', "video_eval"),
        ('steps = "100"', "steps"),
        ("steps = 100.0", "steps"),
        ('step_timeout = "600"', "step_timeout"),
        ('seed = "3"', "seed"),
        ("context_window = 1e5", "context_window"),
    ],
)
def test_a_value_of_the_wrong_toml_type_is_not_coerced(line: str, key: str):
    message = error_for(VALID.replace('simulator = "embedded"', f'simulator = "embedded"\n{line}'))
    assert f"arms/arm.toml:4: key '{key}'" in message and "allowed:" in message


def test_toml_syntax_error_has_a_line():
    message = error_for(VALID.replace("[ports]", "[ports"))
    assert "arms/arm.toml:5" in message and "not valid TOML" in message


def test_bad_env_names():
    assert "not a valid environment variable name" in error_for(VALID + '\n[env]\n"1BAD" = "x"\n')
    message = error_for(VALID + "\n[env]\nLEVEL = 3\n")
    assert "arms/arm.toml:10: key 'env.LEVEL'" in message and "string values" in message


def test_missing_file(tmp_path: Path):
    with pytest.raises(UserError, match="no such arm file"):
        load_arm(tmp_path / "nope.toml")


def test_shipped_arms_all_load():
    arms = Path(__file__).resolve().parents[1] / "arms"
    specs = {name: load_arm(arms / f"{name}.toml") for name in SHIPPED_ARMS}  # never the user's own arms/
    assert {"dm_pl", "dm_wm", "dm_wmc", "demo", "demo_random"} <= set(specs)
    assert specs["dm_wmc"].session_turns == 12 and specs["dm_wmc"].compact is True
    assert (specs["dm_pl"].ports.green, specs["dm_pl"].ports.purple) == (9051, 9061)
    assert (specs["dm_wm"].ports.green, specs["dm_wm"].ports.purple) == (9053, 9063)
    assert (specs["dm_wmc"].ports.green, specs["dm_wmc"].ports.purple) == (9055, 9065)
    assert specs["demo"].agent == "scripted" and specs["demo_random"].agent == "random"


def test_codex_paths_expand_the_home_directory():
    spec = parse_arm(VALID + '\n[codex]\nauth = "~/.codex/auth.json"\nroot = "/var/tmp/x"\n', Path("arms/a.toml"))
    assert spec.codex.auth == str(Path.home() / ".codex" / "auth.json")
    assert spec.codex.root == "/var/tmp/x"


def test_the_template_documents_every_key():
    import re

    from mcu_arms.arms.spec import ArmSpec, CodexSpec, PlannerSpec, PolicySpec, PortsSpec, PurpleSpec
    from mcu_arms.contracts.mineflayer import MineflayerServer
    from mcu_arms.contracts.settings import Thresholds
    from mcu_arms.contracts.slurm import SlurmSettings

    text = (Path(__file__).resolve().parents[1] / "templates" / "arm.toml").read_text()
    written = set(re.findall(r"^#? ?([a-z0-9_]+) = ", text, flags=re.MULTILINE))
    tables = set(re.findall(r"^#? ?\[([a-z_]+)\]", text, flags=re.MULTILINE))
    tables_of_the_arm = {
        *("ports", "codex", "env", "thresholds", "planner", "policy", "mineflayer", "slurm", "purple", "agent_options")
    }
    expected = set(ArmSpec.model_fields) - tables_of_the_arm
    assert expected <= written, f"missing from templates/arm.toml: {sorted(expected - written)}"
    assert tables_of_the_arm <= tables
    documented = set(PortsSpec.model_fields) | set(CodexSpec.model_fields) | set(Thresholds.model_fields)
    documented |= set(PlannerSpec.model_fields) | set(PolicySpec.model_fields) | set(MineflayerServer.model_fields)
    documented |= set(SlurmSettings.model_fields) | set(PurpleSpec.model_fields)
    assert documented <= written
    assert parse_arm(text, Path("arms/my_arm.toml")).name == "my_arm"


PLANNED = """\
agent = "planned"
task = "mine_diamond_from_scratch"
simulator = "embedded"
observe = "state"
step_timeout = 120

[planner]
base_url = "http://127.0.0.1:8000/v1"
model = "qwen3.8-27b"

[policy]
base_url = "http://127.0.0.1:18008"
model = "jaredpalmer/kev-4b"
revision = "6cfce5c"

[ports]
green = "auto"
purple = "auto"
"""


def test_the_planned_arm_reads_its_two_models():
    spec = parse_arm(PLANNED, Path("arms/planned.toml"))
    assert spec.planner.model == "qwen3.8-27b" and spec.planner.timeout == 60
    assert spec.policy.backend == "decision_service" and spec.policy.revision == "6cfce5c"


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        (
            VALID.replace('simulator = "embedded"', 'simulator = "minestudio"\nobserve = "state"'),
            "arms/arm.toml:4",
            "key 'observe': observe = \"state\" needs structured state, "
            "which only the embedded and mineflayer simulators provide",
        ),
        (
            VALID.replace('agent = "noop"', 'agent = "scripted"\nobserve = "state"'),
            "arms/arm.toml:2",
            'agent "scripted" reads frames: it needs observe = "frame" or "frame+state"',
        ),
        (
            VALID.replace('agent = "noop"', 'agent = "noop"\nobserve = "pixels"'),
            "arms/arm.toml:2",
            "'pixels' is not allowed (allowed: frame, state, frame+state)",
        ),
        (VALID + '[planner]\nmodel = "m"\n', "arms/arm.toml:8", '[planner] is only for agent = "planned"'),
        (PLANNED.replace('observe = "state"\n', ""), "arms/arm.toml", 'it needs observe = "state" or "frame+state"'),
        (PLANNED.replace('model = "qwen3.8-27b"\n', ""), "arms/arm.toml:7", "needs [planner] model"),
        (
            PLANNED.replace('revision = "6cfce5c"\n', ""),
            "arms/arm.toml:11",
            "a decision service's model revision is checked at start: set [policy] revision",
        ),
        (
            PLANNED.replace('revision = "6cfce5c"\n', 'revision = "6cfce5c"\ntimeout = 150\n'),
            "arms/arm.toml:15",
            "policy.timeout 150 s must be below step_timeout 120 s",
        ),
        (
            PLANNED.replace("[policy]\n", '[policy]\nbackend = "grpc"\n'),
            "arms/arm.toml:12",
            "'grpc' is not allowed (allowed: decision_service, chat)",
        ),
        (
            PLANNED.replace("[planner]\n", '[planner]\nenv_key = "sk-123"\n'),
            "arms/arm.toml:8",
            "the NAME of the environment variable holding the planner's API key",
        ),
    ],
)
def test_observe_and_the_planned_agents_models_are_checked(text: str, where: str, says: str):
    message = error_for(text)
    assert message.startswith(where) and says in message, message


def test_a_new_setting_at_its_neutral_value_keeps_existing_fingerprints():
    from mcu_arms.arms.plan import resolve_settings
    from mcu_arms.contracts.settings import fingerprint

    frame, _ = resolve_settings(parse_arm(VALID, Path("arms/a.toml")), [])
    assert "observe" not in frame.fingerprinted() and not any(
        k.startswith(("planner_", "policy_")) for k in frame.fingerprinted()
    )
    both, _ = resolve_settings(
        parse_arm(VALID + "", Path("arms/a.toml")).model_copy(update={"observe": "frame+state"}), []
    )
    assert fingerprint(both) != fingerprint(frame)
    planned, _ = resolve_settings(parse_arm(PLANNED, Path("arms/p.toml")), [])
    assert planned.fingerprinted()["policy_revision"] == "6cfce5c" and planned.fingerprinted()["planner_timeout"] == 60


def test_steve1_refuses_jpeg_bgr_at_the_line_that_sets_it():
    steve = VALID.replace('"noop"', '"steve1"').replace('"embedded"', '"minestudio"')
    message = error_for(
        steve.replace('simulator = "minestudio"', 'simulator = "minestudio"\nobs_encoding = "jpeg_bgr"')
    )
    assert "arms/arm.toml:4: key 'obs_encoding'" in message and "red and blue swapped" in message
    assert (
        parse_arm(
            steve.replace('simulator = "minestudio"', 'simulator = "minestudio"\nobs_encoding = "jpeg"'),
            Path("arms/arm.toml"),
        ).obs_encoding
        == "jpeg"
    )


def test_action_mode_is_for_minestudio_only_and_names_the_modes():
    message = error_for(VALID.replace('agent = "noop"', 'agent = "noop"\naction_mode = "env"'))
    assert "arms/arm.toml:2: key 'action_mode'" in message and 'only for simulator = "minestudio"' in message
    minestudio = VALID.replace('"embedded"', '"minestudio"')
    message = error_for(minestudio.replace('agent = "noop"', 'agent = "noop"\naction_mode = "exact"'))
    assert "arms/arm.toml:2" in message and "agent, env" in message
    spec = parse_arm(minestudio.replace('agent = "noop"', 'agent = "noop"\naction_mode = "env"'), Path("arms/a.toml"))
    assert spec.action_mode == "env"


def test_thinking_is_in_the_fingerprint_and_only_for_chat_endpoints():
    from mcu_arms.arms.plan import resolve_settings
    from mcu_arms.contracts.settings import fingerprint

    unset, _ = resolve_settings(parse_arm(PLANNED, Path("arms/p.toml")), [])
    off, _ = resolve_settings(
        parse_arm(PLANNED.replace("[policy]\n", "thinking = false\n\n[policy]\n"), Path("arms/p.toml")), []
    )
    assert "planner_thinking" not in unset.fingerprinted() and off.fingerprinted()["planner_thinking"] is False
    assert fingerprint(off) != fingerprint(unset)
    message = error_for(PLANNED.replace('revision = "6cfce5c"\n', 'revision = "6cfce5c"\nthinking = false\n'))
    assert "a decision service applies no chat template" in message, message
