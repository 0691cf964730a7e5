"""`compare --to mlflow|wandb`: every compared episode as an experiment-tracker run, checked against its report.

The campaign is tests/fixtures/tracking_campaign: the real reports and evaluations of `mcu-arms run` of a two-arm
campaign (scripted vs random, seeds 0 and 1, 60 steps on the embedded simulator, an API key in the baseline's env),
run in a git checkout so that its provenance names a commit. The mapping is checked on its own; the MLflow test
exports to a real `mlflow server` on loopback and reads everything back through MLflow's client; the W&B test
writes real offline runs and reads their log back. Both exports run under strace, which records the address of every
socket the command and its children (wandb-core included) connect or send to: none may leave loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import chromium_missing, start_browser
from cli_support import invoke
from server_procs import free_port
from tracking_support import FIXTURE, QUIET_MLFLOW, STRACE, MlflowServer, mlflow_server, offline_run, traced

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import RunReport, read_report
from mcu_arms.environment import Environment
from mcu_arms.report.analysis import analyse
from mcu_arms.report.tracking import RUN_ID_TAG, TrackingExport, compared, parse_destination, tracking_export

CAMPAIGN = "campaigns/tiny.toml"
EXPERIMENT = "tiny"
SECRET = "sk-trackingtestsecret0123456789"  # the baseline arm's TRACKING_TEST_API_KEY
ARMS = ("scripted_arm", "random_arm")
ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(FIXTURE, copy)
    return copy


def reports(project: Path) -> dict[str, RunReport]:
    """Every episode's report, by our run id."""
    found = {}
    for path in sorted((project / "output").glob("*/episode_*/result.json")):
        report = read_report(path)
        found[f"{report.arm}/episode_{report.episode:03d}@{report.started_at}"] = report
    return found


def export_of(project: Path) -> TrackingExport:
    result = analyse([CAMPAIGN], Environment(cwd=project, variables={}))
    return tracking_export(compared(result), EXPERIMENT)


def milestone_points(report: RunReport) -> dict[str, list[tuple[int, float]]]:
    """What a tracker should hold per milestone reached: one point, its step, at that step."""
    return {
        f"milestone/{m.task}/{m.identity}": [(m.step, float(m.step))] for m in report.milestones if m.step is not None
    }


def cli_env(project: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "WANDB_"))}
    return {**env, **QUIET_MLFLOW, "MCU_ARMS_STATE_DIR": str(project / "state"), "COLUMNS": "200"}


# The mapping, on its own.


def test_each_finished_episode_maps_to_one_run_as_its_report_says(project: Path) -> None:
    export = export_of(project)
    by_id = reports(project)
    assert export.experiment == EXPERIMENT
    assert sorted(run.run_id for run in export.episodes) == sorted(by_id)
    for run in export.episodes:
        report = by_id[run.run_id]
        covered = report.settings.redacted().fingerprinted()
        assert {key for key in run.params if not key.startswith("env.")} == set(covered) - {"env"}
        assert run.params["agent"] == report.settings.agent and run.params["steps"] == "60"
        assert "seed" not in run.params  # the replicate axis: a tag, never a setting that differs
        tags = {key.removeprefix("mcu_arms."): value for key, value in run.tags.items()}
        assert tags["arm"] == report.arm and tags["seed"] == str(report.settings.seed)
        assert tags["fingerprint"] == report.fingerprint and tags["simulator"] == report.simulator_label
        assert tags["git_sha"] == report.provenance.git_sha and len(tags["git_sha"]) == 40
        assert tags["parent"] == export.comparison.run_id
        assert run.tags[RUN_ID_TAG] == run.run_id
        metrics: dict[str, list[tuple[int, float]]] = {}
        for point in run.metrics:
            metrics.setdefault(point.key, []).append((point.step, point.value))
        assert metrics["score"] == [(60, report.score)] and metrics["sim_score"] == [(60, report.sim_score)]
        assert metrics["steps_run"] == [(60, 60.0)] and metrics["wall_s"] == [(60, report.wall_s)]
        for cause, count in report.behaviour.items():
            assert metrics[f"behaviour/{cause}"] == [(60, count)]
        milestones = {key: value for key, value in metrics.items() if key.startswith("milestone/")}
        assert milestones == milestone_points(report)
        reached = metrics["milestones_reached"]
        assert reached[0] == (0, 0.0) and reached[-1] == (60, float(sum(m.step is not None for m in report.milestones)))
        assert [step for step, _ in reached] == sorted({step for step, _ in reached})
        assert [a.name for a in run.artifacts] == ["result.json", "evaluation.json", "milestones.png"]
        if report.notes:
            assert tags["notes"].splitlines() == report.notes and run.description.startswith(report.notes[0])
    assert any("mcu_arms.notes" in run.tags for run in export.episodes)  # the random arm's inputs without effect


