"""Where the project's own data lives: the MCU task files, the video-evaluation prompts, the templates and the demo
arms that `mcu-arms init` copies.

They are kept at the top of the checkout (`MCU_benchmark/`, `templates/`, `arms/`) and linked into the package as
`mcu_arms/_data/<folder>`; the wheel holds the files themselves (pyproject.toml's package-data). Either way they are
read through importlib.resources, so an installed tool reads its own data from site-packages wherever it is run.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_folder(name: str) -> Path:
    """`mcu_arms/_data/<name>`: a folder of the installed package (never written to)."""
    return Path(str(files("mcu_arms") / "_data" / name))


BENCHMARK_DIR: Path = data_folder("MCU_benchmark")
TASKS_ROOT: Path = BENCHMARK_DIR / "task_configs" / "tasks"
AUTO_EVAL_DIR: Path = BENCHMARK_DIR / "auto_eval"
TEMPLATES_DIR: Path = data_folder("templates")
ARM_TEMPLATE: Path = TEMPLATES_DIR / "arm.toml"
CAMPAIGN_TEMPLATE: Path = TEMPLATES_DIR / "campaign.toml"
DEMO_ARMS_DIR: Path = data_folder("arms")
DEMO_ARMS: tuple[str, ...] = ("demo.toml", "demo_random.toml")
