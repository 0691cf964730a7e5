"""Stand-in for minestudio/simulator/minerl/env/malmo.py (1.1.6): only the process-local instance pool.

InstanceManager.get_instance appends each MinecraftInstance to `_instance_pool` before it launches (malmo.py:226),
and MinecraftInstance._destruct removes it (malmo.py:664), so the pool names every engine this process started
that was not closed, including one still launching.
"""

from __future__ import annotations

from typing import Any


class InstanceManager:
    _instance_pool: list[Any] = []
