"""`mcu-arms codex-home NAME`: build an arm's isolated CODEX_HOME and print the exports for `eval`.

The exports are exactly the variables `run` gives a codex arm's purple (CodexHome.environment), the pinned HOME
included, so that a codex started by hand in that shell is isolated as the arm is.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import typer

from mcu_arms.arms.spec import ALLOWED, ARM_NAME_PATTERN
from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.contracts.errors import UserError
from mcu_arms.environment import Environment
from mcu_arms.isolation.codex_home import build_codex_home, default_auth, default_root, temporary_dir_reason

# What the older scripts/codex-home.sh exported, for readers coming from it.
SCRIPT_NAMES = {"CODEX_HOME": "CODEX_RUNTIME_HOME", "CODEX_SQLITE_HOME": "CODEX_SQLITE_DIR"}
PINNED_HOME_NOTE = "pinned, as `run` gives the purple (eval in a subshell to keep yours)"

HELP = """Build (or repair) one arm's CODEX_HOME and print the exports `run` gives its purple: eval "$(mcu-arms \
codex-home NAME)".

The exports are CODEX_HOME (codex-home.sh's CODEX_RUNTIME_HOME), CODEX_SQLITE_HOME (its CODEX_SQLITE_DIR) and a \
pinned HOME, so eval them in a subshell to keep your own HOME: ( eval "$(mcu-arms codex-home NAME)"; codex ... ).

The home gets a private session store, auth.json as a symlink to the shared credential (never a copy), empty \
personal-instruction files, mode 0700, and is refused under /tmp. Messages go to stderr.
"""


def export_lines(environment: dict[str, str]) -> list[str]:
    """`export NAME=value` for each variable, with a comment naming what it replaces or why it is set."""
    lines = []
    for name, value in environment.items():
        note = f"replaces codex-home.sh's {SCRIPT_NAMES[name]}" if name in SCRIPT_NAMES else ""
        note = PINNED_HOME_NOTE if name == "HOME" else note
        lines.append(f"export {name}={shlex.quote(value)}" + (f"  # {note}" if note else ""))
    return lines


def refuse_non_codex_arm(name: str, env: Environment) -> None:
    """An arm whose agent is no codex agent never uses a CODEX_HOME: building one would only mislead."""
    from mcu_arms.arms.spec import load_arm
    from mcu_arms.contracts.catalog import CODEX_AGENTS

    path = env.arms_dir / f"{name}.toml"
    if not path.is_file():
        return  # a home for an arm still to be written, or for codex by hand
    agent = load_arm(path).agent
    if agent not in CODEX_AGENTS:
        raise UserError(
            f"arm '{name}' runs agent '{agent}', which does not use codex: it would never read this home",
            path=path,
            key="agent",
            allowed=f"an arm whose agent is {', '.join(sorted(CODEX_AGENTS))}",
        )


def register(app: typer.Typer) -> None:
    @app.command("codex-home", help=HELP)
    @reports_user_errors
    def codex_home(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Arm name: the home is ROOT/NAME."),
        root: Path | None = typer.Option(None, help="Codex root [$MCU_CODEX_ROOT or /var/tmp/mcu-codex-$USER]."),
        auth: Path | None = typer.Option(None, help="Credential to link [$MCU_CODEX_AUTH or ~/.codex/auth.json]."),
    ) -> None:
        env = environment(ctx)
        if not re.fullmatch(ARM_NAME_PATTERN, name):
            raise UserError(f"'{name}' is not a valid arm name", key="NAME", allowed=ALLOWED["name"])
        refuse_non_codex_arm(name, env)
        root_key = "--root" if root is not None else "MCU_CODEX_ROOT"
        root = root or default_root(env.variables)
        reason = temporary_dir_reason(root, env.variables, set_by="--root or MCU_CODEX_ROOT")
        if reason:
            raise UserError(reason, key=root_key)
        try:
            home = build_codex_home(name, root, auth or default_auth(env.variables), env.variables, env.clock())
        except UserError as error:
            if error.key != "codex.auth":
                raise
            # blame the flag or variable the value came from, not an arm file's key
            raise error.at(key="--auth" if auth is not None else "MCU_CODEX_AUTH") from None
        for action in home.actions:
            env.err_console.print(f"[dim]{action}[/]")
        for warning in home.warnings:
            env.err_console.print(f"[yellow]warning:[/] {warning}")
        for line in export_lines(home.environment()):
            env.console.out(line, highlight=False)
