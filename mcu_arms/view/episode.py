"""One task of one run, as the episode page shows it: timelines, frames, the agent's turns, and what went wrong.

Everything is read through the contracts (StepRecord, TaskMetrics, RunReport, EpisodeReport, TurnRecord); nothing
is recomputed that a report already says. The page gets an `EpisodeView` (small: downsampled series, the frame
index, one line per turn); per-step details, each turn's files and the agent's memory files are separate payloads
the page loads when it needs them, so a 12,000-step episode opens as fast as a short one.
"""

from __future__ import annotations

import os
import stat
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from mcu_arms.contracts.agent_report import (
    EPISODE_REPORT_NAME,
    TURN_ACTIONS_FILE,
    TURN_EVENTS_FILE,
    TURN_FRAMES_DIR,
    TURN_PROMPT_FILE,
    TURN_STDERR_FILE,
    TURNS_DIR,
    EpisodeReport,
    TurnRecord,
    agent_messages,
    read_episode_report,
)
from mcu_arms.contracts.catalog import CODEX_AGENTS
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.evaluation import TaskMetrics
from mcu_arms.contracts.run_report import RunReport, task_trouble
from mcu_arms.contracts.simulators import label_of
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES, OPEN_STATUSES
from mcu_arms.contracts.steps import (
    DEATHS_KEY,
    INVENTORY_KEY,
    VITAL_KEYS,
    JsonlScan,
    StepLogIndex,
    StepRecord,
    frame_step,
)
from mcu_arms.contracts.tasks import load_category
from mcu_arms.layout import RunDir, frames_dir, purple_task_dirs, steps_log, turn_dir, turn_frame
from mcu_arms.view.downsample import Events, Series, change_points, events, minmax_buckets

EPISODE_VIEW_SCHEMA_VERSION = 1
STEP_CHUNK = 500  # steps per lazily loaded detail payload (a page of steps: read from the log by seeking)
SUMMARY_KIND = f"episode-view-{EPISODE_VIEW_SCHEMA_VERSION}"  # the cached summary's kind: a new schema rebuilds it
RECEIVED_SHOWN = 1000  # characters of the agent's reply shown per step (the step log keeps up to 4,000)
TEXT_SHOWN = 64_000  # characters of a turn's prompt or an agent file shown
STDERR_SHOWN = 4_000  # characters of the end of a turn's stderr shown
AGENT_FILES_SHOWN = 200
# A step log at least this large, without a current cached index, is indexed in the background on its first open
# (about 65 ms a MB): the page is drawn from the log's first page of steps meanwhile.
BACKGROUND_INDEX_BYTES = 8 * 1024 * 1024

CountKind = Literal["infrastructure", "behaviour"]


@dataclass(frozen=True)
class EpisodeSource:
    """Where one task of one run is on disk, and what the comparison already knows about it."""

    arm: str
    run_dir: RunDir
    task: str
    report: RunReport
    metrics: TaskMetrics | None
    arm_file: str | None
    purple_task_dir: Path | None = None
    turn_records: list[TurnRecord] = field(default_factory=list)
    purple_episode: EpisodeReport | None = None

    @property
    def green_dir(self) -> Path:
        return self.run_dir.green


class FrameIndex(BaseModel):
    ranges: list[tuple[int, int]]  # runs of consecutive steps that have a frame, inclusive
    count: int
    hint: str | None = None  # how to get frames, when there are none


class TurnMark(BaseModel):
    """One model turn, as the timeline and the turn panel list it (its files come with TurnDetail)."""

    turn: int
    step: int
    session: int
    resumed: bool
    outcome: str
    rc: int | None
    reason: str | None
    latency_s: float
    payload_bytes: int
    actions_queued: int


class CountRow(BaseModel):
    kind: CountKind
    what: str
    count: int
    detail: str = ""


class MilestoneMark(BaseModel):
    identity: str
    step: int | None
    available: bool


