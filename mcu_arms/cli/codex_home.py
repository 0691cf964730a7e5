"""`mcu-arms codex-home NAME`: build an arm's isolated CODEX_HOME and print the exports for `eval`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Optional

import typer

from mcu_arms.arms.spec import ALLOWED, ARM_NAME_PATTERN
from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.contracts.errors import UserError
from mcu_arms.isolation.codex_home import build_codex_home, default_auth, default_root


def register(app: typer.Typer) -> None:
    @app.command("codex-home")
    @reports_user_errors
    def codex_home(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Arm name: the home is ROOT/NAME."),
        root: Optional[Path] = typer.Option(None, help="Codex root [$MCU_CODEX_ROOT or /var/tmp/mcu-codex-$USER]."),
        auth: Optional[Path] = typer.Option(None, help="Credential to link [$MCU_CODEX_AUTH or ~/.codex/auth.json]."),
    ) -> None:
        """Build (or repair) one arm's CODEX_HOME and print export lines: eval "$(mcu-arms codex-home NAME)".

        The home gets a private session store, auth.json as a symlink to the shared credential (never a copy),
        empty personal-instruction files, mode 0700, and is refused under /tmp. Messages go to stderr.
        """
        env = environment(ctx)
        if not re.fullmatch(ARM_NAME_PATTERN, name):
            raise UserError(f"'{name}' is not a valid arm name", key="NAME", allowed=ALLOWED["name"])
        home = build_codex_home(
            name, root or default_root(env.env), auth or default_auth(env.env), env.env, env.clock()
        )
        for action in home.actions:
            env.err_console.print(f"[dim]{action}[/]")
        for warning in home.warnings:
            env.err_console.print(f"[yellow]warning:[/] {warning}")
        for key in ("CODEX_HOME", "CODEX_SQLITE_HOME"):
            env.console.out(f"export {key}={shlex.quote(home.environment()[key])}", highlight=False)
