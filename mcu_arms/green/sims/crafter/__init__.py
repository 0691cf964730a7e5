"""The embedded simulator: Crafter behind the MCU interface, always labelled embedded."""