class EpisodeView(BaseModel):
    """What the episode page is drawn from (its data.js)."""

    schema_version: int = EPISODE_VIEW_SCHEMA_VERSION
    title: str
    arm: str
    episode: int
    task: str
    agent: str
    simulator: str
    status: str
    steps: int
    first_step: int
    last_step: int
    max_steps: int
    score: float | None
    max_score: float | None
    vitals: dict[str, Series]
    inventory: dict[str, Series]
    reward: Series
    latency: dict[str, Series]
    deaths: Events
    noops: dict[str, Events]
    noop_kinds: dict[str, CountKind]
    milestones: list[MilestoneMark]
    frames: FrameIndex
    takes_turns: bool  # a codex agent: the turn at each step is shown
    turns: list[TurnMark]
    turns_note: str | None = None  # why there are no turns to show
    agent_files: list[str]
    counts: list[CountRow]
    counts_source: str
    alerts: list[str]  # infrastructure trouble, made loud
    notes: list[str]  # agent behaviour worth reading: shown, never alerted
    no_effect: Events  # steps with an input this simulator could not carry out
    chunk_size: int = STEP_CHUNK  # details of steps k*chunk_size .. (k+1)*chunk_size - 1 are in chunk k
    chunks: int
    # Set while the step log is being indexed on its first open: the view is of its first page of steps only, and
    # says so; the page reloads once the index is done.
    indexing: str | None = None


class StepDetail(BaseModel):
    step: int
    received: str | None
    applied: dict[str, Any]  # only the keys that are not at rest (0, [0, 0]); a skill carried out, with its outcome
    noop_cause: str | None
    reason: str
    dropped_keys: list[str]
    adjustments: list[str]
    no_effect: list[str]
    agent_ms: float
    sim_ms: float
    reward: float
    events: list[str]
    info: dict[str, Any]


class TurnDetail(BaseModel):
    turn: int
    step: int
    prompt: str | None
    answer: list[str]
    actions: str | None
    stderr_tail: str | None
    frame: bool  # the frame attached to the turn is there


class AgentFile(BaseModel):
    name: str  # relative to the episode's purple dir
    bytes: int
    text: str
    cut: bool


@dataclass
class EpisodeData:
    """An episode read once: the page's view, and the step log's index its pages of step details are read through
    (one page at a time, from the log: the log is never held). Before the index exists, the view of the log's first
    page of steps and those steps (`head`), read from the start of the log."""

    source: EpisodeSource
    view: EpisodeView
    index: StepLogIndex | None
    head: list[StepRecord] = field(default_factory=list)

    def chunk(self, index: int) -> list[StepDetail]:
        if self.index is None:
            records = [record for record in self.head if index * STEP_CHUNK <= record.step < (index + 1) * STEP_CHUNK]
        else:
            records = self.index.page(index * STEP_CHUNK, (index + 1) * STEP_CHUNK)
        return [step_detail(record) for record in records]


def in_a_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="step-log-index", daemon=True).start()


