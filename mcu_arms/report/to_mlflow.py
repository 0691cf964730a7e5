"""`compare --to mlflow[=TRACKING_URI]`: a `TrackingExport` written to an MLflow tracking store.

Each run is looked up by our id (tag `mcu_arms.run_id`) before anything is written: a run found is updated — missing
params and metric points added, changed tags set, artifacts uploaded where missing or different — never duplicated,
so a second export of the same comparison writes nothing. mlflow is imported here, inside the function, and only by
this command; MLflow's usage telemetry is switched off first: the tracking store is the one place this talks to.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.redaction import scrub
from mcu_arms.environment import Environment
from mcu_arms.report.tracking import RUN_ID_TAG, ExportOutcome, TrackedRun, TrackingExport, materialise, missing_extra

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
DEFAULT_STORE = "mlflow.db"  # in the project directory, as `sqlite:///...`: MLflow's own default, made absolute
PARENT_TAG = "mlflow.parentRunId"
DESCRIPTION_TAG = "mlflow.note.content"
# What one log_batch call may carry (MLflow's limits: 1,000 metrics, 100 params, 100 tags).
BATCH = {"metrics": 1000, "params": 100, "tags": 100}


def tracking_uri(where: str | None, env: Environment) -> str:
    """--to mlflow=URI, else $MLFLOW_TRACKING_URI, else a sqlite store in the project directory."""
    return where or env.variables.get(TRACKING_URI_ENV) or f"sqlite:///{env.cwd / DEFAULT_STORE}"


def _import_mlflow() -> Any:
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    try:
        import mlflow.tracking
    except ImportError:
        raise missing_extra("mlflow") from None
    return mlflow


def _refuse_file_store(uri: str) -> None:
    """MLflow 3 no longer writes file stores (a 71-line traceback from inside it): said in one line, before."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("mlflow").split(".", 1)[0])
    except (PackageNotFoundError, ValueError):
        return
    if major >= 3 and (uri.startswith("file:") or "://" not in uri):
        raise UserError(
            f"MLflow {version('mlflow')} does not write file stores",
            key="--to",
            path=scrub(uri),
            allowed=f"a database store: --to mlflow=sqlite:///mlflow.db (the default: sqlite:///{DEFAULT_STORE} in "
            "the project), or a tracking server's http(s):// URL",
        )


def write_mlflow(export: TrackingExport, where: str | None, env: Environment) -> ExportOutcome:
    uri = tracking_uri(where, env)
    _refuse_file_store(uri)
    mlflow = _import_mlflow()
    from mlflow.exceptions import MlflowException

    outcome = ExportOutcome(
        tracker="mlflow", destination=scrub(uri), experiment=export.experiment, excluded=export.excluded
    )
    try:
        client = mlflow.tracking.MlflowClient(tracking_uri=uri)
        experiment_id = _experiment(client, export.experiment, uri)
        with tempfile.TemporaryDirectory(prefix="mcu-arms-mlflow-") as scratch:
            parent_id = _write_run(client, experiment_id, export.comparison, None, Path(scratch), outcome)
            for run in export.episodes:
                _write_run(client, experiment_id, run, parent_id, Path(scratch), outcome)
    except MlflowException as error:
        raise UserError(f"MLflow refused the export: {error.message}", key="--to", path=scrub(uri)) from None
    except OSError as error:
        raise UserError(f"cannot reach the MLflow tracking store: {error}", key="--to", path=scrub(uri)) from None
    return outcome


