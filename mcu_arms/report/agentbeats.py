"""`compare --to agentbeats=DIR`: an arm's compared episodes as an AgentBeats leaderboard submission, and the merge of
a sharded assessment's results.

The MCU leaderboard's "local evaluation + submission" takes three files per submission: `results/<name>.json`
(`{"participants": {"agent": ID}, "results": [<category result>]}`), `submissions/<name>.toml` (the scenario as run)
and `submissions/<name>.provenance.json` (`image_digests`, `timestamp`). Every entry of `results` is what our green
returned for one seed (`EvaluationResult.artifact_data`: upstream's category result at the top, ours under
`mcu_arms`), never re-shaped here; the replicate summary (mean, interval, n, seeds) and what identifies the code
that ran are added under `mcu_arms` keys, beside upstream's, which keep their meanings.

An export stands on one experiment: episodes run with different fingerprints, code or simulator versions, or not
`finished`, are refused. The merge follows the leaderboard template's summary: shards whose provenance differs are
refused; the result is `{status: completed|partial|failed, participants, results}`, each category's task metrics
put together in the order the green partitioned them and totalled by the green's own `CategoryResult.of`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcu_arms.atomic import write_text_atomic
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.evaluation import (
    ARTIFACT_ENVELOPE_KEY,
    CategoryResult,
    EvaluationResult,
    SkippedTask,
    TaskMetrics,
    evaluation_from_artifact,
    read_evaluation,
)
from mcu_arms.contracts.run_report import RunReport, read_report
from mcu_arms.layout import RunDir, episode_name
from mcu_arms.stats.basics import METHOD, Summary, summarise

DESTINATION = "agentbeats"
AGENT_ROLE = "agent"  # the participant's role in the MCU green's request and in the leaderboard's results
GREEN_ROLE = "green"  # `--agentbeats-id green=ID`: the scenario's [green_agent]
ROLES = (GREEN_ROLE, AGENT_ROLE)
# Config keys that name places on the submitter's machine: meaningless in a submission, left out of its scenario.
LOCAL_CONFIG_KEYS = ("output_dir", "auto_eval_dir")
# What the leaderboard template's summary says of a merge.
MergeStatus = Literal["completed", "partial", "failed"]
SHARD_RESULTS_FILE = "results.json"
SHARD_PROVENANCE_FILE = "provenance.json"


class TaskReplicates(BaseModel):
    score: Summary
    sim_score: Summary


class CategoryReplicates(BaseModel):
    """One category over the seeds: added beside the per-seed results, never in place of them."""

    n: int
    seeds: list[int]
    total_score: Summary  # mean with its Student t interval (`ci`) over the seeds
    upstream_total_score: Summary  # the total as MCU-AgentBeats counts it (unscored tasks as 0)
    task_metrics: dict[str, TaskReplicates]


class Submission(BaseModel):
    """What one arm's export wrote."""

    arm: str
    results: str
    scenario: str
    provenance: str
    seeds: list[int]
    warnings: list[str] = Field(default_factory=list)

    def text(self) -> str:
        seeds = ", ".join(str(seed) for seed in self.seeds)
        return f"agentbeats: {self.arm} (seeds {seeds}) -> {self.results}, {self.scenario}, {self.provenance}"


def parse_ids(values: list[str]) -> dict[str, str]:
    """`--agentbeats-id ROLE=ID`, ROLE green or agent, each once."""
    ids: dict[str, str] = {}
    for value in values:
        role, _, identity = value.partition("=")
        if role not in ROLES or not identity.strip():
            raise UserError(f"'{value}' is not ROLE=ID", key="--agentbeats-id", allowed="green=ID, agent=ID")
        if role in ids:
            raise UserError(f"role '{role}' is given twice", key="--agentbeats-id", allowed="each role once")
        ids[role] = identity.strip()
    return ids


def destination_dir(value: str, cwd: Path) -> Path | None:
    """`--to agentbeats=DIR` as a directory (None when `value` names another destination)."""
    name, _, where = value.partition("=")
    if name != DESTINATION:
        return None
    if not where:
        raise UserError(f"'{value}' names no directory", key="--to", allowed="agentbeats=DIR")
    return Path(where) if Path(where).is_absolute() else cwd / where