class EpisodeLoad:
    """An episode being read for the viewer. A small log, or one whose index is cached, is read at once; a large one
    opened for the first time is read from its start up to its first page of steps (the page paints from that in
    well under a second) while `background` runs the whole pass that indexes and summarises it. A large log read
    again because it grew (a run going on) shows its `previous` reading meanwhile, never its head again."""

    def __init__(
        self,
        source: EpisodeSource,
        background: Callable[[Callable[[], None]], None] = in_a_thread,
        background_from_bytes: int = BACKGROUND_INDEX_BYTES,
        previous: EpisodeData | None = None,
    ) -> None:
        self.source = source
        self._done = threading.Event()
        self._data: EpisodeData | None = None
        self._error: Exception | None = None
        self.head: EpisodeData | None = None
        log = steps_log(source.green_dir, source.task)
        if _index_is_cached(log) or not _at_least(log, background_from_bytes):
            self._build()
        else:
            self.head = previous if previous is not None else read_episode_head(source)
            background(self._build)

    def _build(self) -> None:
        try:
            self._data = read_episode(self.source)
        except Exception as error:  # raised again to whoever asks for the episode
            self._error = error
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def read(self) -> EpisodeData | None:
        """The whole episode, once it has been read without error."""
        return self._data if self.done else None

    def current(self) -> EpisodeData:
        """The whole episode when it has been read, else the view of its first page of steps (or the previous
        reading)."""
        if self.head is not None and not self.done:
            return self.head
        return self.complete()

    def complete(self) -> EpisodeData:
        """The whole episode, waiting for its index when it is still being built."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._data is not None
        return self._data

    def chunk(self, index: int) -> list[StepDetail] | None:
        """Chunk `index` of step details (None when there is no such chunk): the first from the log's head while the
        index is built, any other once it is."""
        if self.head is not None and not self.done and index < self.head.view.chunks:
            return self.head.chunk(index)
        data = self.complete()
        return data.chunk(index) if index < data.view.chunks else None


def _index_is_cached(log: Path) -> bool:
    index = StepLogIndex.load(log)
    return index is not None and index.kind == SUMMARY_KIND and index.summary is not None


def _at_least(log: Path, size: int) -> bool:
    try:
        return log.stat().st_size >= size
    except OSError:
        return False  # read_episode says what is wrong with it


class StepSummary(BaseModel):
    """What the page draws from the whole step log, derived in the one pass that indexes it and cached with the
    index (under SUMMARY_KIND)."""

    steps: int
    first_step: int
    last_step: int
    vitals: dict[str, Series]
    inventory: dict[str, Series]
    reward: Series
    latency: dict[str, Series]
    deaths: Events
    noop_steps: dict[str, list[int]]  # the first few steps of each cause, and (in noop_counts) how many in all
    noop_counts: dict[str, int]
    noops: dict[str, Events]
    no_effect: Events


class _Summariser:
    """Fed one record at a time, in log order; keeps per step only numbers in typed arrays (8 bytes a value)."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.vitals: dict[str, array] = {}
        self.inventory: dict[str, array] = {}
        self.reward = array("d")
        self.agent_ms = array("d")
        self.sim_ms = array("d")
        self.died: list[int] = []
        self.deaths_seen = 0
        self.noop_steps: dict[str, array] = {}
        self.no_effect = array("q")
        self.total = 0.0

    def add(self, record: StepRecord) -> None:
        position = len(self.steps)
        self.steps.append(record.step)
        for key in VITAL_KEYS:
            value = _number(record.info.get(key))
            if value is not None and key not in self.vitals:
                self.vitals[key] = array("d", bytes(8 * position))
            if key in self.vitals:
                self.vitals[key].append(value if value is not None else 0.0)
        held = record.info.get(INVENTORY_KEY) or {}
        if isinstance(held, dict):
            for item in held:
                if item not in self.inventory:
                    self.inventory[str(item)] = array("d", bytes(8 * position))
        for item, column in self.inventory.items():
            column.append(float(_number(held.get(item, 0)) or 0.0) if isinstance(held, dict) else 0.0)
        self.total += record.reward
        self.reward.append(self.total)
        self.agent_ms.append(record.agent_ms)
        self.sim_ms.append(record.sim_ms)
        deaths = record.info.get(DEATHS_KEY)
        if isinstance(deaths, int) and deaths > self.deaths_seen:
            self.died.append(record.step)
            self.deaths_seen = deaths
        if record.noop_cause:
            self.noop_steps.setdefault(record.noop_cause, array("q")).append(record.step)
        if record.no_effect:
            self.no_effect.append(record.step)

    def summary(self) -> StepSummary:
        steps, count = self.steps, len(self.steps)
        return StepSummary(
            steps=count,
            first_step=min(steps) if steps else 0,
            last_step=max(steps) if steps else 0,
            vitals={key: change_points(steps, column) for key, column in self.vitals.items()},
            inventory={item: change_points(steps, self.inventory[item]) for item in sorted(self.inventory)},
            reward=change_points(steps, self.reward),
            latency={"agent_ms": minmax_buckets(steps, self.agent_ms), "sim_ms": minmax_buckets(steps, self.sim_ms)},
            deaths=events(self.died, count),
            noop_steps={cause: list(found[:1]) for cause, found in self.noop_steps.items()},
            noop_counts={cause: len(found) for cause, found in self.noop_steps.items()},
            noops={cause: events(found, count) for cause, found in sorted(self.noop_steps.items())},
            no_effect=events(self.no_effect, count),
        )


def _at_rest(value: Any) -> bool:
    return value in (0, None, False) or (isinstance(value, list) and all(v == 0 for v in value))


def step_detail(record: StepRecord) -> StepDetail:
    received = record.received
    if received is not None and len(received) > RECEIVED_SHOWN:
        received = f"{received[:RECEIVED_SHOWN]}… [{len(received)} chars in the step log]"
    return StepDetail(
        step=record.step,
        received=received,
        applied=_applied(record),
        noop_cause=record.noop_cause,
        reason=record.reason,
        dropped_keys=record.dropped_keys,
        adjustments=record.adjustments,
        no_effect=record.no_effect,
        agent_ms=record.agent_ms,
        sim_ms=record.sim_ms,
        reward=record.reward,
        events=[str(event.get("identity", event)) for event in record.events],
        info=record.info,
    )


