"""The ground floor: files users keep for weeks are versioned and read back across versions; settings cross from the
plan to a purple's command line in one place; the line locator and the step cap every layer shares."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import invoke
from run_helpers import write_arm

from mcu_arms.contracts.catalog import capped_steps
from mcu_arms.contracts.errors import UserError, dotted, key_parts
from mcu_arms.contracts.events import EventRecord, TaskStarted, parse_event
from mcu_arms.contracts.run_report import RUN_REPORT_SCHEMA_VERSION, read_report
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.steps import JsonlTail, StepProgress
from mcu_arms.contracts.toml_text import toml_line
from mcu_arms.layout import RunDir

V1_REPORT = Path(__file__).parent / "fixtures" / "run_report_v1.json"


def test_a_schema_1_report_reads_as_the_current_schema(tmp_path: Path) -> None:
    report = read_report(V1_REPORT)
    original = json.loads(V1_REPORT.read_text())
    assert report.schema_version == RUN_REPORT_SCHEMA_VERSION == 2
    assert report.status == original["status"] == "finished" and report.score == original["score"]
    assert report.evaluation_file == "evaluation.json", "schema 1 kept the evaluation at the episode's top"
    assert report.agent is not None and report.agent.kind == "scripted"
    assert report.agent.counters == original["purple_report"]["stats"]
    assert "episode" not in report.output_dirs


def test_a_schema_1_codex_report_keeps_its_turn_counters() -> None:
    data = json.loads(V1_REPORT.read_text())
    data["purple_report"] = {
        "kind": "worldmodel",
        "turns": 30,
        "failed_turns": 4,
        "compactions": 2,
        "overflow_resets": 1,
        "compaction_limit": 516000,
    }
    from mcu_arms.contracts.run_report import RunReport

    agent = RunReport.model_validate(data).agent
    assert (agent.turns, agent.failed_turns, agent.compactions, agent.overflow_resets) == (30, 4, 2, 1)
    assert agent.compaction_limit == 516000


def test_an_old_episode_on_disk_is_shown_by_status_and_compare(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_arm(project, "demo")
    episode = project / "output" / "demo" / "episode_001"
    episode.mkdir(parents=True)
    shutil.copy(V1_REPORT, episode / "result.json")
    status = invoke(project, {}, "status", "--json")
    assert status.exit_code == 0, status.err
    assert json.loads(status.out)["arms"][0]["state"] == "finished"
    compared = invoke(project, {}, "compare", "demo", "--json")
    assert compared.exit_code in (0, 1), compared.err
    assert json.loads(compared.out)["arms"][0]["metrics"]["score"]["mean"] == read_report(V1_REPORT).score


def test_a_report_from_a_newer_mcu_arms_is_refused_by_name(tmp_path: Path) -> None:
    data = json.loads(V1_REPORT.read_text())
    data["schema_version"] = RUN_REPORT_SCHEMA_VERSION + 1
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="newer than this mcu-arms reads") as raised:
        read_report(path)
    assert raised.value.path == str(path) and raised.value.key == "schema_version"


def test_the_current_schema_round_trips(tmp_path: Path) -> None:
    report = read_report(V1_REPORT)
    run_dir = RunDir(tmp_path / "episode_001")
    run_dir.path.mkdir()
    run_dir.write_report(report)
    assert read_report(run_dir.report) == report
    assert json.loads(run_dir.report.read_text())["schema_version"] == RUN_REPORT_SCHEMA_VERSION


def test_paths_in_a_report_resolve_wherever_the_episode_now_is(tmp_path: Path) -> None:
    here = RunDir(tmp_path / "a" / "episode_003")
    assert here.relative(here.log("green")) == "logs/green.log"
    moved = RunDir(tmp_path / "archive" / "episode_003")
    assert moved.resolve(here.relative(here.evaluation)) == moved.path / "green" / "evaluation.json"


def test_purple_options_cross_to_the_command_line_and_back() -> None:
    options = PurpleOptions(
        seed=3, step_timeout=42.5, session_turns=2, compact_limit=900, model="m", provider_env_key="LOCAL_KEY"
    )
    argv = options.argv()
    assert argv[argv.index("--step-timeout") + 1] == "42.5" and "--cuda-device" not in argv
    parsed = dict(zip(argv[::2], argv[1::2], strict=True))
    rebuilt = PurpleOptions(**{flag[2:].replace("-", "_"): value for flag, value in parsed.items()})
    assert rebuilt == options


def test_every_purple_option_is_a_serve_purple_flag(tmp_path: Path) -> None:
    shown = invoke(tmp_path, {}, "serve", "purple", "--help").out
    for field in PurpleOptions.model_fields:
        assert "--" + field.replace("_", "-") in shown, field


def test_green_events_survive_an_a2a_data_part_whose_numbers_became_floats() -> None:
    event = parse_event({"kind": "task_started", "task": "t", "index": 1.0, "count": 3.0})
    assert event == TaskStarted(task="t", index=1, count=3)
    assert parse_event({"kind": "no such event"}) is None
    record = EventRecord.model_validate_json(EventRecord(at="now", event=event).model_dump_json())
    assert record.event == event


def test_a_jsonl_tail_skips_and_counts_a_torn_or_foreign_line(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text('{"step": 0, "t": 1.0}\n{"step": "x"}\n{"step": 1, "t": 2.0}\n{"step": 2, "t"')
    tail = JsonlTail(path, StepProgress)
    assert [record.step for record in tail.poll()] == [0, 1]
    assert tail.invalid == 1 and tail.torn_tail


@pytest.mark.parametrize(
    ("category", "requested", "steps", "capped"),
    [
        ("crafting", None, 1200, False),
        ("crafting", 5000, 1200, True),
        ("crafting", 300, 300, False),
        ("mine_diamond_from_scratch", None, 12000, False),
        ("mine_diamond_from_scratch", 20000, 20000, False),
    ],
)
def test_mcu_step_budget_and_its_cap(category: str, requested: int | None, steps: int, capped: bool) -> None:
    got, note = capped_steps(category, requested)
    assert got == steps and (note is not None) == capped


TOML = """name = "x"
[ports]
green = 1

[[participants]]
role = "agent"
[[participants]]
role = "judge"
endpoint = "http://h:1"

[env]
"QUOTED" = "v"
"""


@pytest.mark.parametrize(
    ("key", "line"),
    [
        ("name", 1),
        ("ports.green", 3),
        ("ports", 2),
        ("participants[1].endpoint", 9),
        ("participants[1].role", 8),
        ("participants[0].role", 6),
        ("participants[0].endpoint", 5),
        ("env.QUOTED", 12),
        ("nowhere", None),
    ],
)
def test_the_toml_line_locator(key: str, line: int | None) -> None:
    assert toml_line(TOML, key) == line


def test_dotted_keys_round_trip() -> None:
    assert dotted(("participants", 1, "role")) == "participants[1].role"
    assert key_parts("participants[1].role") == ("participants", 1, "role")
