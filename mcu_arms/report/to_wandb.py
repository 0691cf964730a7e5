"""`compare --to wandb[=DIR]`: a `TrackingExport` written as Weights & Biases offline runs, synced later by the user
(`wandb sync DIR/wandb/offline-run-*`); mcu-arms itself never opens a connection for it.

A run's W&B id is derived from our id, so a later sync lands every export of one episode in one W&B run. Each offline
run keeps `mcu_arms_export.json` (our id and the digest of what was written) among its files: an export finds the
offline runs already written for its ids and writes again only what changed. wandb is imported here, inside the
function, and only by this command; offline mode, no error reporting, no system or git probing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from mcu_arms.environment import Environment
from mcu_arms.report.tracking import TAG_PREFIX, ExportOutcome, TrackedRun, TrackingExport, materialise, missing_extra

WANDB_DIR_ENV = "WANDB_DIR"
WANDB_PROJECT_ENV = "WANDB_PROJECT"
DEFAULT_PROJECT = "mcu-arms"
MARKER_FILE = "mcu_arms_export.json"
# What wandb reads from the environment before anything else: offline, quiet, and no crash reports sent anywhere.
OFFLINE_ENVIRONMENT = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_ERROR_REPORTING": "false"}


def wandb_dir(where: str | None, env: Environment) -> Path:
    """--to wandb=DIR, else $WANDB_DIR, else the project directory; the offline runs go into its wandb/."""
    chosen = Path(where or env.variables.get(WANDB_DIR_ENV) or env.cwd).expanduser()
    return chosen if chosen.is_absolute() else env.cwd / chosen


def wandb_id(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:16]


def written_digests(directory: Path, run_id: str) -> set[str]:
    """The digests of the offline runs already written for `run_id` in `directory`."""
    digests = set()
    for marker in (directory / "wandb").glob(f"offline-run-*-{wandb_id(run_id)}/files/{MARKER_FILE}"):
        try:
            data = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("run_id") == run_id:
            digests.add(str(data.get("digest")))
    return digests


def _import_wandb() -> Any:
    os.environ.update(OFFLINE_ENVIRONMENT)
    try:
        import wandb
    except ImportError:
        raise missing_extra("wandb") from None
    return wandb


def write_wandb(export: TrackingExport, where: str | None, env: Environment) -> ExportOutcome:
    wandb = _import_wandb()
    directory = wandb_dir(where, env)
    directory.mkdir(parents=True, exist_ok=True)
    project = env.variables.get(WANDB_PROJECT_ENV) or DEFAULT_PROJECT
    outcome = ExportOutcome(
        tracker="wandb", destination=str(directory / "wandb"), experiment=export.experiment, excluded=export.excluded
    )
    with tempfile.TemporaryDirectory(prefix="mcu-arms-wandb-") as scratch:
        for run in [export.comparison, *export.episodes]:
            digests = written_digests(directory, run.run_id)
            if run.digest() in digests:
                outcome.unchanged.append(run.run_id)
                continue
            _write_run(wandb, run, export.experiment, project, directory, Path(scratch) / wandb_id(run.run_id))
            (outcome.updated if digests else outcome.created).append(run.run_id)
    return outcome


def _write_run(wandb: Any, run: TrackedRun, group: str, project: str, directory: Path, scratch: Path) -> None:
    settings = wandb.Settings(
        mode="offline",
        console="off",
        silent=True,
        x_disable_stats=True,
        x_disable_meta=True,
        x_disable_machine_info=True,
        disable_git=True,
        disable_code=True,
        x_save_requirements=False,
    )
    ours = {key.removeprefix(TAG_PREFIX): value for key, value in run.tags.items()}
    labels = [run.kind] + ([ours["arm"], f"seed-{ours['seed']}"] if run.kind == "episode" else [])
    handle = wandb.init(
        project=project,
        dir=str(directory),
        id=wandb_id(run.run_id),
        name=run.name,
        group=group,
        job_type=run.kind,
        notes=run.description or None,
        tags=labels,
        config={**run.params, "mcu_arms": ours},
        settings=settings,
        reinit="create_new",
    )
    try:
        by_step: dict[int, dict[str, float]] = defaultdict(dict)
        for metric in run.metrics:
            by_step[metric.step][metric.key] = metric.value
        for step in sorted(by_step):
            handle.log(by_step[step], step=step)
        artifact = wandb.Artifact(f"{run.kind}-{wandb_id(run.run_id)}", type=run.kind)
        for each in run.artifacts:
            artifact.add_file(str(materialise(each, scratch)), name=each.name)
        handle.log_artifact(artifact)
        marker = {"run_id": run.run_id, "digest": run.digest()}
        (Path(handle.dir) / MARKER_FILE).write_text(json.dumps(marker), encoding="utf-8")
    finally:
        handle.finish()