def _applied(record: StepRecord) -> dict[str, Any]:
    """What the simulator got: the keys not at rest, or the skill it carried out instead and what that came to."""
    if record.skill is not None:
        return {"skill": record.skill, "outcome": record.skill_outcome}
    return {key: value for key, value in record.applied.items() if not _at_rest(value)}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _frame_index(source: EpisodeSource) -> FrameIndex:
    folder = frames_dir(source.green_dir, source.task)
    found: list[int] = []
    if folder.is_dir() and not folder.is_symlink():
        with os.scandir(folder) as entries:
            for entry in entries:
                step = frame_step(entry.name)
                if step is not None and entry.is_file(follow_symlinks=False):
                    found.append(step)
    found.sort()
    ranges: list[tuple[int, int]] = []
    for step in found:
        if ranges and step == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], step)
        else:
            ranges.append((step, step))
    hint = None
    if not found:
        saved = source.report.settings.save_frames
        # the arm file by its folder and name: a page may travel as a bundle, and no path of this machine goes with it
        where = "/".join(Path(source.arm_file).parts[-2:]) if source.arm_file else f"the arm file of {source.arm}"
        hint = (
            f"save_frames was on, yet {folder} holds no frames"
            if saved
            else f"no frames were saved for this run: set `save_frames = true` in {where} and run the arm again "
            "with --rerun (each step's 128x128 PNG is then kept beside its step log; save_frames is not in the "
            "fingerprint, so that run is one more replicate of this experiment)"
        )
    return FrameIndex(ranges=ranges, count=len(found), hint=hint)


def _noop_kind(cause: str) -> CountKind:
    return "infrastructure" if cause in INFRASTRUCTURE_CAUSES else "behaviour"


def _counts(source: EpisodeSource, summary: StepSummary, invalid_lines: int, torn: bool) -> tuple[list[CountRow], str]:
    """Infrastructure trouble and agent behaviour, never mixed: from the evaluation when there is one."""
    rows: list[CountRow] = []
    metrics = source.metrics

    def add(kind: CountKind, what: str, count: int, detail: str = "") -> None:
        if count:
            rows.append(CountRow(kind=kind, what=what, count=count, detail=detail))

    if metrics is not None:
        counts_source = "the green's evaluation, by the causes the run report counts"
        infrastructure, behaviour = task_trouble(metrics)
        details = {cause: "; ".join(stats.first_reasons) for cause, stats in metrics.noops.items()}
        if metrics.init is not None and not metrics.init.ok:
            details["init_failed"] = f"{metrics.init.cause}: {metrics.init.message}"
        details["task_error"] = metrics.error or ""
        for cause, count in infrastructure.items():
            add("infrastructure", cause, count, details.get(cause, ""))
        add(
            "infrastructure",
            "longest run of infrastructure noops",
            metrics.longest_infrastructure_run,
            "steps in a row",
        )
        for cause, count in metrics.agent_failures.items():
            add("infrastructure", f"agent failure: {cause}", count, "as the agent reported it, beside its noop")
        for cause, count in behaviour.items():
            add("behaviour", cause, count, details.get(cause, ""))
        add("behaviour", "steps with an input that had no effect", metrics.no_effect_steps)
        if metrics.agent_reported_noops is not None:
            stats = metrics.agent_reported_noops
            add("behaviour", "noops the agent chose", stats.count, "; ".join(stats.first_reasons))
    else:
        counts_source = "the step log (this run has no evaluation for the task)"
        for cause, first in summary.noop_steps.items():
            add(_noop_kind(cause), f"noop: {cause}", summary.noop_counts[cause], f"first at step {first[0]}")
    episode = source.purple_episode
    if episode is not None:
        for reason, count in episode.failed_turns_by_reason.items():
            add("infrastructure", f"failed model turn: {reason}", count, "the purple's own report")
        add("infrastructure", "processes left behind by a turn (stopped)", episode.leftover_processes_stopped)
    add("infrastructure", "step log lines that are not step records", invalid_lines)
    if source.report.status not in OPEN_STATUSES:  # while the run goes on, a half-written last line is normal
        add("infrastructure", "step log ends in a torn line", int(torn), "cut short when the run ended")
    return rows, counts_source


