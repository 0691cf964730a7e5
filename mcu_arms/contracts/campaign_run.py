"""One `mcu-arms run` of a campaign, `output/.campaigns/<name>/<run>.json`: the episodes it set out to run (arm ×
seed), written before the first starts, so that `status --campaign` can show the ones still queued and an ETA.

Never rewritten: each run of the campaign writes its own record; status reads the newest.
"""

from __future__ import annotations

from pydantic import BaseModel

CAMPAIGN_RUN_SCHEMA_VERSION = 1


class CampaignCell(BaseModel):
    arm: str
    seed: int
    skipped: bool = False  # an earlier episode of this campaign already finished it with the same fingerprint


class CampaignRun(BaseModel):
    schema_version: int = CAMPAIGN_RUN_SCHEMA_VERSION
    name: str
    run: str  # the CampaignTag.run its episodes carry
    started_at: str
    supervisor_pid: int
    supervisor_create_time: float
    max_parallel: int
    cells: list[CampaignCell]


def clock_text(seconds: float) -> str:
    """A duration as h:mm:ss (m:ss under an hour)."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class CampaignTally(BaseModel):
    """Where a campaign run stands: its episodes by state, and an ETA from the pace observed so far — the time since
    the run started over the work done (episodes ended, plus the share of its steps each running one has done) —
    the same for `status --campaign` and the live view."""

    total: int
    done: int  # finished (this run, or an earlier one it skipped)
    running: int
    queued: int
    failed: int  # failed for good (not to be retried)
    retried: int  # episodes that failed for infrastructure reasons and were run again
    interrupted: int = 0  # stopped (Ctrl-C, `mcu-arms stop`) or left unfinished by a supervisor that is gone
    live: bool = True  # a run is going on: only then is there an ETA
    ended: int  # episodes this run ended (finished or failed): the pace's base
    in_progress: float = 0.0  # the running episodes' share of their steps done, summed
    elapsed_s: float

    @property
    def remaining(self) -> int:
        return max(self.total - self.done - self.failed - self.interrupted, 0)

    @property
    def pace_s(self) -> float | None:
        """Seconds of the run per episode's worth of work, once an episode has ended."""
        return self.elapsed_s / (self.ended + self.in_progress) if self.ended else None

    @property
    def eta_s(self) -> float | None:
        return self.pace_s * max(self.remaining - self.in_progress, 0.0) if self.pace_s is not None else None

    def text(self) -> str:
        head = (
            f"{self.done} of {self.total} done, {self.running} running, {self.queued} queued, {self.failed} failed, "
            + (f"{self.interrupted} interrupted, " if self.interrupted else "")
            + f"{self.retried} retried"
        )
        if not self.remaining:
            return head
        if not self.live:
            return f"{head}; not running (running the campaign again resumes it)"
        if self.pace_s is None:
            return f"{head}; ETA after the first episode ends"
        return f"{head}; ETA {clock_text(self.eta_s or 0)} (pace so far {clock_text(self.pace_s)} per episode)"