class _Episode(BaseModel):
    run_dir: str
    report: RunReport
    evaluation: EvaluationResult


def _read_episodes(episode_dirs: list[Path]) -> list[_Episode]:
    episodes = []
    for directory in episode_dirs:
        run_dir = RunDir(directory)
        report = read_report(run_dir.report)
        if report.status != "finished":
            raise UserError(
                f"episode {episode_name(report.episode)} of arm {report.arm} is {report.status}, not finished: only "
                "finished episodes are exported",
                path=run_dir.report,
                key="--to",
            )
        if not report.evaluation_file:
            raise UserError("the report names no evaluation file", path=run_dir.report, key="evaluation_file")
        evaluation = read_evaluation(run_dir.path / report.evaluation_file)
        episodes.append(_Episode(run_dir=str(directory), report=report, evaluation=evaluation))
    return episodes


def _one(episodes: list[_Episode], what: str, value_of: Callable[[_Episode], Any]) -> Any:
    """The value every episode shares, or a UserError naming each episode's."""
    values = {json.dumps(value_of(each), sort_keys=True, default=str): value_of(each) for each in episodes}
    if len(values) == 1:
        return next(iter(values.values()))
    seen = "; ".join(
        f"{each.report.arm}/{episode_name(each.report.episode)} (seed {each.report.settings.seed}): {value_of(each)}"
        for each in episodes
    )
    raise UserError(
        f"the episodes to export were not all run with the same {what} ({seen}): a submission stands on one experiment",
        key="--to",
        allowed="episodes of one experiment (compare --experiment PREFIX)",
    )


def _replicates(episodes: list[_Episode]) -> dict[str, CategoryReplicates]:
    by_category: dict[str, list[tuple[int, CategoryResult]]] = {}
    for each in episodes:
        for category in each.evaluation.results:
            by_category.setdefault(category.task_category, []).append((each.evaluation.seed, category))
    summaries = {}
    for name, entries in by_category.items():
        tasks = list(dict.fromkeys(task for _, category in entries for task in category.task_metrics))
        summaries[name] = CategoryReplicates(
            n=len(entries),
            seeds=[seed for seed, _ in entries],
            total_score=summarise([category.total_score for _, category in entries]),
            upstream_total_score=summarise([category.upstream_total_score for _, category in entries]),
            task_metrics={
                task: TaskReplicates(
                    score=summarise(
                        [c.task_metrics[task].upstream_score for _, c in entries if task in c.task_metrics]
                    ),
                    sim_score=summarise([c.task_metrics[task].sim_score for _, c in entries if task in c.task_metrics]),
                )
                for task in tasks
            },
        )
    return summaries


def _config_as_sent(episode: _Episode) -> dict[str, Any]:
    """The [config] the client sent (the episode's scenario.toml; else the green's record of it), without the keys
    that name places on this machine."""
    scenario = RunDir(Path(episode.run_dir)).scenario
    config: dict[str, Any] | None = None
    if scenario.is_file() and not scenario.is_symlink():
        try:
            table = tomllib.loads(scenario.read_text(encoding="utf-8")).get("config")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise UserError(f"cannot read the scenario as run: {error}", path=scenario) from None
        config = table if isinstance(table, dict) else None
    if config is None:
        config = episode.evaluation.config.model_dump(mode="json", exclude_none=True)
    return {key: value for key, value in config.items() if key not in LOCAL_CONFIG_KEYS}


