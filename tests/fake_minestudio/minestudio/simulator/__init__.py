"""Stand-in for `minestudio.simulator`: MinecraftSim over a deterministic fake world (see world.py)."""

from minestudio.simulator.control import control, reset_control
from minestudio.simulator.entry import MinecraftSim

__all__ = ["MinecraftSim", "control", "reset_control"]
