"""The readers near their floor: the Analysis cached per set of episodes (hit while nothing changed, missed when a
report, an arm file or the question changes, a corrupt cache ignored and rebuilt), and `compare --export` streaming
the step table (its peak memory the same at two step counts). Correctness only: the timings are in
tests/bench/bench_readers.py."""

from __future__ import annotations

import csv
import json
import tracemalloc
from pathlib import Path

import pytest
from cli_support import invoke, make_environment
from test_compare import write_arm, write_run

from mcu_arms.contracts.steps import STEPS_FILE, StepRecord
from mcu_arms.layout import RunDir
from mcu_arms.report import analysis_cache
from mcu_arms.report.analysis import Analysis, analyse
from mcu_arms.report.analysis_cache import CACHE_SUFFIX, cache_dir, cached_analysis

TASK = "mine_diamond_from_scratch"
SEEDS = 3


def _run(root: Path, arm: str, episode: int, steps: dict[str, int | None]) -> None:
    """Episode N of the arm, played on seed N (a replicate)."""
    write_run(root, arm, episode, steps=steps)
    report = RunDir(root / "output" / arm / f"episode_{episode:03d}").report
    data = json.loads(report.read_bytes())
    data["settings"]["seed"] = episode
    report.write_text(json.dumps(data), encoding="utf-8")


