"""A process's start-up imports without the cyclic garbage collector.

Importing the heavy stack (a2a, pydantic models, the servers) creates hundreds of thousands of long-lived objects and
no garbage; the collector's passes meanwhile find nothing, rescan all of them, and cost about 7 % of the import
time (~50 ms for a server), paid by each process of every episode. The collector runs again as soon as the imports
are done: a process never runs its work without it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0  # nested windows: the collector comes back when the outermost ends


@contextmanager
def imports_without_gc() -> Iterator[None]:
    """Imports inside the block run with the collector paused (left as it was when someone else had paused it)."""
    global _depth
    paused_here = _depth == 0 and gc.isenabled()
    if paused_here:
        gc.disable()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if paused_here:
            gc.enable()
