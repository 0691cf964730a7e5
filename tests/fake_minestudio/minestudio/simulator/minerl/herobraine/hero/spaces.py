"""Stand-in for minestudio/simulator/minerl/herobraine/hero/spaces.py (1.1.6): only `Text`, the space that decides
whether MinecraftSim can be built at all. The real Text.__init__ passes `np.unicode_`, which numpy 2 removed, so under
numpy 2 every MinecraftSim construction raises AttributeError (spaces.py:489).

The stand-in models the host's numpy by FAKE_MINESTUDIO_NUMPY (default "1": a host as 1.1.6's pins install it; "2": a
host where numpy was upgraded later), since the tests themselves may run under either numpy.
"""

from __future__ import annotations

import os

import numpy as np

MODELLED_NUMPY_ENV = "FAKE_MINESTUDIO_NUMPY"


class Text:
    def __init__(self, shape):
        if os.environ.get(MODELLED_NUMPY_ENV, "1") != "1":
            raise AttributeError("`np.unicode_` was removed in the NumPy 2.0 release. Use `np.str_` instead.")
        self.shape = tuple(np.atleast_1d(shape))
        self.dtype = np.dtype(np.str_)
