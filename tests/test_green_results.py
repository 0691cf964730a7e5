"""Step log, atomic result file, the category totals (unscored tasks are never a silent 0) and the summary text."""

from __future__ import annotations

import json
from pathlib import Path

from mcu_arms.atomic import write_json_atomic, write_json_exclusive, write_text_atomic
from mcu_arms.contracts.evaluation import (
    CategoryResult,
    EvaluationResult,
    LatencyStats,
    NoopCauseStats,
    SimulatorInfo,
    TaskMetrics,
    VideoResult,
    summary_text,
)
from mcu_arms.contracts.steps import MAX_RECEIVED_CHARS, StepRecord, truncate_received
from mcu_arms.contracts.wire import EvalConfig
from mcu_arms.green.steplog import StepLog


def _record(step: int, received: str | None = "{}") -> StepRecord:
    return StepRecord(step=step, t=0.0, received=received, applied={"forward": 1}, agent_ms=1.0, sim_ms=1.0)


def test_each_step_is_on_disk_as_soon_as_it_is_written(tmp_path: Path):
    with StepLog(tmp_path / "task", save_frames=False) as log:
        log.write(_record(0))
        assert [json.loads(line)["step"] for line in log.path.read_text().splitlines()] == [0]
        log.write(_record(1))
        assert len(log.path.read_text().splitlines()) == 2
    assert log.frames_dir is None and not (tmp_path / "task" / "frames").exists()


def test_a_huge_reply_is_truncated_in_the_log_with_its_length():
    huge = "x" * (MAX_RECEIVED_CHARS * 3)
    logged = truncate_received(huge)
    assert logged.startswith("x" * MAX_RECEIVED_CHARS)
    assert logged.endswith(f"[truncated, {len(huge)} chars in all]")
    assert truncate_received("short") == "short" and truncate_received(None) is None


def test_frames_are_numbered_by_step(tmp_path: Path):
    with StepLog(tmp_path / "task", save_frames=True) as log:
        log.save_frame(7, b"\x89PNG...")
    assert (tmp_path / "task" / "frames" / "000007.png").read_bytes() == b"\x89PNG..."


def test_result_file_is_replaced_whole_and_no_temporary_is_left(tmp_path: Path):
    target = tmp_path / "out" / "result.json"
    write_json_atomic(target, {"v": 1})
    write_json_atomic(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 2}
    assert [path.name for path in target.parent.iterdir()] == ["result.json"]


def test_an_atomic_write_takes_the_mode_its_content_asks_for_not_the_temporary_files(tmp_path: Path):
    shared, exclusive, private = tmp_path / "result.json", tmp_path / "evaluation.json", tmp_path / "turn.json"
    write_json_atomic(shared, {"v": 1})
    write_json_exclusive(exclusive, {"v": 1})
    write_text_atomic(private, "conversation", mode=0o600)
    assert {path.name: path.stat().st_mode & 0o777 for path in (shared, exclusive, private)} == {
        "result.json": 0o644,
        "evaluation.json": 0o644,
        "turn.json": 0o600,
    }


def _metrics(score: float | None, max_score: float = 10.0, **criteria: float) -> TaskMetrics:
    return TaskMetrics(
        max_score=max_score,
        normalised_sim_score=score,
        score=score,
        category="crafting",
        scoring_kind="reward",
        scored=score is not None,
        score_source="sim" if score is not None else "unscored",
        video=VideoResult(status="disabled"),
        **criteria,
    )


def test_unscored_tasks_are_left_out_of_the_totals_and_named():
    result = CategoryResult.of(
        "crafting",
        {"a": _metrics(4.0, action_control=6.0), "b": _metrics(None), "c": _metrics(10.0, action_control=2.0)},
        skipped=[],
    )
    assert (result.num_tasks, result.scored_tasks, result.unscored_tasks) == (3, 2, ["b"])
    assert (result.total_score, result.total_max_score) == (14.0, 20.0)
    assert result.avg_action_control == 4.0 and result.avg_creative_attempts is None
    assert "1 of 3 tasks unscored (b)" in result.note


def test_latency_stats_and_noop_reasons_are_bounded():
    stats = LatencyStats.of([float(v) for v in range(1, 101)])
    assert (stats.count, stats.p50_ms, stats.p95_ms, stats.max_ms) == (100, 51.0, 96.0, 100.0)
    assert LatencyStats.of([]).mean_ms is None
    causes = NoopCauseStats()
    for step in range(20):
        causes.record(step, "late")
    assert causes.count == 20 and causes.first_reasons == [f"step {s}: late" for s in range(5)]


