"""mcu-arms: comparison arms of Minecraft agents on the MCU benchmark."""

try:  # written by the build from git (pyproject.toml's [tool.setuptools_scm])
    from mcu_arms._version import version as __version__
except ImportError:  # a source tree never built nor installed
    __version__ = "0.1.0+unknown"
