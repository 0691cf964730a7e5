"""Where the project's own data lives: the MCU task files, the video-evaluation prompts and the templates.

They sit at the top of the checkout (`MCU_benchmark/`, `templates/`), beside the package, as the project was laid
out; every module finds them here instead of counting parent directories itself.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT: Path = Path(__file__).resolve().parents[2]
BENCHMARK_DIR: Path = PROJECT_ROOT / "MCU_benchmark"
TASKS_ROOT: Path = BENCHMARK_DIR / "task_configs" / "tasks"
AUTO_EVAL_DIR: Path = BENCHMARK_DIR / "auto_eval"
TEMPLATES_DIR: Path = PROJECT_ROOT / "templates"
ARM_TEMPLATE: Path = TEMPLATES_DIR / "arm.toml"
