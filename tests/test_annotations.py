"""`run --tag KEY=VALUE --note TEXT`: kept in every episode's report (never in the fingerprint), shown by `status`;
bad tags refused at the flag; secrets in them masked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import invoke
from run_helpers import report, run_cli, write_arm

from mcu_arms.contracts.annotations import checked_note, matches_tags, parse_tags
from mcu_arms.contracts.errors import UserError


def test_tags_are_parsed_bounded_and_scrubbed_and_bad_ones_name_the_flag():
    assert parse_tags(["purpose=ablation", "who=ana", "empty="]) == {"purpose": "ablation", "who": "ana", "empty": ""}
    assert parse_tags(["api_key=hunter2-secret"])["api_key"].startswith("***")
    assert "\\x1b" in parse_tags(["why=\x1b[2J"])["why"]
    for bad in ("no-equals", "=value", "sp ace=x", f"k={'x' * 201}"):
        with pytest.raises(UserError) as raised:
            parse_tags([bad])
        assert raised.value.key == "--tag" and "KEY=VALUE" in (raised.value.allowed or raised.value.message), bad
    with pytest.raises(UserError, match="given twice"):
        parse_tags(["a=1", "a=2"])
    with pytest.raises(UserError, match="33 tags"):
        parse_tags([f"k{index}=v" for index in range(33)])
    assert checked_note("  ") is None and checked_note("baseline for the ablation") == "baseline for the ablation"
    with pytest.raises(UserError) as raised:
        checked_note("x" * 2001)
    assert raised.value.key == "--note"
    assert matches_tags({"purpose": "ablation", "who": "ana"}, {"purpose": "ablation"})
    assert not matches_tags({"purpose": "pilot"}, {"purpose": "ablation"})


def test_a_bad_tag_is_refused_before_anything_runs(tmp_path: Path) -> None:
    write_arm(tmp_path, "a", agent="noop", steps=5)
    refused = invoke(tmp_path, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, "run", "--arm", "a", "--tag", "oops")
    assert refused.exit_code == 2 and "--tag" in refused.err and "KEY=VALUE" in refused.err
    assert not (tmp_path / "output").exists()


@pytest.mark.slow
def test_tags_and_note_reach_the_report_and_status_but_not_the_fingerprint(tmp_path: Path) -> None:
    write_arm(tmp_path, "a", agent="noop", steps=5)
    state = tmp_path / "state"
    done = run_cli(tmp_path, state, "run", "--arm", "a", "--tag", "purpose=ablation", "--tag", "who=ana",
                   "--note", "first try of the noop baseline")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = report(tmp_path, "a")
    assert data is not None and data["status"] == "finished"
    assert data["tags"] == {"purpose": "ablation", "who": "ana"} and data["note"] == "first try of the noop baseline"
    plain = run_cli(tmp_path, state, "plan", "--dry-run", "--json", "--arm", "a")
    assert json.loads(plain.stdout)["plans"][0]["fingerprint"] == data["fingerprint"], "tags never change it"

    shown = run_cli(tmp_path, state, "status", "--json")
    (arm,) = json.loads(shown.stdout)["arms"]
    assert arm["tags"] == {"purpose": "ablation", "who": "ana"} and arm["note"] == "first try of the noop baseline"
    table = run_cli(tmp_path, state, "status")
    assert "purpose=ablation who=ana; first try of the noop baseline" in table.stdout