def test_the_verdicts_are_the_parent_run(project: Path) -> None:
    parent = export_of(project).comparison
    assert parent.kind == "comparison" and parent.run_id == f"comparison:{EXPERIMENT}"
    assert parent.tags["mcu_arms.verdict"] == "comparable: differs only in agent"
    assert parent.tags["mcu_arms.baseline"] == "scripted_arm" and parent.tags["mcu_arms.differing"] == "agent"
    assert "not resolved (paired, n = 2)" in parent.tags["mcu_arms.differences"]
    metrics = {point.key: point.value for point in parent.metrics}
    assert metrics["comparable"] == 1.0 and metrics["difference/random_arm/score"] == -50.0
    assert [a.name for a in parent.artifacts] == ["comparison.json", "comparison.md", "milestones.png"]


def test_a_secret_never_leaves_in_the_export(project: Path) -> None:
    """The baseline's API key: masked in its params and tags, absent from every file the export uploads."""
    export = export_of(project)
    assert SECRET in (project / "arms" / "scripted_arm.toml").read_text()
    assert SECRET not in export.model_dump_json()
    baseline = next(run for run in export.episodes if run.tags["mcu_arms.arm"] == "scripted_arm")
    assert baseline.params["env.TRACKING_TEST_API_KEY"].startswith("***")
    for run in [export.comparison, *export.episodes]:
        for artifact in run.artifacts:
            if artifact.source is not None:
                assert SECRET not in Path(artifact.source).read_text(encoding="utf-8"), artifact.source


@pytest.mark.parametrize(
    ("value", "says"),
    [("neptune", "not a tracker"), ("mlflow=", "names no destination"), ("=x", "not a tracker")],
)
def test_a_bad_destination_is_a_user_error(value: str, says: str) -> None:
    with pytest.raises(UserError) as raised:
        parse_destination(value)
    assert says in raised.value.message and raised.value.key == "--to"


def test_a_missing_extra_is_named_before_anything_is_compared(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed: find_spec finds nothing, import fails
    done = invoke(project, {}, "compare", CAMPAIGN, "--to", "mlflow")
    assert done.exit_code == 2, done.out + done.err
    assert "needs the 'mlflow' extra" in done.err and "pip install 'mcu-arms[mlflow]'" in done.err
    assert "Traceback" not in done.out + done.err


def test_an_unreachable_tracking_server_is_a_user_error_naming_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install 'mcu-arms[mlflow]')")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own retries would take minutes
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    closed = f"http://127.0.0.1:{free_port()}"
    done = invoke(project, {}, "compare", CAMPAIGN, "--to", f"mlflow={closed}")
    assert done.exit_code == 2, done.out + done.err
    assert "MLflow refused the export" in done.err and closed in done.err and "--to" in done.err
    assert "Traceback" not in done.out + done.err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_notebook_writes_the_same_offline_runs(project: Path) -> None:
    """mcu_arms.results.to_wandb: what `compare --to wandb=DIR` writes, returned as what it did."""
    pytest.importorskip("wandb", reason="the wandb extra is not installed (pip install 'mcu-arms[wandb]')")
    from mcu_arms.results import to_wandb

    outcome = to_wandb([CAMPAIGN], project, directory="tracked")
    assert (outcome.experiment, len(outcome.created), outcome.updated) == (EXPERIMENT, 5, [])
    assert len(list((project / "tracked" / "wandb").glob("offline-run-*"))) == 5
    assert len(to_wandb([CAMPAIGN], project, directory="tracked").unchanged) == 5


# MLflow: a real tracking server, read back through its client.

# In MLflow's comparison view: its assistant panel and sidebar closed, and only the params that differ shown.
SHOW_THE_DIFFERENCE = """(() => {
  const button = label => [...document.querySelectorAll('button')].find(b => b.getAttribute('aria-label') === label);
  for (const label of ['Close', 'Toggle sidebar', 'Parameters - Show diff only']) button(label)?.click();
  return true;
})()"""


def _snapshot(client: Any, experiment_id: str) -> dict[str, Any]:
    """Everything the export wrote, per run: params, tags, metric histories, artifacts with sizes."""
    from mlflow.entities import ViewType

    runs = client.search_runs([experiment_id], run_view_type=ViewType.ALL)
    shot = {}
    for run in runs:
        histories = {
            key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
            for key in run.data.metrics
        }
        shot[run.info.run_id] = {
            "params": dict(run.data.params),
            "tags": dict(run.data.tags),
            "metrics": histories,
            "artifacts": sorted((a.path, a.file_size) for a in client.list_artifacts(run.info.run_id)),
            "status": run.info.status,
            "start": run.info.start_time,
            "end": run.info.end_time,
            "lifecycle": run.info.lifecycle_stage,
        }
    return shot


