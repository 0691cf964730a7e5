"""mcu-arms: comparison arms of Minecraft agents on the MCU benchmark."""

__version__ = "0.1.0"
