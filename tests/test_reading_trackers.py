"""`compare --to wandb|mlflow` of reports naming paths out of their episode copies nothing from outside (issue 43).

The tracking fixture's campaign with one episode of each arm made hostile: one report names an absolute path as its
evaluation, the other a `../` path; both lead to a file outside the project holding a marker. Every file the tracker
holds afterwards (W&B: the offline runs and its artifact staging and cache; MLflow: a real `mlflow server`'s
artifact store and database) is searched for the marker: it must be in none, and the hostile episodes are not
exported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tracking_support import FIXTURE, QUIET_MLFLOW, MlflowServer, mlflow_server

CAMPAIGN = "campaigns/tiny.toml"
MARKER = "marker-of-a-file-outside-every-episode"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(FIXTURE, copy)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_text(json.dumps({"secret": MARKER}))
    absolute = copy / "output/scripted_arm/episode_002/result.json"
    climbing = copy / "output/random_arm/episode_002/result.json"
    for report, stored in ((absolute, str(secret / "id_rsa")), (climbing, "../../../../secret/id_rsa")):
        data = json.loads(report.read_text())
        data["evaluation_file"] = stored
        report.write_text(json.dumps(data))
    assert (climbing.parent / "../../../../secret/id_rsa").resolve() == secret / "id_rsa"
    return copy


def _holding_marker(*folders: Path) -> list[str]:
    found = []
    for folder in folders:
        for path in folder.rglob("*") if folder.exists() else []:
            if path.is_file() and not path.is_symlink() and MARKER.encode() in path.read_bytes():
                found.append(str(path))
    return found


def _compare_to(project: Path, tracker: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "WANDB_"))}
    return subprocess.run(
        [sys.executable, "-m", "mcu_arms", "compare", CAMPAIGN, "--to", tracker],
        cwd=project,
        env={**base, **QUIET_MLFLOW, "MCU_ARMS_STATE_DIR": str(project / "state"), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_wandb_export_copies_nothing_from_outside_an_episode(project: Path, tmp_path: Path) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed (pip install 'mcu-arms[wandb]')")
    wandb_home = tmp_path / "wandb-home"
    folders = {"WANDB_DATA_DIR": wandb_home / "data", "WANDB_CACHE_DIR": wandb_home / "cache"}
    done = _compare_to(project, "wandb", {key: str(value) for key, value in folders.items()})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "wandb: 3 run(s) created" in done.stderr, done.stderr  # the comparison and the two readable episodes
    assert len(list((project / "wandb").glob("offline-run-*"))) == 3
    assert _holding_marker(project / "wandb", wandb_home, Path(os.environ.get("TMPDIR", "/tmp")) / "wandb") == []


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install 'mcu-arms[mlflow]')")
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as started:
        yield started


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_an_mlflow_export_copies_nothing_from_outside_an_episode(project: Path, server: MlflowServer) -> None:
    import mlflow

    done = _compare_to(project, f"mlflow={server.url}", {})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "mlflow: 3 run(s) created" in done.stderr, done.stderr
    client = mlflow.tracking.MlflowClient(tracking_uri=server.url)
    experiment = client.get_experiment_by_name("tiny")
    runs = client.search_runs([experiment.experiment_id])
    tags = [run.data.tags for run in runs]
    episodes = {f"{tag['mcu_arms.arm']}/{tag['mcu_arms.episode']}" for tag in tags if "mcu_arms.arm" in tag}
    assert episodes == {"scripted_arm/1", "random_arm/1"}, "the hostile episodes are not exported"
    assert _holding_marker(server.root) == []
