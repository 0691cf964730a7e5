"""Stretches of work without the cyclic garbage collector: a process's start-up imports, and an analysis.

Both make a great many objects and no cyclic garbage; the collector's passes meanwhile find nothing and rescan
everything the process holds. Imports make long-lived objects: pausing alone would only defer that work to the first
pass after, so at the end of an import window everything they made is frozen (gc.freeze: moved to the permanent
generation, never scanned again) before the collector resumes; at exit everything is unfrozen again, so that an
interpreter teardown that runs (process_exit: a command that does not skip it) finalises what it always did.
Measured for a server: its imports 0.78 -> 0.65 s; an analysis at 2 x 40 seeds a tenth faster. The collector is
always back on when a window ends.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

# Whether this process has registered the unfreeze at exit. A flag, not gc.get_freeze_count(): that walks every
# frozen object.
_unfreeze_registered = False


@contextmanager
def without_cyclic_gc(*, freeze_at_end: bool = False) -> Iterator[None]:
    """The collector paused inside the block and resumed after it; left alone when it was already paused (by an
    enclosing block, or by someone else). `freeze_at_end`: what exists then is frozen before it resumes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if freeze_at_end:
                _unfreeze_at_exit()
                gc.freeze()
            gc.enable()


def _unfreeze_at_exit() -> None:
    global _unfreeze_registered
    if not _unfreeze_registered:
        atexit.register(gc.unfreeze)  # runs before process_exit's handler, which is registered first
        _unfreeze_registered = True


def imports_without_gc() -> AbstractContextManager[None]:
    """A start-up import window: the collector paused, and what the imports made frozen out of its sight after."""
    return without_cyclic_gc(freeze_at_end=True)
