"""A process's start-up imports without the cyclic garbage collector, and what they made frozen out of its sight.

Importing the heavy stack (a2a, pydantic models, the servers) creates hundreds of thousands of long-lived objects and
no garbage. The collector's passes meanwhile find nothing and rescan all of them; pausing it alone would only defer
that work to the first pass after. So once the imports are done, everything they made is frozen (gc.freeze: moved to
the permanent generation, never scanned again) and the collector runs on as before, over what the process makes
from then on. Measured for a server: its imports 0.78 -> 0.65 s, and every later full pass cheaper. The collector is
always back on before the process does its work, and at exit everything is unfrozen again, so that an interpreter
teardown that runs (process_exit: a command that does not skip it) finalises what it always did.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0  # nested windows: the collector comes back when the outermost ends


@contextmanager
def imports_without_gc() -> Iterator[None]:
    """Imports inside the block run with the collector paused; at the outermost block's end what exists is frozen and
    the collector resumes (left alone when someone else had paused it)."""
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
            if not gc.get_freeze_count():
                atexit.register(gc.unfreeze)  # runs before process_exit's handler, which is registered first
            gc.freeze()
            gc.enable()
