"""The packaged MCU task files, the loader's error reporting, and `mcu-arms tasks`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
import yaml
from rich.console import Console
from typer.testing import CliRunner

from mcu_arms.cli import tasks as tasks_cli
from mcu_arms.contracts import catalog
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.tasks import TASKS_ROOT, all_tasks, load_category, load_task, select_tasks, tasks_root
from mcu_arms.environment import Environment

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "mcu_tasks"


def test_packaged_set_has_86_tasks_in_the_12_catalog_categories() -> None:
    tasks = all_tasks(TASKS_ROOT)
    assert tuple(tasks) == catalog.CATEGORIES
    flat = [task for category in tasks.values() for task in category]
    assert len(flat) == 86
    kinds = [task.scoring_kind for task in flat]
    assert (kinds.count("reward"), kinds.count("milestones"), kinds.count("video")) == (49, 2, 35)


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the shared reference task set is not present")
def test_every_task_agrees_with_the_reference() -> None:
    reference_files = sorted(REFERENCE.glob("*/*.yaml"))
    assert len(reference_files) == 86
    for reference_file in reference_files:
        expected = yaml.safe_load(reference_file.read_text())
        task = load_task(TASKS_ROOT / reference_file.parent.name / reference_file.name)
        assert task.text == expected["text"].strip(), reference_file
        assert list(task.init_commands) == list(expected.get("custom_init_commands") or []), reference_file
        for ours, key in ((task.reward_cfg, "reward_cfg"), (task.milestones, "milestone_reward_cfg")):
            theirs = expected.get(key) or []
            assert [(e.event, e.identity, list(e.objects), e.reward, e.max_reward_times) for e in ours] == [
                (e["event"], e["identity"], list(e["objects"]), float(e["reward"]), int(e["max_reward_times"]))
                for e in theirs
            ], reference_file


def _write(tmp_path: Path, body: str, category: str = "crafting", name: str = "craft_thing") -> Path:
    path = tmp_path / category / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def test_bad_max_reward_times_names_file_line_and_key(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "text: craft a thing\n"
        "reward_cfg:\n"
        "  - event: craft_item\n"
        "    identity: craft_thing\n"
        "    objects: [thing]\n"
        "    max_reward_times: 0\n",
    )
    with pytest.raises(UserError) as caught:
        load_task(path)
    assert caught.value.path == str(path)
    assert caught.value.line == 6
    assert caught.value.key == "reward_cfg[0].max_reward_times"


def test_float_counts_normalise_and_fractional_ones_are_rejected(tmp_path: Path) -> None:
    entry = "reward_cfg:\n  - {event: craft_item, identity: a, objects: [x], max_reward_times: %s}\n"
    assert load_task(_write(tmp_path, "text: t\n" + entry % "2.0")).reward_cfg[0].max_reward_times == 2
    with pytest.raises(UserError) as caught:
        load_task(_write(tmp_path, "text: t\n" + entry % "1.5"))
    assert caught.value.line == 3 and caught.value.key == "reward_cfg[0].max_reward_times"


def test_unknown_key_missing_text_duplicates_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        load_task(_write(tmp_path, "text: t\nrewards: []\n"))
    assert (caught.value.line, caught.value.key) == (2, "rewards")
    assert "reward_cfg" in (caught.value.allowed or "")
    with pytest.raises(UserError) as caught:
        load_task(_write(tmp_path, "custom_init_commands: []\n"))
    assert caught.value.key == "text"
    with pytest.raises(UserError) as caught:
        load_task(
            _write(
                tmp_path,
                "text: t\nreward_cfg:\n  - {event: e, identity: a, objects: [x]}\n"
                "  - {event: e, identity: a, objects: [y]}\n",
            )
        )
    assert (caught.value.line, caught.value.key) == (4, "reward_cfg[1].identity")
    with pytest.raises(UserError) as caught:
        load_task(_write(tmp_path, "text: t\nreward_cfg: [\n"))
    assert caught.value.line is not None and "YAML" in caught.value.message
    with pytest.raises(UserError) as caught:
        load_task(_write(tmp_path, "text: t\nreward_cfg:\n  - {event: e, identity: a, objects: x}\n"))
    assert (caught.value.line, caught.value.key) == (3, "reward_cfg[0].objects")


def test_upstream_defaults_key_is_accepted_and_empty_lists_mean_none(tmp_path: Path) -> None:
    task = load_task(_write(tmp_path, "defaults: [base, _self_]\ntext: t\ncustom_init_commands:\n"))
    assert task.init_commands == () and task.scoring_kind == "video"
    assert (task.name, task.category) == ("craft_thing", "crafting")


def test_selection_errors_list_the_valid_choices(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        load_category("cooking")
    assert "crafting" in (caught.value.allowed or "")
    with pytest.raises(UserError) as caught:
        select_tasks("crafting", ["craft_furnace", "craft_rocket"])
    assert "craft_ladder" in (caught.value.allowed or "")
    chosen = select_tasks("crafting", ["craft_ladder", "craft_furnace"])
    assert [task.name for task in chosen] == ["craft_ladder", "craft_furnace"]
    assert len(select_tasks("crafting", None)) == 10


def test_env_override_of_the_tasks_root(tmp_path: Path) -> None:
    _write(tmp_path, "text: t\n", category="motion", name="wave")
    assert tasks_root(env={"MCU_TASKS_DIR": str(tmp_path)}) == tmp_path
    assert tasks_root(env={}) == TASKS_ROOT
    assert [t.name for t in load_category("motion", tmp_path)] == ["wave"]


def _tasks_app() -> typer.Typer:
    """A command group holding only `tasks`, so the test does not depend on which other commands exist yet."""
    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """mcu-arms"""

    tasks_cli.register(app)
    return app


def _run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(console=Console(file=out, width=200), err_console=Console(file=err, width=200))
    result = CliRunner().invoke(_tasks_app(), ["tasks", *args], obj=env)
    return result.exit_code, out.getvalue(), err.getvalue()


def test_cli_lists_tasks_with_scoring_kind_and_simulators_as_json() -> None:
    code, out, _ = _run_cli("crafting", "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 10
    furnace = next(row for row in rows if row["task"] == "craft_furnace")
    assert furnace["scoring"] == "reward_cfg"
    assert furnace["runs_on"]["minestudio"] is True and furnace["runs_on"]["embedded"] is True
    code, out, _ = _run_cli("motion", "--json")
    assert all(row["runs_on"]["embedded"] is False for row in json.loads(out))


def test_cli_table_and_unknown_category() -> None:
    code, out, _ = _run_cli("mine_diamond_from_scratch")
    assert code == 0 and "mine_diamond_from_scratch" in out and "milestones" in out
    code, _, err = _run_cli("cooking")
    assert code == 2 and "unknown task category 'cooking'" in err


def test_cli_exact_embedded_support_on_request() -> None:
    code, out, _ = _run_cli("crafting", "--simulator", "embedded", "--json")
    assert code == 0
    rows = {row["task"]: row for row in json.loads(out)}
    assert rows["craft_furnace"]["runs_on"]["embedded"] is True
    not_runnable = [row for row in rows.values() if not row["runs_on"]["embedded"]]
    assert not_runnable and all("minestudio" in row["notes"]["embedded"] for row in not_runnable)
    code, _, err = _run_cli("crafting", "--simulator", "bedrock")
    assert code == 2 and "allowed: minestudio, embedded" in err
