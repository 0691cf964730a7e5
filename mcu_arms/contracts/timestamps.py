"""The three ways the project writes a moment: in reports (ISO, seconds), in log lines (ISO, milliseconds, Z), and
in the names of files moved aside (compact, sortable). Always UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_seconds(moment: datetime | None = None) -> str:
    """For reports: `2026-12-01T08:43:00+00:00`."""
    return (moment or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="seconds")


def log_stamp(moment: datetime | None = None) -> str:
    """For log lines: `2026-12-01T08:43:00.123Z`."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def terminal_stamp(moment: datetime | None = None) -> str:
    """For lines a person reads on a terminal as they come: the local time of day, `09:43:00` (log files keep
    log_stamp's full UTC time)."""
    return (moment or datetime.now(UTC)).astimezone().strftime("%H:%M:%S")


def file_stamp(moment: datetime) -> str:
    """For names of files moved aside: `20261201T084300`."""
    return moment.strftime("%Y%m%dT%H%M%S")
