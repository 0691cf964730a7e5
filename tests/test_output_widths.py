"""Output that fits any terminal or pipe: piped tables keep each row on one line with nothing cut, and the final
`run` table stays readable at 50 columns.

The in-process tests read the CLI's real consoles on a string buffer (tests/cli_support.py), which is what a pipe
gets; one test goes through a real pipe to show that the real Environment decides the same way.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from cli_support import invoke
from rich.console import Console
from test_compare import write_arm, write_run

from mcu_arms.cli.run import _render_outcome
from mcu_arms.contracts.run_report import Failure
from mcu_arms.environment import Environment, console_for
from mcu_arms.supervise.outcomes import ArmOutcome, RunOutcome

CUT = "…"
SKIP_REASON = (
    "the latest run (episode_002) finished with the same fingerprint v1:0123456789abcdef; --rerun runs it again"
)


def _table_rows(out: str) -> list[list[str]]:
    """The cells of every body row of the tables in `out`."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]


def test_piped_tasks_keep_every_column_whole() -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-m", "mcu_arms", "tasks"], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    assert CUT not in done.stdout
    rows = _table_rows(done.stdout)
    assert len(rows) == 86  # one line per task: nothing wrapped onto a second line
    by_task = {row[1]: row for row in rows}
    assert by_task["mine_diamond_from_scratch"][:5] == [
        "mine_diamond_from_scratch",
        "mine_diamond_from_scratch",
        "milestones (10)",
        "yes",
        "yes",
    ]
    assert by_task["build_a_garden"][5] == "no"  # mineflayer: video only
    assert by_task["build_a_garden"][6].startswith("embedded: needs minestudio: category 'building' has no Crafter")
    assert (
        "mining_and_collecting); mineflayer: task 'build_a_garden' is scored by video" in by_task["build_a_garden"][6]
    )


def _outcome() -> RunOutcome:
    return RunOutcome(
        arms=[
            ArmOutcome(
                arm="demo",
                status="finished",
                report_path="/project/output/demo/episode_001/result.json",
                score=90,
                max_score=100,
                steps_run=3000,
                milestones_reached=9,
                milestones_total=10,
                milestones_reachable=9,
                simulator_label="embedded (Crafter analogue of MCU)",
            ),
            ArmOutcome(arm="demo_random", status="skipped", message=SKIP_REASON),
            ArmOutcome(
                arm="broken",
                status="failed",
                failure=Failure(process="purple", reason="exited with code 3 before it was ready"),
            ),
        ]
    )


def _rendered(console: Console) -> str:
    _render_outcome(_outcome(), Environment(console=console, cwd=Path("/project")))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_piped_run_table_keeps_each_arm_on_one_line() -> None:
    out = _rendered(console_for(io.StringIO(), color_system=None))
    assert CUT not in out
    rows = {row[0]: row for row in _table_rows(out)}
    assert rows["demo"] == [
        "demo",
        "finished",
        "90 / 100",
        "3000",
        "9/10 (9 reachable)",
        "0",
        "output/demo/episode_001/result.json",
    ]
    assert rows["demo_random"][-1] == SKIP_REASON
    assert rows["broken"][-1] == "purple: exited with code 3 before it was ready"


def _stacked_value(out: str, arm: str, label: str) -> str:
    """One labelled value of an arm's block in the stacked form, its wrapped lines joined."""
    lines = out.splitlines()
    block = lines[next(i for i, line in enumerate(lines) if line.startswith(f"{arm} ")) + 1 :]
    start = next(i for i, line in enumerate(block) if line.split()[:1] == [label])
    indent = block[start].index(label) + len(label)
    value = [block[start][indent:].strip()]
    for line in block[start + 1 :]:
        if line[: indent + 1].strip():  # the next label, or the next arm
            break
        value.append(line.strip())
    return " ".join(value)


