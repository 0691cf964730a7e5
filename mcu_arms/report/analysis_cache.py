"""The Analysis, cached per set of episodes: `view`'s index requests and `report --html` read it back instead of
recomputing it while nothing it depends on has changed.

The key hashes everything `analyse` reads: the question (the items and every option: baseline, --run, ...), the analysis
code (its schema version and the bytes of report/analysis.py, stats.py and methods/), every arm and campaign file in
arms/ and each one named, and per arm every episode dir with its report's bytes. A report that changes, appears or
goes gives another key. The cache is a file per key in output/.analysis-cache/ (a dot-name: never taken for an arm),
written to a temporary file and renamed into place: a reader sees a whole file or none. It holds only what can be
recomputed, so an unreadable or invalid one is ignored and rebuilt, and the oldest beyond CACHE_KEEP are removed.
A process that read or wrote a cache file keeps its Analysis while the file is unchanged (the views never modify it).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_REPORT_BYTES
from mcu_arms.contracts.reading import read_bounded
from mcu_arms.environment import Environment
from mcu_arms.layout import run_dirs
from mcu_arms.report.analysis import ANALYSIS_SCHEMA_VERSION, Analysis, analyse, resolve_targets

CACHE_DIR_NAME = ".analysis-cache"
CACHE_KEEP = 32  # cached analyses kept per output dir; the least recently written go first
CACHE_SUFFIX = ".analysis.json"
MEMORY_KEEP = 4  # analyses also kept in this process's memory, by cache file
_MEMORY: dict[Path, tuple[tuple[int, int, int], Analysis]] = {}
_CODE = Path(__file__).resolve().parents[1]  # the package: what computes an Analysis, keyed by its source
_CODE_FILES = (
    "report/analysis.py",
    "report/analysis_model.py",
    "report/experiments.py",
    "report/differences.py",
    "stats",
)


def _code_digest() -> str:
    digest = hashlib.sha256(f"schema {ANALYSIS_SCHEMA_VERSION}".encode())
    for name in _CODE_FILES:
        path = _CODE / name
        for source in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def _file_bytes(path: Path) -> bytes:
    """A file's bytes, or a marker for one that is absent or unreadable (it then reads as a change, not a crash)."""
    try:
        return path.read_bytes() if path.is_file() else b"\0absent"
    except OSError as error:
        return f"\0unreadable {error.errno}".encode()


def _report_bytes(path: Path) -> bytes:
    """A report's bytes, read within its bound (contracts/reading.py); one refused (too large, a link, absent) is
    keyed by why and by its size and time, never read whole."""
    try:
        return read_bounded(path, MAX_REPORT_BYTES, "run report")
    except UserError as error:
        try:
            found = path.lstat()
        except OSError:
            return b"\0absent"
        return f"\0refused {error.message} {found.st_ino} {found.st_size} {found.st_mtime_ns}".encode()


def analysis_key(items: list[str], env: Environment, options: dict[str, Any]) -> str:
    """The hash of the question, the analysis code and every file the analysis of these episodes reads."""
    digest = hashlib.sha256(_code_digest().encode())
    digest.update(json.dumps([items, options], sort_keys=True, default=str).encode())
    sources = sorted(env.arms_dir.glob("*.toml")) if env.arms_dir.is_dir() else []
    targets = resolve_targets(items, env)
    sources += [target.source for target in targets if target.source is not None]
    for source in sources:
        digest.update(str(source).encode() + b"\0" + _file_bytes(source))
    for target in targets:
        digest.update(f"\0arm {target.name} {target.campaign} {target.output_dir}".encode())
        for run in run_dirs(target.output_dir):
            report = _report_bytes(run.report)
            digest.update(f"\0{run.path.name} ".encode() + hashlib.sha256(report).digest())
    return digest.hexdigest()


def cache_dir(env: Environment) -> Path:
    return env.output_dir / CACHE_DIR_NAME


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.lstat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns) if path.is_file() and not path.is_symlink() else None


def _read(path: Path) -> Analysis | None:
    """The cached Analysis at `path`: from this process's memory while the file is the one it was read from or
    written as (a long-running `view` then pays only for the key), else parsed and validated."""
    signature = _signature(path)
    if signature is None:
        return None
    remembered = _MEMORY.get(path)
    if remembered is not None and remembered[0] == signature:
        return remembered[1]
    try:
        found = Analysis.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None  # corrupt, truncated or of another schema: recomputed and rewritten
    _remember(path, signature, found)
    return found


def _remember(path: Path, signature: tuple[int, int, int], result: Analysis) -> None:
    _MEMORY.pop(path, None)
    _MEMORY[path] = (signature, result)
    while len(_MEMORY) > MEMORY_KEEP:
        _MEMORY.pop(next(iter(_MEMORY)))


def _write(directory: Path, path: Path, result: Analysis) -> None:
    """Atomic: a temporary file of this process renamed onto the key's name. A cache that cannot be written (a
    read-only output dir) only costs the next reader a recomputation."""
    temporary = directory / f".{path.name}.{os.getpid()}.tmp"
    if not directory.parent.is_dir() or directory.is_symlink():
        return  # no output dir is made to hold a cache; a link we did not make is never followed
    try:
        directory.mkdir(exist_ok=True)
        temporary.write_text(result.model_dump_json(), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        return
    signature = _signature(path)
    if signature is not None:
        _remember(path, signature, result)
    _prune(directory)


def _prune(directory: Path) -> None:
    cached = [p for p in directory.glob(f"*{CACHE_SUFFIX}") if p.is_file() and not p.is_symlink()]
    if len(cached) <= CACHE_KEEP:
        return
    cached.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in cached[CACHE_KEEP:]:
        stale.unlink(missing_ok=True)


def cached_analysis(
    items: list[str], env: Environment, *, compute: Callable[..., Analysis] | None = None, **options: Any
) -> Analysis:
    """`analyse(items, env, **options)`: read back when its key's cache file is valid, else computed (by `compute`,
    `analyse` by default) and cached. Errors (an unknown arm, an ambiguous experiment) are never cached."""
    key = analysis_key(items, env, options)
    directory = cache_dir(env)
    path = directory / f"{key}{CACHE_SUFFIX}"
    found = _read(path)
    if found is not None:
        return found
    result = (compute or analyse)(items, env, **options)
    _write(directory, path, result)
    return result
