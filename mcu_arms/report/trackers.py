"""Where `compare --to` sends an export: the one module that knows both writers, above the mapping (tracking.py)
that each writer reads, so that neither the mapping nor a writer imports the other."""

from __future__ import annotations

from mcu_arms.environment import Environment
from mcu_arms.report.tracking import Compared, ExportOutcome, TrackerName, tracking_export


def export_to(
    tracker: TrackerName, where: str | None, comparison: Compared, experiment: str, env: Environment
) -> ExportOutcome:
    """Write the export to `tracker`; its library is imported by its writer only, here and now."""
    export = tracking_export(comparison, experiment)
    if tracker == "mlflow":
        from mcu_arms.report.to_mlflow import write_mlflow

        return write_mlflow(export, where, env)
    from mcu_arms.report.to_wandb import write_wandb

    return write_wandb(export, where, env)
