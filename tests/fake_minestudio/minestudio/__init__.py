"""A pure-Python stand-in for MineStudio 1.1.6's classes (numpy only), for mcu-arms' tests. Not MineStudio: see
../README.md."""

__version__ = "1.1.6+fake"
