"""The optional `view` extra (jinja2, plotly): found without importing it, and named with its install command.

plotly is never imported: the pages use plotly.js, the file its wheel ships (`plotly/package_data/plotly.min.js`),
copied next to the pages, so nothing is fetched at view time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mcu_arms.contracts.errors import UserError

VIEW_EXTRA_PACKAGES: tuple[str, ...] = ("jinja2", "plotly")
INSTALL_HINT = "pip install -e '.[view]' in a checkout, or pip install 'mcu-arms[view]'"
PLOTLY_JS = Path("package_data") / "plotly.min.js"


def _package_dir(name: str) -> Path | None:
    """The installed package's folder, found without running its __init__ (None when it is not installed)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def missing_view_packages() -> list[str]:
    return [name for name in VIEW_EXTRA_PACKAGES if _package_dir(name) is None]


def require_view_extra() -> None:
    missing = missing_view_packages()
    if missing:
        raise UserError(
            f"the results browser needs {' and '.join(missing)}, from the optional extra 'view': {INSTALL_HINT}"
        )
    plotly_js()


def plotly_js() -> Path:
    """plotly.js as the plotly wheel ships it."""
    folder = _package_dir("plotly")
    path = folder / PLOTLY_JS if folder is not None else None
    if path is None or not path.is_file():
        raise UserError(f"the plotly package has no {PLOTLY_JS} (reinstall it: {INSTALL_HINT})", path=folder)
    return path