def _campaign(root: Path) -> None:
    root.mkdir(exist_ok=True)
    write_arm(root, "scripted_arm")
    write_arm(root, "random_arm", agent="random")
    for episode in range(1, SEEDS + 1):
        _run(root, "scripted_arm", episode, {"collect_wood": 10 * episode})
        _run(root, "random_arm", episode, {"collect_wood": 40 * episode})


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each time the cache computes an Analysis: the arms it was asked for."""
    calls: list[list[str]] = []

    def counting(items: list[str], env, **options) -> Analysis:  # type: ignore[no-untyped-def]
        calls.append(list(items))
        return analyse(items, env, **options)

    monkeypatch.setattr(analysis_cache, "analyse", counting)
    return calls


def test_the_cache_is_hit_until_a_report_changes(tmp_path: Path, counted: list[list[str]]) -> None:
    _campaign(tmp_path)
    env, _, _ = make_environment(tmp_path, {})
    arms = ["scripted_arm", "random_arm"]
    first = cached_analysis(arms, env)
    assert first == analyse(arms, env) and len(counted) == 1
    cached = list(cache_dir(env).glob(f"*{CACHE_SUFFIX}"))
    assert len(cached) == 1 and not list(cache_dir(env).glob(".*.tmp")), "written whole, no temporary left"
    assert cached_analysis(arms, env) == first and len(counted) == 1, "nothing changed: read back, not computed"

    report = RunDir(tmp_path / "output" / "random_arm" / "episode_002").report
    data = json.loads(report.read_bytes())
    data["score"] = 5.0
    report.write_text(json.dumps(data), encoding="utf-8")
    changed = cached_analysis(arms, env)
    assert len(counted) == 2 and changed.arms[1].metrics["score"].values[1] == 5.0, "a changed report: recomputed"
    assert cached_analysis(arms, env) == changed and len(counted) == 2

    _run(tmp_path, "random_arm", SEEDS + 1, {})
    assert cached_analysis(arms, env).arms[1].n == SEEDS + 1 and len(counted) == 3, "a new episode: recomputed"
    cached_analysis(arms, env, baseline="random_arm")
    assert len(counted) == 4, "another question: another key"
    arm_file = tmp_path / "arms" / "scripted_arm.toml"
    arm_file.write_text(arm_file.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    cached_analysis(arms, env)
    assert len(counted) == 5, "an arm file changed: its flags may differ, recomputed"


def test_a_corrupt_cache_is_ignored_and_rebuilt(tmp_path: Path, counted: list[list[str]]) -> None:
    _campaign(tmp_path)
    env, _, _ = make_environment(tmp_path, {})
    first = cached_analysis(["scripted_arm", "random_arm"], env)
    (path,) = cache_dir(env).glob(f"*{CACHE_SUFFIX}")
    for damage in (b'{"schema_version": 3, "baseline"', b"\xff\xfe not json", b'{"schema_version": 1}'):
        path.write_bytes(damage)
        assert cached_analysis(["scripted_arm", "random_arm"], env) == first
        assert Analysis.model_validate_json(path.read_bytes()) == first, "rewritten whole"
    assert len(counted) == 4


def test_no_output_dir_is_made_for_a_cache_and_errors_are_not_cached(tmp_path: Path) -> None:
    write_arm(tmp_path, "scripted_arm")
    env, _, _ = make_environment(tmp_path, {})
    cached_analysis(["scripted_arm"], env)
    assert not (tmp_path / "output").exists()
    _campaign(tmp_path / "project")
    env, _, _ = make_environment(tmp_path / "project", {})
    outcome = invoke(tmp_path / "project", {}, "compare", "scripted_arm", "nope")
    assert outcome.exit_code == 2
    with pytest.raises(Exception, match="nope"):
        cached_analysis(["scripted_arm", "nope"], env)
    assert not cache_dir(env).exists()


def test_view_index_requests_read_the_cached_analysis(tmp_path: Path, counted: list[list[str]]) -> None:
    from mcu_arms.view.site import INDEX, Site

    _campaign(tmp_path)
    env, _, _ = make_environment(tmp_path, {})
    pages = [Site.build(["scripted_arm", "random_arm"], env).get(INDEX) for _ in range(3)]
    assert len(counted) == 1, "the index rebuilt three times, the analysis computed once"
    assert all(page is not None and page.data for page in pages)


def _write_steps(root: Path, arm: str, episode: int, steps: int) -> None:
    log = RunDir(root / "output" / arm / f"episode_{episode:03d}").green / TASK / STEPS_FILE
    log.parent.mkdir(parents=True, exist_ok=True)
    record = StepRecord(step=0, t=1.7e9, received='{"action": "noop"}', applied={"noop": 1}, agent_ms=12.5, sim_ms=3.25)
    line = record.model_dump(mode="json")
    with log.open("w", encoding="utf-8") as handle:
        for step in range(steps):
            wood = step == 7
            info = {"health": 9, "food": 8, "drink": 7, "energy": 6, "inventory": {"wood": step % 5}}
            events = [{"identity": "collect_wood"}] if wood else []
            fields = {"step": step, "t": 1.7e9 + step, "reward": 1.0 if wood else 0.0, "events": events, "info": info}
            handle.write(json.dumps(line | fields) + "\n")


def _export_peak(root: Path, steps: int) -> tuple[int, Path]:
    """Peak traced memory of `write_export` with one episode per arm logging `steps` steps (the others none)."""
    _campaign(root)
    for arm in ("scripted_arm", "random_arm"):
        _write_steps(root, arm, 1, steps)
    from mcu_arms.report.export import write_export

    env, _, _ = make_environment(root, {})
    result = analyse(["scripted_arm", "random_arm"], env)
    write_export(result, root / "warm")  # imports (pyarrow's) and first-call caches are not the export's memory
    tracemalloc.start()
    try:
        write_export(result, root / "export")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, root / "export"


def test_the_step_export_is_streamed_its_memory_bounded_by_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcu_arms.contracts import steps
    from mcu_arms.report import export

    # a small chunk and read block: several of each at both sizes, quickly
    monkeypatch.setattr(export, "STEP_CHUNK", 256)
    monkeypatch.setattr(steps, "READ_BLOCK", 1 << 16)
    small, _ = _export_peak(tmp_path / "small", 1024)
    large, exported = _export_peak(tmp_path / "large", 8 * 1024)
    with (exported / "steps.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 8 * 1024, "every step of every episode used"
    assert {(row["arm"], row["episode"]) for row in rows} == {("scripted_arm", "1"), ("random_arm", "1")}
    wood = [row for row in rows if row["step"] == "7"][0]
    assert (wood["milestones"], wood["health"], wood["energy"], wood["reward"]) == ("collect_wood", "9", "6", "1.0")
    # 8x the steps: an export holding every row peaks ~4 MB higher (~300 B a row); streamed, the peak stays put
    assert large < small * 1.5 + 250_000, (small, large)
    if (exported / "steps.parquet").exists():
        import pyarrow.parquet as pq

        table = pq.read_table(exported / "steps.parquet")
        assert table.num_rows == len(rows) and table.column("step").to_pylist()[:3] == [0, 1, 2]
