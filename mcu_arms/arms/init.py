"""`mcu-arms init [DIR]`: a research project of one's own — the demo pair of arms, a campaign of them that resolves,
a settings file, and a .gitignore for what runs write — next to the user's agent, not in the tool's checkout.

Never writes over anything: every file it would write is checked first, and if one exists nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.project import SETTINGS_FILE
from mcu_arms.contracts.resources import CAMPAIGN_TEMPLATE, DEMO_ARMS, DEMO_ARMS_DIR

CAMPAIGN_NAME = "demo"
SETTINGS_TEXT = """\
# mcu-arms project settings: every mcu-arms command run in this folder or below it uses them (found the way git
# finds .git). A flag or an environment variable wins over a setting here; `mcu-arms plan --verbose` shows each
# setting in force and where it came from. Relative paths are taken from this folder.

arms_dir = "arms"                       # the arm files: --arm NAME, new NAME [$MCU_ARMS_ARMS_DIR]
output_dir = "output"                   # where runs are written and read [$MCU_ARMS_OUTPUT_DIR]
# state_dir = "/var/tmp/mcu-arms-me"    # host-wide state: ports, locks; local disk [$MCU_ARMS_STATE_DIR]
# codex_root = "/var/tmp/mcu-codex-me"  # the codex agents' homes, never under /tmp [$MCU_CODEX_ROOT]
"""
GITIGNORE_TEXT = """\
# what mcu-arms runs write: episodes, the links to their logs, experiment-tracker exports
/output/
/logs/
/mlruns/
/mlflow.db
/wandb/
"""


class InitResult(BaseModel):
    project: str
    written: list[str]
    next_commands: list[str]


def _campaign_text() -> str:
    """The campaign template as it is (its baseline and variant are the demo pair), named for the project."""
    text = CAMPAIGN_TEMPLATE.read_text(encoding="utf-8")
    return text.replace('name = "my_campaign"', f'name = "{CAMPAIGN_NAME}"', 1)


def project_files() -> dict[str, str]:
    """Each file `init` writes, by its path in the project, and its text."""
    files = {f"arms/{name}": (DEMO_ARMS_DIR / name).read_text(encoding="utf-8") for name in DEMO_ARMS}
    files[f"campaigns/{CAMPAIGN_NAME}.toml"] = _campaign_text()
    files[SETTINGS_FILE] = SETTINGS_TEXT
    files[".gitignore"] = GITIGNORE_TEXT
    return files


def init_project(directory: Path, shown: str) -> InitResult:
    """Write the project's files into `directory` (created if missing); `shown` is how the user named it."""
    files = project_files()
    if directory.exists() and not directory.is_dir():
        raise UserError("is not a directory: a project is made in a folder", path=directory)
    existing = sorted(name for name in files if (directory / name).exists() or (directory / name).is_symlink())
    if existing:
        raise UserError(
            f"already exists, so nothing was written: {', '.join(existing)}",
            path=directory,
            allowed="an empty folder, or one without these files",
        )
    for name, text in files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("x", encoding="utf-8") as written:  # "x": a file that appeared meanwhile is not replaced
            written.write(text)
    enter = [] if shown in ("", ".") else [f"cd {shown}"]
    return InitResult(
        project=str(directory),
        written=list(files),
        next_commands=[
            *enter,
            "mcu-arms plan --dry-run",
            f"mcu-arms run campaigns/{CAMPAIGN_NAME}.toml",
            f"mcu-arms compare campaigns/{CAMPAIGN_NAME}.toml",
        ],
    )