def scenario_text(episodes: list[_Episode], ids: dict[str, str], version: str) -> str:
    """The AgentBeats scenario as run: the green and the participant by agentbeats_id, their env by name only
    (`${NAME}`: a value may be a secret), and the first seed's [config]; the others differ only in `seed`."""
    import tomlkit

    first = episodes[0]
    seeds = ", ".join(str(each.evaluation.seed) for each in episodes)
    document = tomlkit.document()
    document.add(
        tomlkit.comment(
            f"exported by mcu-arms {version} from arm {first.report.arm} (fingerprint {first.report.fingerprint})"
        )
    )
    document.add(tomlkit.comment(f"run once per seed ({seeds}); [config] is the first's, the others differ in seed"))
    green = tomlkit.table()
    green.add("agentbeats_id", ids.get(GREEN_ROLE, ""))
    green.add("env", tomlkit.inline_table())
    document["green_agent"] = green
    participant = tomlkit.table()
    participant.add("agentbeats_id", ids.get(AGENT_ROLE, ""))
    participant.add("name", AGENT_ROLE)
    env = tomlkit.inline_table()
    env.update({name: f"${{{name}}}" for name in sorted(first.report.settings.env)})
    participant.add("env", env)
    participants = tomlkit.aot()
    participants.append(participant)
    document["participants"] = participants
    document["config"] = _config_as_sent(first)
    return tomlkit.dumps(document)


def provenance_data(episodes: list[_Episode], now: datetime) -> dict[str, Any]:
    """The leaderboard's provenance (`image_digests`, `timestamp`) and, under `mcu_arms`, what identifies the code
    that ran: no component ran from an image, so `image_digests` is empty."""
    first = episodes[0]
    tool = first.report.provenance
    simulator = first.evaluation.simulator
    return {
        "image_digests": {},
        "timestamp": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        ARTIFACT_ENVELOPE_KEY: {
            "tool": {
                "name": "mcu-arms",
                "version": tool.mcu_arms_version,
                "git_sha": tool.git_sha,
                "git_dirty": tool.git_dirty,
                "python": tool.python,
                "packages": tool.packages,
            },
            "arm": first.report.arm,
            "fingerprint": first.report.fingerprint,
            "agent": first.report.settings.agent,
            "simulator": simulator.model_dump(mode="json"),
            "episodes": [
                {
                    "episode": each.report.episode,
                    "seed": each.evaluation.seed,
                    "started_at": each.report.started_at,
                    "finished_at": each.report.finished_at,
                }
                for each in episodes
            ],
        },
    }


def results_data(episodes: list[_Episode], ids: dict[str, str]) -> dict[str, Any]:
    """Upstream's results file: each seed's result as the green returned it; the replicates added under `mcu_arms`."""
    first = episodes[0]
    replicates = _replicates(episodes)
    return {
        "participants": {AGENT_ROLE: ids.get(AGENT_ROLE, "")},
        "results": [each.evaluation.artifact_data() for each in episodes],
        ARTIFACT_ENVELOPE_KEY: {
            "arm": first.report.arm,
            "fingerprint": first.report.fingerprint,
            "seeds": [each.evaluation.seed for each in episodes],
            "replicates": {name: summary.model_dump(mode="json") for name, summary in replicates.items()},
            "statistics": METHOD,
        },
    }


class _Prepared(BaseModel):
    submission: Submission
    files: dict[str, str]  # path -> text