def _alerts(source: EpisodeSource, view_alerts: list[str]) -> list[str]:
    report = source.report
    alerts = list(view_alerts)
    if report.status in OPEN_STATUSES:
        alerts.append("the run is still going, or its supervisor died before finalising the report")
    if report.failure is not None:
        who = f" ({report.failure.process})" if report.failure.process else ""
        alerts.append(f"the run {report.status}{who}: {report.failure.reason}")
    return [*report.alerts, *alerts]


def _turns_note(source: EpisodeSource, agent: str) -> str | None:
    if agent not in CODEX_AGENTS:
        return f"a {agent} agent takes no model turns: what it answered at each step is in the step's reply"
    if source.purple_task_dir is None:
        return "no turns recorded: the purple wrote no episode report for this task"
    if not source.turn_records:
        return "the agent took no model turn in this task"
    return None


def _agent_file_names(task_dir: Path | None) -> list[str]:
    """The agent's own files (memory, notes, logs) as the run left them; not the per-turn files written for it."""
    if task_dir is None or not task_dir.is_dir():
        return []
    names: list[str] = []
    skipped = {TURNS_DIR, TURN_FRAMES_DIR, EPISODE_REPORT_NAME}
    for root, dirs, files in os.walk(task_dir):  # os.walk never descends into a linked directory
        relative = Path(root).relative_to(task_dir)
        if relative == Path("."):
            dirs[:] = [d for d in dirs if d not in skipped]
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if name in skipped or not regular_file(path):
                continue
            names.append(str(relative / name) if relative != Path(".") else name)
    return names[:AGENT_FILES_SHOWN]


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n… [cut: {len(text)} characters in all]", True


def regular_file(path: Path) -> bool:
    """A plain file, not reached through a link: the viewer never follows a link it did not make."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def read_text_file(path: Path, limit: int = TEXT_SHOWN) -> tuple[str, bool] | None:
    """A plain file's text (never through a link), cut to `limit`; None when absent or not a plain file."""
    if not regular_file(path):
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return f"[binary file, {len(data)} bytes]", False
    return _cut(data.decode("utf-8", errors="replace"), limit)


def agent_files(source: EpisodeSource) -> list[AgentFile]:
    task_dir = source.purple_task_dir
    if task_dir is None:
        return []
    shown = []
    for name in _agent_file_names(task_dir):
        path = task_dir / name
        read = read_text_file(path)
        if read is not None:
            shown.append(AgentFile(name=name, bytes=path.lstat().st_size, text=read[0], cut=read[1]))
    return shown


def turn_detail(source: EpisodeSource, record: TurnRecord) -> TurnDetail:
    assert source.purple_task_dir is not None
    folder = turn_dir(source.purple_task_dir, record.turn)
    prompt = read_text_file(folder / TURN_PROMPT_FILE)
    actions = read_text_file(folder / TURN_ACTIONS_FILE)
    stderr = read_text_file(folder / TURN_STDERR_FILE, limit=10**9)
    stderr_tail = stderr[0][-STDERR_SHOWN:] if stderr and stderr[0].strip() else None
    frame = turn_frame(source.purple_task_dir, record.step)
    return TurnDetail(
        turn=record.turn,
        step=record.step,
        prompt=prompt[0] if prompt else None,
        answer=agent_messages(folder / TURN_EVENTS_FILE),
        actions=actions[0] if actions else None,
        stderr_tail=stderr_tail,
        frame=regular_file(frame),
    )


def _step_log(source: EpisodeSource) -> Path:
    log = steps_log(source.green_dir, source.task)
    if log.is_symlink():
        raise UserError("the step log is a link this project did not make: not followed", path=log)
    return log


def read_episode(source: EpisodeSource) -> EpisodeData:
    log = _step_log(source)
    index, summary = step_summary(log)
    view = _episode_view(source, log, summary, index.invalid, index.torn)
    return EpisodeData(source=source, view=view, index=index)