def test_the_run_table_at_50_columns_shows_every_value_whole() -> None:
    out = _rendered(Console(file=io.StringIO(), width=50, color_system=None, force_terminal=True))
    assert all(len(line) <= 50 for line in out.splitlines()), out
    assert CUT not in out
    assert _stacked_value(out, "demo", "score") == "90 / 100"
    assert _stacked_value(out, "demo", "milestones") == "9/10 (9 reachable)"
    assert _stacked_value(out, "demo", "report") == "output/demo/episode_001/result.json"
    assert _stacked_value(out, "demo_random", "reason") == SKIP_REASON
    assert _stacked_value(out, "broken", "reason") == "purple: exited with code 3 before it was ready"
    assert "demo_random skipped" in out and "broken failed" in out


def test_piped_compare_and_status_keep_every_column_whole(tmp_path: Path) -> None:
    write_arm(tmp_path, "scripted_arm_with_a_long_name")
    write_arm(tmp_path, "random_arm_with_a_long_name", agent="random")
    write_run(tmp_path, "scripted_arm_with_a_long_name", steps={"collect_wood": 12, "place_table": 40})
    write_run(tmp_path, "random_arm_with_a_long_name", steps={"collect_wood": 150}, unavailable=("collect_diamond",))

    compared = invoke(tmp_path, {}, "compare", "scripted_arm_with_a_long_name", "random_arm_with_a_long_name")
    assert compared.exit_code == 0, compared.err
    assert CUT not in compared.out
    rows = {row[0]: row[1:] for row in _table_rows(compared.out)}
    assert rows["agent"] == ["scripted", "random"]
    assert rows["collect_wood"] == ["12", "150 (+138)"]
    header = next(line for line in compared.out.splitlines() if "(baseline)" in line)
    assert "scripted_arm_with_a_long_name (baseline)" in header and "random_arm_with_a_long_name" in header

    status = invoke(tmp_path, {}, "status")
    assert status.exit_code == 0, status.err
    assert CUT not in status.out
    rows = {row[0]: row for row in _table_rows(status.out)}
    assert rows["scripted_arm_with_a_long_name"][1:4] == ["001", "0", "finished"]
    assert rows["scripted_arm_with_a_long_name"][7] == "2/5: collect_wood@12, place_table@40"
    assert rows["random_arm_with_a_long_name"][7] == "1/5 (4 reachable): collect_wood@150"


def test_piped_plan_doctor_and_hints_keep_every_line_whole(tmp_path: Path) -> None:
    env = {"MCU_ARMS_STATE_DIR": str(tmp_path / "state"), "PATH": os.environ["PATH"]}
    made = invoke(tmp_path, env, "new", "an_arm_whose_name_alone_takes_forty_chars", "--agent", "random")
    assert made.exit_code == 0, made.err
    hint = "check it with: mcu-arms plan --dry-run arms/an_arm_whose_name_alone_takes_forty_chars.toml"
    assert made.out.splitlines() == [f"wrote arms/an_arm_whose_name_alone_takes_forty_chars.toml; {hint}"]

    planned = invoke(tmp_path, env, "plan", "--dry-run", "--verbose")
    assert planned.exit_code == 0, planned.err
    purple = next(line for line in planned.out.splitlines() if "serve purple" in line)
    as_json = invoke(tmp_path, env, "plan", "--dry-run", "--json")
    argv = next(p for p in json.loads(as_json.out)["plans"][0]["processes"] if p["role"] == "purple")["argv"]
    # the whole command line on one line (paths inside the project shown relative to it, as plan shows them)
    assert purple.rstrip(" │").endswith(" ".join(argv[-6:]).replace(f"{tmp_path}/", "")), purple
    assert CUT not in planned.out

    checked = invoke(tmp_path, env, "doctor")
    assert CUT not in checked.out
    rows = {row[0]: row for row in _table_rows(checked.out)}
    assert rows["crafter (embedded simulator)"][1:] == ["ok", "importable", "an_arm_whose_name_alone_takes_forty_chars"]
