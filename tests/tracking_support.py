"""For the tracker tests: a real MLflow tracking server on loopback, a reader of W&B offline runs, and a record of
every socket address a command and all its children connect or send to (strace), to check that none left loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from server_procs import HOST, free_port, wait_until

from mcu_arms.process.procs import stop_process_group

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tracking_campaign"
# It imports mlflow twice and creates the sqlite schema: 2.5 min, measured at load 18 on 2 cores.
SERVER_READY_S = 480.0
QUIET_MLFLOW = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}


@dataclass
class MlflowServer:
    url: str
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _healthy(server: MlflowServer) -> bool:
    if server.process.poll() is not None:
        raise AssertionError(f"mlflow server exited with {server.process.returncode}:\n{server.log_text()[-4000:]}")
    try:
        return httpx.get(f"{server.url}/health", timeout=2.0, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def mlflow_server(root: Path) -> Iterator[MlflowServer]:
    """`mlflow server` on 127.0.0.1 with a sqlite store and an artifact folder in `root`; stopped by its pid."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = root / "server.log"
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=root,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **QUIET_MLFLOW},
        )
    server = MlflowServer(url=f"http://{HOST}:{port}", root=root, process=process, log=log)
    created = psutil.Process(process.pid).create_time()
    try:
        wait_until(lambda: _healthy(server), SERVER_READY_S, "the mlflow server's /health", interval_s=0.5)
        yield server
    finally:
        stop_process_group(process.pid, created, popen=process)


# strace: every connect/sendto/sendmsg with an address, of the command and every process it starts.

STRACE = shutil.which("strace")
_ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"\)')


@dataclass
class Traced:
    done: subprocess.CompletedProcess[str]
    addresses: list[str] = field(default_factory=list)  # every IP address connected or sent to
    connects: int = 0  # connect calls seen, of any family: none would mean strace saw nothing

    def outside_loopback(self) -> list[str]:
        outside = []
        for text in self.addresses:
            address = ipaddress.ip_address(text)
            mapped = getattr(address, "ipv4_mapped", None)
            if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
                outside.append(text)
        return outside


def traced(command: list[str], cwd: Path, env: dict[str, str], log: Path, timeout: float = 600) -> Traced:
    """Run `command` under strace -f (all its children too), recording the addresses of its sockets."""
    assert STRACE is not None
    done = subprocess.run(
        [STRACE, "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o", str(log), *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = log.read_text(errors="replace").splitlines()
    addresses = [a or b for line in lines for a, b in _ADDRESS.findall(line)]
    return Traced(done=done, addresses=addresses, connects=sum(" connect(" in line for line in lines))


# W&B offline runs: `run-<id>.wandb` is a log of protobuf Records in 32 KiB blocks (LevelDB's log format, W&B header).

WANDB_HEADER = 7  # ":W&B", a 2-byte magic, a version byte
BLOCK = 32 * 1024
CHUNK_HEADER = 7  # crc32 (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    records, payload, position = [], b"", WANDB_HEADER
    while position + CHUNK_HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < CHUNK_HEADER:
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + CHUNK_HEADER])
        if kind == 0 and length == 0:
            position += left
            continue
        payload += data[position + CHUNK_HEADER : position + CHUNK_HEADER + length]
        position += CHUNK_HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            records.append(record)
            payload = b""
    return records


@dataclass
class OfflineRun:
    run_id: str
    group: str
    job_type: str
    name: str
    notes: str
    tags: list[str]
    config: dict[str, Any]
    summary: dict[str, Any]
    history: list[dict[str, Any]]  # one dict per logged step, with `_step`
    artifacts: list[str]  # the file names of its logged artifacts


def offline_run(run_dir: Path) -> OfflineRun:
    """What an offline run holds, read back from its .wandb log."""
    import json

    (log,) = run_dir.glob("run-*.wandb")
    run, summary, history, artifacts = None, {}, [], []
    for record in wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
        elif kind == "summary":
            for item in record.summary.update:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                summary[key] = json.loads(item.value_json)
        elif kind == "history":
            history.append(
                {
                    "/".join(i.nested_key) if i.nested_key else i.key: json.loads(i.value_json)
                    for i in record.history.item
                }
            )
        elif kind == "artifact":
            artifacts += [entry.path for entry in record.artifact.manifest.contents]
    assert run is not None, f"no run record in {log}"
    config = {item.key: json.loads(item.value_json) for item in run.config.update if item.key != "_wandb"}
    return OfflineRun(
        run_id=run.run_id,
        group=run.run_group,
        job_type=run.job_type,
        name=run.display_name,
        notes=run.notes,
        tags=list(run.tags),
        config=config,
        summary=summary,
        history=history,
        artifacts=artifacts,
    )
