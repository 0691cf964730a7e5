"""`mcu-arms new` (not yet built)."""

import typer


def register(app: typer.Typer) -> None:
    """Nothing to register yet."""