def _prepare(arm: str, episode_dirs: list[Path], directory: Path, ids: dict[str, str], now: datetime) -> _Prepared:
    if not episode_dirs:
        raise UserError(f"arm {arm} has no finished episode to export", key="--to")
    episodes = sorted(_read_episodes(episode_dirs), key=lambda each: each.evaluation.seed)
    _one(episodes, "fingerprint", lambda each: each.report.fingerprint)
    _one(
        episodes,
        "code",
        lambda each: (
            each.report.provenance.mcu_arms_version,
            each.report.provenance.git_sha,
            each.report.provenance.git_dirty,
        ),
    )
    _one(episodes, "simulator", lambda each: (each.evaluation.simulator.name, each.evaluation.simulator.version))
    results = directory / "results" / f"{arm}.json"
    scenario = directory / "submissions" / f"{arm}.toml"
    provenance = directory / "submissions" / f"{arm}.provenance.json"
    present = [str(path) for path in (results, scenario, provenance) if path.exists() or path.is_symlink()]
    if present:
        raise UserError(
            f"already holds a submission of {arm} ({', '.join(present)}), which is never written over",
            path=directory,
            key="--to",
            allowed="another directory, or remove the old submission",
        )
    version = episodes[0].report.provenance.mcu_arms_version
    files = {
        str(results): _json_text(results_data(episodes, ids)),
        str(scenario): scenario_text(episodes, ids, version),
        str(provenance): _json_text(provenance_data(episodes, now)),
    }
    warnings = [
        f"no --agentbeats-id {role}=ID: its agentbeats_id is empty in the submission"
        for role in ROLES
        if role not in ids
    ]
    warnings += [
        f"seed {each.evaluation.seed}: {category.task_category} has unscored tasks "
        f"({', '.join(category.unscored_tasks)}): its total_score leaves them out, where upstream's green counts "
        "them as 0 (that total is its upstream_total_score)"
        for each in episodes
        for category in each.evaluation.results
        if category.unscored_tasks
    ]
    submission = Submission(
        arm=arm,
        results=str(results),
        scenario=str(scenario),
        provenance=str(provenance),
        seeds=[each.evaluation.seed for each in episodes],
        warnings=warnings,
    )
    return _Prepared(submission=submission, files=files)


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def export_arms(arms: dict[str, list[Path]], directory: Path, ids: dict[str, str], now: datetime) -> list[Submission]:
    """Write each arm's submission under `directory` (results/ and submissions/), or refuse (UserError) before
    writing anything: episodes that are not all finished, of one fingerprint, one code and one simulator version;
    files already there (a submission is a record, never replaced). Each file is written whole (a temporary sibling
    renamed)."""
    prepared = [_prepare(arm, dirs, directory, ids, now) for arm, dirs in arms.items()]
    for each in prepared:
        for path, text in each.files.items():
            try:
                write_text_atomic(Path(path), text)
            except OSError as error:
                raise UserError(
                    f"cannot write the submission: {error.strerror or error}", path=path, key="--to"
                ) from None
    return [each.submission for each in prepared]


# Shards.


class ShardSubmission(BaseModel):
    """One shard as the leaderboard template's workflow leaves it: its results file and its provenance (a shard
    whose job failed left neither: it counts as missing)."""

    source: str
    results: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    failed: bool = False


class MergedResults(BaseModel):
    status: MergeStatus
    participants: dict[str, str]
    results: list[dict[str, Any]]


def read_shard(path: Path) -> ShardSubmission:
    """A shard: a directory holding results.json (and provenance.json when there is one), as the leaderboard
    template's workflow leaves it, or one JSON file: such a results file, or the result `mcu-arms evaluate` saved
    (the green's artifact data, wrapped here as a results file of its own)."""
    files = (
        {SHARD_RESULTS_FILE: path}
        if not path.is_dir()
        else {
            SHARD_RESULTS_FILE: path / SHARD_RESULTS_FILE,
            SHARD_PROVENANCE_FILE: path / SHARD_PROVENANCE_FILE,
        }
    )
    data = {}
    for name, file in files.items():
        if file.is_symlink():
            raise UserError("is a link, which mcu-arms does not follow", path=file)
        if not file.is_file():
            if name == SHARD_RESULTS_FILE and not path.is_dir():
                raise UserError("missing: a shard is a results file, or a directory holding results.json", path=file)
            continue
        try:
            loaded = json.loads(file.read_bytes())
        except (OSError, ValueError) as error:
            raise UserError(f"not readable as JSON: {error}", path=file) from None
        if not isinstance(loaded, dict):
            raise UserError("not a JSON object", path=file)
        data[name] = loaded
    if SHARD_RESULTS_FILE not in data:  # the shard's job wrote no result: failed
        return ShardSubmission(source=str(path), failed=True)
    results = data[SHARD_RESULTS_FILE]
    if ARTIFACT_ENVELOPE_KEY in results and "task_metrics" in results:
        results = {"participants": {}, "results": [results]}
    return ShardSubmission(source=str(path), results=results, provenance=data.get(SHARD_PROVENANCE_FILE, {}))


def _without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key not in keys}


