"""Stand-ins for the 1.1.6 callbacks mcu-arms uses (names and constructor signatures as in the real package)."""

from minestudio.simulator.callbacks.callback import MinecraftCallback
from minestudio.simulator.callbacks.commands import CommandsCallback
from minestudio.simulator.callbacks.record import RecordCallback

__all__ = ["MinecraftCallback", "CommandsCallback", "RecordCallback"]