def _experiment(client: Any, name: str, uri: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is None:
        return client.create_experiment(name)
    if found.lifecycle_stage != "active":
        raise UserError(
            f"experiment '{name}' is deleted in this tracking store",
            key="--to",
            path=scrub(uri),
            allowed="restore it (mlflow experiments restore) or remove it for good",
        )
    return found.experiment_id


def _find(client: Any, experiment_id: str, run_id: str) -> tuple[Any, bool]:
    """The run with our id (None: there is none), and whether it had been deleted (it is restored: never a second)."""
    from mlflow.entities import ViewType

    found = client.search_runs(
        [experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'", run_view_type=ViewType.ALL, max_results=2
    )
    if not found:
        return None, False
    deleted = found[0].info.lifecycle_stage != "active"
    if deleted:
        client.restore_run(found[0].info.run_id)
    return found[0], deleted


def _write_run(
    client: Any, experiment_id: str, run: TrackedRun, parent_id: str | None, scratch: Path, outcome: ExportOutcome
) -> str:
    """Create or update `run`; returns MLflow's id for it."""
    from mlflow.entities import Metric, Param, RunTag

    tags = dict(run.tags)
    if run.description:
        tags[DESCRIPTION_TAG] = run.description
    if parent_id is not None:
        tags[PARENT_TAG] = parent_id
    existing, restored = _find(client, experiment_id, run.run_id)
    if existing is None:
        created = client.create_run(
            experiment_id, start_time=run.started_ms, tags={RUN_ID_TAG: run.run_id}, run_name=run.name
        )
        mlflow_id, params, old_tags, status, end = created.info.run_id, {}, {}, None, None
    else:
        mlflow_id, params, old_tags = existing.info.run_id, existing.data.params, existing.data.tags
        status, end = existing.info.status, existing.info.end_time
    timestamp = run.ended_ms or run.started_ms or 0
    new_params = [Param(key, value) for key, value in run.params.items() if key not in params]
    new_tags = [RunTag(key, value) for key, value in tags.items() if old_tags.get(key) != value]
    new_metrics = (
        _missing_points(client, mlflow_id, run, timestamp, Metric)
        if existing is not None
        else [Metric(m.key, m.value, timestamp, m.step) for m in run.metrics]
    )
    for start in range(0, len(new_params), BATCH["params"]):
        client.log_batch(mlflow_id, params=new_params[start : start + BATCH["params"]])
    for start in range(0, len(new_tags), BATCH["tags"]):
        client.log_batch(mlflow_id, tags=new_tags[start : start + BATCH["tags"]])
    for start in range(0, len(new_metrics), BATCH["metrics"]):
        client.log_batch(mlflow_id, metrics=new_metrics[start : start + BATCH["metrics"]])
    uploaded = _upload_artifacts(client, mlflow_id, run, scratch)
    finished = status != "FINISHED" or (run.ended_ms is not None and end != run.ended_ms)
    if finished:
        client.set_terminated(mlflow_id, status="FINISHED", end_time=run.ended_ms)
    if existing is None:
        outcome.created.append(run.run_id)
    elif restored or new_params or new_tags or new_metrics or uploaded or finished:
        outcome.updated.append(run.run_id)
    else:
        outcome.unchanged.append(run.run_id)
    return mlflow_id


def _missing_points(client: Any, mlflow_id: str, run: TrackedRun, timestamp: int, metric: Any) -> list[Any]:
    """The run's metric points (key, step, value) that the tracked run does not hold yet."""
    held: dict[str, set[tuple[int, float]]] = {}
    missing = []
    for point in run.metrics:
        if point.key not in held:
            held[point.key] = {(m.step, m.value) for m in client.get_metric_history(mlflow_id, point.key)}
        if (point.step, point.value) not in held[point.key]:
            missing.append(metric(point.key, point.value, timestamp, point.step))
    return missing


def _upload_artifacts(client: Any, mlflow_id: str, run: TrackedRun, scratch: Path) -> bool:
    """Upload each artifact that the run lacks or holds at another size; returns whether any was uploaded."""
    held = {info.path: info.file_size for info in client.list_artifacts(mlflow_id)}
    uploaded = False
    folder = scratch / mlflow_id
    for artifact in run.artifacts:
        path = materialise(artifact, folder)
        if held.get(artifact.name) != path.stat().st_size:
            client.log_artifact(mlflow_id, str(path))
            uploaded = True
    return uploaded