def _shard_evaluations(shard: ShardSubmission) -> list[EvaluationResult]:
    results = shard.results.get("results")
    if not isinstance(results, list):
        raise UserError("holds no results list", path=shard.source, key="results")
    evaluations = []
    for index, entry in enumerate(results):
        evaluation = evaluation_from_artifact(entry) if isinstance(entry, dict) else None
        if evaluation is None:
            raise UserError("is not an mcu-arms green's result", path=shard.source, key=f"results[{index}]")
        evaluations.append(evaluation)
    return evaluations


def _what_ran(evaluation: EvaluationResult) -> str:
    """What every shard of one assessment shares: the request but its shard and its output_dir, and the simulator."""
    config = _without(evaluation.config.model_dump(mode="json"), "shard_index", *LOCAL_CONFIG_KEYS)
    return json.dumps({"config": config, "simulator": evaluation.simulator.model_dump(mode="json")}, sort_keys=True)


def merge_shards(shards: list[ShardSubmission]) -> MergedResults:
    """The shards of one assessment as one results file, as the leaderboard's summary merges them: differing
    provenance (timestamps aside) or participants refused; status completed when every shard of every category
    is there, partial when some are, failed when none."""
    failed = [shard for shard in shards if shard.failed]
    shards = [shard for shard in shards if not shard.failed]
    if not shards:
        return MergedResults(status="failed", participants={}, results=[])
    checks: tuple[tuple[str, Callable[[ShardSubmission], Any]], ...] = (
        ("provenance", lambda shard: _without(shard.provenance, "timestamp")),
        ("participants", lambda shard: shard.results.get("participants")),
    )
    for what, value_of in checks:
        first = value_of(shards[0])
        for shard in shards[1:]:
            if value_of(shard) != first:
                raise UserError(
                    f"its {what} differs from that of {shards[0].source}: shards of one assessment share it",
                    path=shard.source,
                    key=what,
                )
    groups: dict[str, list[EvaluationResult]] = {}
    for shard in shards:
        for evaluation in _shard_evaluations(shard):
            groups.setdefault(_what_ran(evaluation), []).append(evaluation)
    merged = []
    complete = True
    for evaluations in groups.values():
        result, whole = _merged_category(evaluations)
        merged.append(result.artifact_data())
        complete = complete and whole
    status: MergeStatus = "completed" if complete and merged and not failed else "partial" if merged else "failed"
    return MergedResults(status=status, participants=shards[0].results.get("participants") or {}, results=merged)


def _merged_category(evaluations: list[EvaluationResult]) -> tuple[EvaluationResult, bool]:
    """One category's shards as one result (totals by the green's own CategoryResult.of), and whether every shard
    was there. Two results of one shard are refused: the merge would not know which to keep."""
    by_index: dict[int, EvaluationResult] = {}
    for evaluation in evaluations:
        index = evaluation.shard.shard_index if evaluation.shard is not None else 0
        if index in by_index:
            raise UserError(
                f"two results of shard {index} of category {evaluation.results[0].task_category}",
                path=evaluation.output_dir,
                key="shard_index",
            )
        by_index[index] = evaluation
    first = by_index[min(by_index)]
    order = first.shard.all_instances if first.shard is not None else list(first.results[0].task_metrics)
    count = first.shard.num_shards if first.shard is not None else 1
    metrics: dict[str, TaskMetrics] = {}
    skipped: dict[str, SkippedTask] = {}
    for evaluation in by_index.values():
        (category,) = evaluation.results
        metrics.update(category.task_metrics)
        skipped.update({entry.task: entry for entry in category.skipped_tasks})
    ordered = {name: metrics[name] for name in order if name in metrics}
    category = CategoryResult.of(first.results[0].task_category, ordered, list(skipped.values()))
    merged = first.model_copy(
        update={
            "results": [category],
            "shard": None,
            "started_at": min(each.started_at for each in by_index.values()),
            "finished_at": max(each.finished_at for each in by_index.values()),
            "duration_s": round(sum(each.duration_s for each in by_index.values()), 3),
        }
    )
    return merged, set(by_index) == set(range(count))


def merged_json(merged: MergedResults) -> str:
    return merged.model_dump_json(indent=2) + "\n"