def test_the_summary_names_every_fallback_of_a_task():
    metrics = _metrics(2.5).model_copy(
        update={
            "noops": {"timeout": NoopCauseStats(count=2)},
            "noop_total": 2,
            "dropped_keys": {"chat": 1},
            "action_adjustments": {"camera_meta_off": 3},
            "sim_fallbacks": {"deaths": 1, "no_effect.camera": 40},
            "unavailable_entries": ["iron_ingot"],
        }
    )
    result = EvaluationResult(
        participants={},
        results=[CategoryResult.of("crafting", {"t": metrics}, skipped=[])],
        simulator=SimulatorInfo(name="embedded", version="1.8.3", label="embedded (Crafter 1.8.3)"),
        seed=0,
        max_steps=10,
        config=EvalConfig(task_category="crafting"),
        started_at="",
        finished_at="",
        duration_s=0.0,
        output_dir="",
    )
    line = next(line for line in summary_text(result).splitlines() if line.startswith("Task 't'"))
    for shown in (
        "noops 2 (timeout 2)",
        "dropped chat x1",
        "adjusted camera_meta_off x3",
        "simulator fallbacks deaths x1, no_effect.camera x40",
        "no analogue on this simulator: iron_ingot",
        "video evaluation disabled",
    ):
        assert shown in line, line


FIXTURES = Path(__file__).parent / "fixtures"


def test_upstream_totals_count_every_task_and_unscored_ones_as_zero():
    """Held against an AgentBeats leaderboard: MCU-AgentBeats counts a video-only task without video as 0 / 10."""
    result = CategoryResult.of("crafting", {"a": _metrics(4.0), "b": _metrics(None), "c": _metrics(10.0)}, skipped=[])
    assert (result.total_score, result.total_max_score) == (14.0, 20.0)
    assert (result.upstream_total_score, result.upstream_total_max_score) == (14.0, 30.0)
    assert result.task_metrics["b"].upstream_score == 0.0 and result.task_metrics["b"].score is None
    dumped = result.model_dump(mode="json")
    assert dumped["upstream_total_score"] == 14.0 and dumped["task_metrics"]["b"]["upstream_score"] == 0.0


def test_a_schema_1_evaluation_is_migrated_on_read():
    """The fixture is a real schema-1 file: its sim_score was normalised (10.0 for 1 of 1 reward)."""
    from mcu_arms.contracts.evaluation import EVALUATION_SCHEMA_VERSION

    raw = json.loads((FIXTURES / "evaluation_v1.json").read_text())
    assert "schema_version" not in raw
    result = EvaluationResult.model_validate(raw)
    assert result.schema_version == EVALUATION_SCHEMA_VERSION == 2
    table = result.results[0].task_metrics["craft_the_crafting_table"]
    assert (table.sim_score, table.normalised_sim_score, table.score) == (1.0, 10.0, 10.0)
    furnace = result.results[0].task_metrics["craft_furnace"]
    assert (furnace.sim_score, furnace.normalised_sim_score) == (0.0, 0.0)
    assert table.video.rubric == "mcu_arms" and result.video_rubric == "mcu_arms"
    assert result.ignored_config_keys == [] and result.config.obs_size == (128, 128)
    again = EvaluationResult.model_validate_json(result.model_dump_json())
    assert again == result  # a migrated file reads back as itself


def test_the_artifact_data_part_is_upstreams_shape_and_reads_back_through_protobuf():
    """A2A data parts are protobuf Structs: every number comes back a float. Ours must still read it."""
    from a2a.helpers import get_data_parts, new_data_part
    from a2a.types import Part

    from mcu_arms.contracts.evaluation import evaluation_from_artifact

    result = EvaluationResult.model_validate_json((FIXTURES / "evaluation_v1.json").read_text())
    part = Part.FromString(new_data_part(result.artifact_data()).SerializeToString())
    (data,) = get_data_parts([part])
    assert data["total_score"] == 10.0 and data["num_tasks"] == 2.0 and isinstance(data["num_tasks"], float)
    assert data["task_metrics"]["craft_the_crafting_table"]["sim_score"] == 1.0
    assert {"task_category", "total_max_score", "avg_action_control", "task_metrics"} <= set(data)
    assert data["mcu_arms"]["simulator"]["name"] == "embedded" and "results" not in data["mcu_arms"]
    read = evaluation_from_artifact(data)
    assert read == result
    assert isinstance(read.results[0].num_tasks, int) and read.max_steps == 6
    assert evaluation_from_artifact(json.loads((FIXTURES / "evaluation_v1.json").read_text())) == result  # old shape
    upstream_only = {key: value for key, value in data.items() if key != "mcu_arms"}
    assert evaluation_from_artifact(upstream_only) is None  # upstream's green: not ours, kept as it came