def _export(project: Path, tracker: str) -> Any:
    """`mcu-arms compare CAMPAIGN --to TRACKER` as a subprocess under strace: none of its sockets leaves loopback."""
    log = project / f"strace-{len(list(project.glob('strace-*')))}.txt"
    command = [sys.executable, "-m", "mcu_arms", "compare", CAMPAIGN, "--to", tracker]
    run = traced(command, project, cli_env(project), log)
    assert run.done.returncode == 0, run.done.stdout[-3000:] + run.done.stderr[-3000:]
    assert run.outside_loopback() == [], f"sockets outside loopback: {run.outside_loopback()}"
    return run


needs_strace = pytest.mark.skipif(STRACE is None, reason="strace is needed to check that no socket leaves loopback")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """One tracking server for the module (its start costs a minute or more on a loaded host)."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install 'mcu-arms[mlflow]')")
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as started:
        yield started


@pytest.mark.slow
@needs_strace
@pytest.mark.timeout(1200)
def test_an_mlflow_export_reads_back_as_the_reports_say_and_a_second_changes_nothing(
    project: Path, tmp_path: Path, server: MlflowServer
) -> None:
    import mlflow

    first = _export(project, f"mlflow={server.url}")
    assert "mlflow: 5 run(s) created, 0 updated, 0 unchanged in experiment 'tiny'" in first.done.stderr
    assert any(address == "127.0.0.1" for address in first.addresses)  # strace saw the export reach the server

    client = mlflow.tracking.MlflowClient(tracking_uri=server.url)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    before = _snapshot(client, experiment.experiment_id)
    by_id = reports(project)
    assert len(before) == len(by_id) + 1
    parents = [rid for rid, run in before.items() if run["tags"].get("mcu_arms.run_id", "").startswith("comparison:")]
    assert len(parents) == 1
    parent = before[parents[0]]
    assert parent["tags"]["mcu_arms.verdict"] == "comparable: differs only in agent"
    assert {path for path, _ in parent["artifacts"]} == {"comparison.json", "comparison.md", "milestones.png"}

    for mlflow_id, run in before.items():
        if mlflow_id == parents[0]:
            continue
        report = by_id[run["tags"][RUN_ID_TAG]]
        assert run["tags"]["mlflow.parentRunId"] == parents[0]
        assert run["tags"]["mcu_arms.arm"] == report.arm and run["tags"]["mcu_arms.seed"] == str(report.settings.seed)
        assert run["tags"]["mcu_arms.git_sha"] == report.provenance.git_sha
        assert run["tags"]["mcu_arms.simulator"] == report.simulator_label
        assert run["params"]["agent"] == report.settings.agent and run["params"]["task"] == report.settings.task
        assert all(SECRET not in value for value in [*run["params"].values(), *run["tags"].values()])
        assert run["metrics"]["score"] == [(60, report.score)]
        assert run["metrics"]["steps_run"] == [(60, 60.0)]
        assert {k: v for k, v in run["metrics"].items() if k.startswith("milestone/")} == milestone_points(report)
        assert run["status"] == "FINISHED" and run["end"] - run["start"] > 0
        assert {path for path, _ in run["artifacts"]} == {"result.json", "evaluation.json", "milestones.png"}
        result = Path(client.download_artifacts(mlflow_id, "result.json", str(tmp_path / mlflow_id)))
        original = project / "output" / report.arm / f"episode_{report.episode:03d}" / "result.json"
        assert json.loads(result.read_text()) == json.loads(original.read_text())

    again = _export(project, f"mlflow={server.url}")
    assert "0 run(s) created, 0 updated, 5 unchanged" in again.done.stderr, again.done.stderr
    assert _snapshot(client, experiment.experiment_id) == before

    episodes = [mlflow_id for mlflow_id in before if mlflow_id != parents[0]]
    client.delete_run(episodes[0])  # deleted in the UI: restored, never written a second time
    client.delete_tag(episodes[1], "mcu_arms.fingerprint")  # a tag removed by hand: set again
    repaired = _export(project, f"mlflow={server.url}")
    assert "0 run(s) created, 2 updated, 3 unchanged" in repaired.done.stderr, repaired.done.stderr
    assert _snapshot(client, experiment.experiment_id) == before


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_mlflow_compares_two_arms_side_by_side_in_its_own_ui(project: Path, server: MlflowServer) -> None:
    """MLflow's comparison view of seed 0 of each arm, in headless Chromium: their params (agent differs), scores
    and milestone steps side by side. Saved to tests/artifacts/mlflow-compare.png (the README shows a copy from
    docs/screenshots/)."""
    import mlflow

    campaign = project / CAMPAIGN  # an experiment of its own on the module's server
    campaign.write_text(campaign.read_text().replace(f'name = "{EXPERIMENT}"', 'name = "scripted_vs_random"'))
    for path in (project / "output").glob("*/episode_*/result.json"):  # its episodes carry the campaign's name
        path.write_text(path.read_text().replace(f'"name": "{EXPERIMENT}"', '"name": "scripted_vs_random"'))
    outcome = invoke(project, {}, "compare", CAMPAIGN, "--to", f"mlflow={server.url}")
    assert outcome.exit_code == 0, outcome.out + outcome.err
    client = mlflow.tracking.MlflowClient(tracking_uri=server.url)
    experiment = client.get_experiment_by_name("scripted_vs_random").experiment_id
    seed0 = {
        run.data.tags["mcu_arms.arm"]: run.info.run_id
        for run in client.search_runs([experiment])
        if run.data.tags.get("mcu_arms.seed") == "0"
    }
    runs = [seed0[arm] for arm in ARMS]
    page = f"{server.url}/#/compare-runs?runs={quote(json.dumps(runs))}&experiments={quote(json.dumps([experiment]))}"
    with start_browser(window=(1400, 2000), timeout=180.0) as browser:  # a loaded host renders MLflow's UI slowly
        browser.open(page)
        shown = "document.body.innerText"
        browser.wait_for(
            f"{shown}.includes('scripted_arm s0') && {shown}.includes('random_arm s0') && "
            f"{shown}.includes('milestone/mine_diamond_from_scratch/mine_log')",
            timeout=120,
        )
        text = browser.run_js(shown)
        assert "scripted" in text and "random" in text and "agent" in text
        browser.run_js(SHOW_THE_DIFFERENCE)
        drawn = "document.querySelector('.js-plotly-plot svg') !== null"  # the parallel coordinates plot
        browser.wait_for(
            f"{drawn} && {shown}.includes('result.json') && !{shown}.includes('compact_limit')", timeout=120
        )
        assert browser.external_requests() == [], browser.external_requests()
        browser.screenshot(ARTIFACTS / "mlflow-compare.png")


# W&B: offline runs, read back from their logs.


@pytest.mark.slow
@needs_strace
@pytest.mark.timeout(900)
def test_wandb_offline_runs_hold_our_settings_and_metrics_and_a_second_export_changes_nothing(project: Path) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed (pip install 'mcu-arms[wandb]')")
    first = _export(project, "wandb")
    assert "wandb: 5 run(s) created" in first.done.stderr, first.done.stderr
    assert first.connects > 0  # strace saw the export talk to wandb-core (a unix socket)
    written = sorted((project / "wandb").glob("offline-run-*"))
    assert len(written) == 5
    runs = [offline_run(path) for path in written]
    export = export_of(project)
    expected = {run.name: run for run in [export.comparison, *export.episodes]}
    assert sorted(run.name for run in runs) == sorted(expected)
    for run in runs:
        mapped = expected[run.name]
        assert run.group == EXPERIMENT and run.job_type == mapped.kind
        assert {key: value for key, value in run.config.items() if key != "mcu_arms"} == mapped.params
        assert run.config["mcu_arms"]["run_id"] == mapped.run_id
        final = {point.key: point.value for point in mapped.metrics}  # the last point of each key
        assert {key: run.summary[key] for key in final} == final
        logged = {
            (entry["_step"], key, value)
            for entry in run.history
            for key, value in entry.items()
            if not key.startswith("_")
        }
        assert logged == {(point.step, point.key, point.value) for point in mapped.metrics}
        assert sorted(run.artifacts) == sorted(a.name for a in mapped.artifacts)
        assert SECRET not in json.dumps(run.config)
        if mapped.kind == "episode":
            assert run.tags == ["episode", mapped.tags["mcu_arms.arm"], f"seed-{mapped.tags['mcu_arms.seed']}"]

    again = _export(project, "wandb")
    assert "0 run(s) created, 0 updated, 5 unchanged" in again.done.stderr, again.done.stderr
    assert again.connects == 0  # nothing to write: wandb was not even started
    assert sorted((project / "wandb").glob("offline-run-*")) == written
