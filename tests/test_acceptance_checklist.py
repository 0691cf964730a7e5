"""The MineStudio acceptance checklist's own frame (acceptance/minestudio.py) in the fast tier, without an engine:
how a check's outcome becomes its status and evidence, and how a run's report is written (never over another)."""

from __future__ import annotations

from pathlib import Path

from mcu_arms.acceptance.minestudio import (
    AcceptanceReport,
    _check,
    _Failed,
    _Run,
    _Skipped,
    new_run_dir,
    write_report,
)


def _failing(evidence: list[str]) -> None:
    evidence.append("measured 3 frames")
    raise _Failed("the frames differ")


def _skipping(evidence: list[str]) -> None:
    raise _Skipped("no GPU here")


def _raising(evidence: list[str]) -> None:
    raise KeyError("player_pos")


def test_each_outcome_of_a_check_is_its_status_with_the_evidence(tmp_path: Path) -> None:
    run = _Run({}, tmp_path, budget_s=60)
    assert _check(run, "ok", lambda evidence: None).status == "passed"
    run.stand_in = True
    assert _check(run, "engine", lambda evidence: None).status == "stand-in"
    assert _check(run, "not an engine check", lambda evidence: None, engine=False).status == "passed"
    failed = _check(run, "frames", _failing)
    assert (failed.status, failed.evidence) == ("failed", ["measured 3 frames", "the frames differ"])
    assert (_check(run, "gpu", _skipping).status, _check(run, "gpu", _skipping).evidence) == (
        "skipped",
        ["no GPU here"],
    )
    assert _check(run, "info", _raising).evidence == ["KeyError: 'player_pos'"]


def test_a_check_past_the_budget_is_skipped_saying_so(tmp_path: Path) -> None:
    spent = _check(_Run({}, tmp_path, budget_s=-1), "late", lambda evidence: None)
    assert spent.status == "skipped" and "out of time" in spent.evidence[0]


def test_each_run_writes_its_report_in_a_folder_of_its_own(tmp_path: Path) -> None:
    run = _Run({}, tmp_path, budget_s=60)
    report = AcceptanceReport(started_at="2026-01-01T00:00:00Z", checks=[_check(run, "frames", _failing)])
    first, second = new_run_dir(tmp_path), new_run_dir(tmp_path)
    assert first != second and first.is_dir() and second.is_dir()
    json_path, text_path = write_report(report, first)
    assert AcceptanceReport.model_validate_json(json_path.read_text()).failed == ["frames"]
    assert text_path.read_text().endswith("FAILED: frames\n")