def read_episode_head(source: EpisodeSource) -> EpisodeData:
    """The episode as far as its log's first page of steps (read from the start of the log, in order): what the page
    shows while the whole log is indexed. Out of order steps end the head early; their page waits for the index."""
    log = _step_log(source)
    summariser = _Summariser()
    head: list[StepRecord] = []
    scan = JsonlScan(log, StepRecord)
    complete_page = False
    for _, _, record in scan:
        if record.step >= STEP_CHUNK or (head and record.step < head[-1].step):
            complete_page = record.step >= STEP_CHUNK
            break
        head.append(record)
        summariser.add(record)
    else:
        complete_page = True  # the whole log, in order
    size = log.stat().st_size
    indexing = (
        f"the step log ({size / 2**20:.0f} MB) is being indexed, the first time it is opened: this page shows its "
        f"first {len(head)} steps until that is done, then reloads"
    )
    view = _episode_view(source, log, summariser.summary(), scan.invalid, False, indexing=indexing)
    view.chunks = 1 if complete_page else 0
    return EpisodeData(source=source, view=view, index=None, head=head)


def _episode_view(
    source: EpisodeSource,
    log: Path,
    summary: StepSummary,
    invalid: int,
    torn: bool,
    indexing: str | None = None,
) -> EpisodeView:
    report = source.report
    agent = report.settings.agent
    counts, counts_source = _counts(source, summary, invalid, torn)
    view_alerts = []
    if invalid:
        view_alerts.append(f"{invalid} line(s) of {log} are not step records and are not shown")
    if not summary.steps:
        view_alerts.append(f"{log} holds no step yet")
    metrics = source.metrics
    return EpisodeView(
        title=f"{source.arm} · episode {source.run_dir.number:03d} · {source.task}",
        arm=source.arm,
        episode=source.run_dir.number,
        task=source.task,
        agent=agent,
        simulator=report.simulator_label or label_of(report.settings.simulator),
        status=report.status,
        steps=summary.steps,
        first_step=summary.first_step,
        last_step=summary.last_step,
        max_steps=metrics.max_steps if metrics else report.settings.steps,
        score=metrics.score if metrics else None,
        max_score=metrics.max_score if metrics else None,
        vitals=summary.vitals,
        inventory=summary.inventory,
        reward=summary.reward,
        latency=summary.latency,
        deaths=summary.deaths,
        noops=summary.noops,
        noop_kinds={cause: _noop_kind(cause) for cause in summary.noops},
        milestones=[MilestoneMark.model_validate(m.model_dump()) for m in metrics.milestones] if metrics else [],
        frames=_frame_index(source),
        takes_turns=agent in CODEX_AGENTS,
        turns=[TurnMark.model_validate(r.model_dump()) for r in sorted(source.turn_records, key=lambda r: r.turn)],
        turns_note=_turns_note(source, agent),
        agent_files=_agent_file_names(source.purple_task_dir),
        counts=counts,
        counts_source=counts_source,
        alerts=_alerts(source, view_alerts),
        notes=list(report.notes),
        no_effect=summary.no_effect,
        chunks=summary.last_step // STEP_CHUNK + 1 if summary.steps else 0,
        indexing=indexing,
    )


def step_summary(log: Path) -> tuple[StepLogIndex, StepSummary]:
    """The log's index and what the page draws from it: from the cache beside the log when it is current, else from
    one streaming pass (then cached)."""
    summariser = _Summariser()
    index = StepLogIndex.open(log, SUMMARY_KIND, summariser.add)
    if index.summary is not None:
        try:
            return index, StepSummary.model_validate(index.summary)
        except ValueError:
            summariser = _Summariser()
            index = StepLogIndex.build(log, summariser.add)
            index.kind = SUMMARY_KIND
    summary = summariser.summary()
    index.summary = summary.model_dump(mode="json")
    index.save()
    return index, summary


def purple_episodes(run_dir: RunDir, tasks: list[str], category: str | None) -> dict[str, tuple[Path, EpisodeReport]]:
    """Each task's codex episode (purple/task_NN), by task name.

    The green runs its tasks one after another and each init claims the next task_NN, so with as many purple
    episodes as tasks they pair in order; otherwise (an init that never reached the purple) they are paired by the
    task text the purple recorded.
    """
    found: list[tuple[Path, EpisodeReport]] = []
    for folder in purple_task_dirs(run_dir.purple):
        try:
            found.append((folder, read_episode_report(folder / EPISODE_REPORT_NAME)))
        except ValueError:
            continue
    if len(found) == len(tasks):
        return dict(zip(tasks, found, strict=True))
    if not found or category is None:
        return {}
    try:
        texts = {spec.name: spec.text for spec in load_category(category)}
    except UserError:
        return {}
    by_text = {report.task: (folder, report) for folder, report in found}
    return {task: by_text[texts[task]] for task in tasks if texts.get(task) in by_text}
