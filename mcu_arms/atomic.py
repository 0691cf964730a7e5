"""Writing files that someone may be reading at the same moment (a live view, `status`, a crash mid-write)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def write_text_atomic(path: Path, text: str) -> None:
    """A reader never sees half a file: write a temporary file beside it, flush it to disk, rename it over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def write_json_atomic(path: Path, data: BaseModel | Any) -> None:
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
    write_text_atomic(path, text + "\n")
