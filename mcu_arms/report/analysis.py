"""The one analysis of a comparison, computed once: every view (the console table, `--json`, `--csv`, `--markdown`,
`--plot`, `--export`, `mcu_arms.results`, `view` and `report --html`) renders this object and computes nothing of
its own.

Per arm: the experiment used (one fingerprint) and why, the episodes used (the latest finished one per seed) and
those left out with the reason (interrupted, failed, unfinished, another experiment, superseded, another campaign);
per metric its per-episode values, n, mean and interval; per milestone k/n and its steps. Between each arm and the
baseline, every difference with its method, estimate, interval, p and verdict. Then the comparability and trust
verdicts. An arm's runs that are different experiments are never mixed, and never silently "whatever ran last":
when the experiment to use is not unique, `analyse` refuses and lists the candidates.

Four modules: the model (report/analysis_model.py), the choice of arms and experiments (report/experiments.py), the
differences against the baseline (report/differences.py), and here the computation per arm and across arms, and
`analyse`, which runs them in order (the model's public names are re-exported here for the views).

Light to import: pydantic and the arm/report models only.
"""

from __future__ import annotations

from pathlib import Path

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import Provenance, RunReport
from mcu_arms.contracts.settings import (
    NOT_OWNED,
    differing_settings,
    fingerprint,
)
from mcu_arms.contracts.simulators import label_of
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES
from mcu_arms.environment import Environment
from mcu_arms.process.collector import without_cyclic_gc
from mcu_arms.report.analysis_model import (
    ANALYSIS_SCHEMA_VERSION as ANALYSIS_SCHEMA_VERSION,
)
from mcu_arms.report.analysis_model import (
    METRICS,
    PURPLE_COUNTERS,
    Analysis,
    ArmAnalysis,
    CellState,
    EpisodeFacts,
    EpisodeMilestones,
    EpisodeRef,
    ExcludedEpisode,
    ExclusionReason,
    ExperimentChoice,
    Flag,
    MilestoneCell,
    MilestoneRow,
    ReachedCurve,
    Verdict,
)
from mcu_arms.report.analysis_model import ReachingCurve as ReachingCurve  # re-exported: views draw it
from mcu_arms.report.analysis_model import SettingRow as SettingRow  # re-exported: views show it
from mcu_arms.report.differences import compare_with_baseline
from mcu_arms.report.experiments import (
    ArmRuns,
    ArmTarget,
    choose_experiments,
    counted_differences,
    episode_ref,
    read_arm_runs,
    resolve_targets,
    setting_rows,
    settings_from_file,
    short,
)
from mcu_arms.stats.across_tasks import AcrossTasks, TaskSeedScores, across_tasks
from mcu_arms.stats.basics import (
    MilestoneStats,
    Summary,
    milestone_stats,
    summarise,
)
from mcu_arms.stats.sequential import (
    sequential_experiment,
)
from mcu_arms.stats.survival import (
    KaplanMeier,
    episodes,
    kaplan_meier,
)

# --- one arm ---------------------------------------------------------------------------------------------------


def _exclusion(report: RunReport) -> tuple[ExclusionReason, str] | None:
    if report.status == "interrupted":
        return "interrupted", report.failure.reason if report.failure else "no reason recorded"
    if report.status == "failed":
        return "failed", report.failure.reason if report.failure else "no failure recorded"
    if report.status == "queued":
        return "unfinished", "queued as a Slurm job, not started yet"
    if report.status == "started":
        return "unfinished", "still running, or its supervisor died before finalising the report"
    return None


def _used_and_excluded(
    each: ArmRuns, chosen: str | None, episode: int | None
) -> tuple[list[RunReport], list[ExcludedEpisode]]:
    """The latest finished episode per seed of the chosen experiment (only episode N with --run N); every other
    episode of the arm with its reason."""
    used: dict[int, RunReport] = {}
    for number in sorted(each.runs):
        report = each.runs[number][1]
        if report.status == "finished" and report.fingerprint == chosen and episode in (None, number):
            used[report.settings.seed] = report
    kept = {report.episode for report in used.values()}
    excluded = []
    for number in sorted(each.runs):
        report = each.runs[number][1]
        if number in kept:
            continue
        why = _exclusion(report)
        if why is None and report.fingerprint != chosen:
            why = ("other experiment", f"experiment {short(report.fingerprint)}, not the one compared")
        elif why is None and episode is not None:
            why = ("superseded", f"--run {episode} compares episode {episode} only")
        elif why is None:
            later = used[report.settings.seed].episode
            why = ("superseded", f"seed {report.settings.seed} finished again in episode {later}")
        assert why is not None  # each branch above gives a reason
        excluded.append(ExcludedEpisode(**episode_ref(report), reason=why[0], detail=why[1]))
    for report in each.other_campaign:
        where = f"campaign {report.campaign.name}" if report.campaign else "no campaign"
        excluded.append(
            ExcludedEpisode(
                **episode_ref(report), reason="other campaign", detail=f"ran for {where}, not {each.target.campaign}"
            )
        )
    for report in each.other_tags:
        excluded.append(ExcludedEpisode(**episode_ref(report), reason="other tags", detail=_tags_detail(report.tags)))
    return [used[seed] for seed in sorted(used)], sorted(excluded, key=lambda e: e.episode)


def tags_text(tags: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(tags.items()))


def _tags_detail(tags: dict[str, str]) -> str:
    return f"run with tags {tags_text(tags)}" if tags else "run without tags"


def _metric_values(report: RunReport) -> dict[str, float | None]:
    per_minute = report.steps_run / report.wall_s * 60 if report.steps_run is not None and report.wall_s else None
    return {
        "score": report.score,
        "sim_score": report.sim_score,
        "steps_run": report.steps_run,
        "wall_s": report.wall_s,
        "steps_per_minute": per_minute,
        "noops": sum(report.noops.values()) if report.steps_run is not None else None,
        "infrastructure_noops": sum(report.infrastructure.values()) if report.steps_run is not None else None,
    }


def _facts(path: Path, report: RunReport) -> EpisodeFacts:
    agent = report.agent
    return EpisodeFacts(
        episode=report.episode,
        status=report.status,
        episode_dir=str(path.parent),
        report_path=str(path),
        simulator_label=report.simulator_label,
        tool=tool_of(report.provenance),
        noops=dict(report.noops),
        dropped_keys=dict(report.dropped_keys),
        sim_fallbacks=dict(report.sim_fallbacks),
        infrastructure=dict(report.infrastructure),
        infrastructure_share=report.infrastructure_share,
        behaviour=dict(report.behaviour),
        purple_report=agent is not None,
        steps_run=report.steps_run,
        **(agent.model_dump(include=PURPLE_COUNTERS) if agent is not None else {}),
        failure_reason=report.failure.reason if report.failure else None,
        failure_process=report.failure.process if report.failure else None,
        failure_kind=report.failure.kind if report.failure else None,
        logs={role: str(path.parent / log) for role, log in report.logs.items()},
        alerts=list(report.alerts),
    )


def _task_and_identity(key: str) -> tuple[str, str]:
    """A milestone's key, `task/identity`, split in two."""
    task, identity = key.split("/", 1)
    return task, identity


def _milestones(reports: list[RunReport]) -> tuple[dict[str, MilestoneStats], list[EpisodeMilestones]]:
    keys = list(dict.fromkeys(f"{m.task}/{m.identity}" for report in reports for m in report.milestones))
    available = {f"{m.task}/{m.identity}": m.available for report in reports for m in report.milestones}
    per_episode = [
        EpisodeMilestones(
            episode=report.episode,
            seed=report.settings.seed,
            steps_run=report.steps_run,
            score=report.score,
            sim_score=report.sim_score,
            steps={f"{m.task}/{m.identity}": m.step for m in report.milestones},
        )
        for report in reports
    ]
    stats = {
        key: milestone_stats(
            *_task_and_identity(key), [each.steps.get(key) for each in per_episode], available=available[key]
        )
        for key in keys
    }
    return stats, per_episode


def reached_curve(per_episode: list[EpisodeMilestones]) -> ReachedCurve:
    """Per step where any episode reached a milestone: how many each episode had reached by then, summarised by the
    median and quartiles (numpy's linear interpolation, as stats/basics.py's quantile)."""
    import numpy as np

    reached = [np.sort([step for step in each.steps.values() if step is not None]) for each in per_episode]
    landed_steps = np.unique(np.concatenate([*reached, np.zeros(0)])).astype(int).tolist()
    last = max([each.steps_run or 0 for each in per_episode] + landed_steps + [0])
    grid = [0, *landed_steps] + ([last] if last > (landed_steps[-1] if landed_steps else 0) else [])
    points = np.asarray(grid, dtype=float)
    counts = np.array([np.searchsorted(steps, points, side="right") for steps in reached], dtype=float)
    low, median, high = np.quantile(counts, [0.25, 0.5, 0.75], axis=0).tolist()
    return ReachedCurve(steps=grid, median=median, low=low, high=high)


def _infrastructure_share(reports: list[RunReport]) -> float | None:
    steps = sum(report.steps_run or 0 for report in reports)
    noops = sum(report.infrastructure.get(cause, 0) for report in reports for cause in INFRASTRUCTURE_CAUSES)
    return noops / steps if steps else None


def _arm_analysis(
    each: ArmRuns, choice: tuple[str | None, str], episode: int | None, flags: list[Flag]
) -> tuple[ArmAnalysis, RunReport | None]:
    """The arm's analysis and the report its settings come from (None when the arm never ran)."""
    target = each.target
    chosen, why = choice
    source = str(target.source) if target.source else None
    experiment = ExperimentChoice(
        fingerprint=chosen, why=why, candidates=[each.describe(fp) for fp in each.experiments]
    )
    used, excluded = _used_and_excluded(each, chosen, episode)
    if episode is not None and episode not in each.runs:
        raise UserError(
            f"arm '{target.name}' has no run episode_{episode:03d}",
            key="--run",
            allowed=", ".join(str(n) for n in each.runs) or "none: this arm has not run",
        )
    if not each.runs:
        has_file = target.source is not None or target.spec is not None
        tagged = None if has_file or not each.other_tags else each.other_tags[-1]  # its settings stand in for a file
        if not has_file and tagged is None:
            raise UserError(f"arm '{target.name}' has neither an arm file nor a run", path=target.output_dir)
        settings, limit = (tagged.settings, tagged.compaction_limit) if tagged else settings_from_file(target, {})
        flags.append(Flag(kind="no_run", arm=target.name, message=_no_run_text(target, each.other_tags)))
        never_ran = ArmAnalysis(
            arm=target.name,
            source=source,
            campaign=target.campaign,
            differs_in=target.differs_in,
            status="no run",
            settings_from="report" if tagged else "arm file",
            settings=settings.redacted(),
            fingerprint=fingerprint(settings),
            experiment=experiment,
            excluded=excluded,
            compaction_limit=limit,
        )
        return never_ran, None
    # The settings shown: the chosen experiment's; with none finished, the latest run's (what was attempted).
    path, report = (
        next((each.runs[r.episode] for r in reversed(used)), None)
        or each.runs[episode if episode is not None else max(each.runs)]
    )
    if target.source is not None or target.spec is not None:
        current, _ = settings_from_file(target, report.overrides)
        if fingerprint(current) != report.fingerprint:
            changed = current.redacted().fingerprinted() != report.settings.redacted().fingerprinted()
            differs = ", ".join(differing_settings([current.redacted(), report.settings.redacted()]))
            what = "has changed since" if changed else "resolves the same, but the fingerprint scheme changed since"
            differs = f" (it now differs in {differs})" if changed and differs else ""
            flags.append(
                Flag(
                    kind="arm_file_changed" if changed else "fingerprint_version",
                    arm=target.name,
                    message=f"{target.source} {what} episode {report.episode} ran{differs}; the settings shown are the "
                    "ones in force for that run",
                )
            )
    limit = report.compaction_limit
    purple_limit = report.agent.compaction_limit if report.agent is not None else None
    if purple_limit is not None and purple_limit != limit:
        flags.append(
            Flag(
                kind="compaction_limit_mismatch",
                arm=target.name,
                message=f"the purple reports compaction limit {purple_limit} in force, the plan set {limit}",
            )
        )
        limit = purple_limit
    if not used:
        reason = next((e.detail for e in reversed(excluded) if e.episode == report.episode), "no finished episode")
        flags.append(
            Flag(
                kind="no_finished_episode",
                arm=target.name,
                message=f"no finished episode to analyse; latest, episode {report.episode}: {reason}",
            )
        )
    for alert in dict.fromkeys(alert for r in used for alert in r.alerts):
        flags.append(Flag(kind="alert", arm=target.name, message=alert))
    same_experiment = each.experiments.get(chosen or "", [])
    cards = {r.purple_card.digest: r.purple_card for r in same_experiment if r.purple_card is not None}
    if len(cards) > 1:
        served = ", ".join(f"{card.name} {card.version} ({digest})" for digest, card in cards.items())
        message = f"its purple served {len(cards)} different agent cards in the runs of this experiment: {served}"
        flags.append(Flag(kind="purple_card_changed", arm=target.name, message=message))
    if report.settings.purple_url is not None:
        message = f"purple at {report.settings.purple_url}: {NOT_OWNED}"
        flags.append(Flag(kind="purple_not_owned", arm=target.name, message=message))
    values = [_metric_values(r) for r in used]
    metrics: dict[str, Summary] = {
        name: summarise([value for v in values if (value := v[name]) is not None]) for name in METRICS
    }
    milestones, per_episode = _milestones(used)
    curve = reached_curve(per_episode) if used else None
    time_to_milestone = {
        key: kaplan_meier(
            episodes([each.steps.get(key) for each in per_episode], [each.steps_run or 0 for each in per_episode])
        )
        for key, stats in milestones.items()
        if stats.available and len(per_episode) > 1
    }
    try:
        sequential = sequential_experiment([report.sequential for report in used])
    except ValueError as error:
        sequential = None
        message = f"its sequential experiment is unreadable, no boundary or alpha is computed: {error}"
        flags.append(Flag(kind="unreadable_experiment", arm=target.name, message=message))
    if sequential is not None:
        flags.append(Flag(kind="sequential", arm=target.name, message=sequential.text))
    return ArmAnalysis(
        arm=target.name,
        source=source,
        campaign=target.campaign,
        differs_in=target.differs_in,
        status="finished" if used else report.status,
        settings_from="report",
        settings=report.settings.redacted(),
        fingerprint=report.fingerprint,
        experiment=experiment,
        used=[EpisodeRef(**episode_ref(r)) for r in used],
        excluded=excluded,
        metrics=metrics,
        max_score=report.max_score,
        milestones=milestones,
        time_to_milestone=time_to_milestone,
        sequential=sequential,
        per_episode=per_episode,
        curve=curve,
        infrastructure_share=_infrastructure_share(used),
        thresholds=report.thresholds,
        compaction_limit=limit,
        latest=_facts(path, report),
    ), report


def _no_run_text(target: ArmTarget, other_tags: list[RunReport]) -> str:
    if other_tags:
        return f"no run in {target.output_dir} with the tags asked for ({len(other_tags)} with other tags)"
    return f"no run in {target.output_dir}"


# --- across arms -----------------------------------------------------------------------------------------------


def _untrusted(arm: ArmAnalysis) -> str | None:
    """Why an arm's numbers say more about the infrastructure than about the agent, or None."""
    facts = arm.latest
    if facts is None:
        return None
    if arm.status != "finished" and facts.failure_kind == "infrastructure" and facts.failure_reason:
        return f"{arm.arm} failed for infrastructure reasons ({facts.failure_reason.removeprefix('infrastructure: ')})"
    share = arm.infrastructure_share
    if arm.status == "finished" and share is not None and share > arm.thresholds.infrastructure_share:
        return (
            f"{arm.arm}: {share:.0%} of the steps of its episodes used were infrastructure noops "
            f"(threshold {arm.thresholds.infrastructure_share:.0%})"
        )
    return None


def _verdict(arms: list[ArmAnalysis], baseline: int) -> Verdict:
    """Does each arm differ from the baseline in one setting only (a campaign's variant: only in what it states), has
    each a finished episode, and can their numbers be trusted? Variants are judged one by one against the baseline:
    two variants changing different settings are each comparable with it."""
    base = arms[baseline]
    differing: list[str] = []
    wrong: list[str] = []
    for arm in arms:
        if arm is base:
            continue
        keys = counted_differences([base.settings, arm.settings])
        differing += [key for key in keys if key not in differing]
        allowed = len(keys) <= 1 or (arm.differs_in is not None and set(keys) <= set(arm.differs_in))
        if not allowed:
            wrong.append(f"{arm.arm} differs from {base.arm} in {', '.join(keys)}")
    if wrong and len(arms) == 2:
        text, comparable = f"NOT comparable: differs in {', '.join(differing)}", False
    elif wrong:
        text, comparable = f"NOT comparable: {'; '.join(wrong)}", False
    elif not differing:
        text, comparable = "identical settings", True
    elif len(arms) == 2:
        text, comparable = f"comparable: differs only in {', '.join(differing)}", True
    else:
        text, comparable = f"comparable: each variant differs from {base.arm} only in what it tests", True
    verdict = Verdict(
        comparable=comparable, identical=not differing, differing=differing, text=text, settings_text=text
    )
    missing = [arm.arm for arm in arms if arm.n == 0]
    if missing:
        verdict = verdict.model_copy(
            update={
                "missing": missing,
                "text": f"NO RESULT for {', '.join(missing)}: no finished episode ({verdict.text})",
            }
        )
    untrusted = [reason for arm in arms if (reason := _untrusted(arm)) is not None]
    if untrusted:
        verdict = verdict.model_copy(
            update={
                "trustworthy": False,
                "untrusted": untrusted,
                "text": f"NOT trustworthy: {'; '.join(untrusted)} ({verdict.text})",
            }
        )
    return verdict


def _milestone_rows(arms: list[ArmAnalysis], reports: list[RunReport | None], baseline: int) -> list[MilestoneRow]:
    order: list[tuple[str, str]] = []
    for report in [reports[baseline], *reports]:
        for record in report.milestones if report else []:
            if (record.task, record.identity) not in order:
                order.append((record.task, record.identity))
    rows = []
    for task, identity in order:
        key = f"{task}/{identity}"
        cells = []
        for arm in arms:
            stats = arm.milestones.get(key)
            if arm.latest is None:
                cells.append(MilestoneCell(state="no run"))
            elif arm.n == 0:
                cells.append(MilestoneCell(state="none finished"))
            elif stats is None:
                cells.append(MilestoneCell(state="not in run"))
            elif not stats.available:
                cells.append(MilestoneCell(state="unavailable", stats=stats))
            else:
                cells.append(_milestone_cell(stats, arm.time_to_milestone.get(key)))
        base_step = cells[baseline].step
        for cell in cells:
            if cell.step is not None and base_step is not None:
                cell.delta = cell.step - base_step
        rows.append(MilestoneRow(task=task, identity=identity, cells=cells))
    return rows


def _milestone_cell(stats: MilestoneStats, survival: KaplanMeier | None) -> MilestoneCell:
    """One episode: the step it landed on; several: the Kaplan–Meier median, censored at the steps run."""
    if survival is not None:
        step = round(survival.median) if survival.median is not None else None
        state: CellState = "reached" if stats.reached else "not reached"
        return MilestoneCell(state=state, step=step, stats=stats, time_to_event=survival)
    if stats.step is None:
        return MilestoneCell(state="not reached", stats=stats)
    return MilestoneCell(state="reached", step=round(stats.step), stats=stats)


def _cross_arm_flags(arms: list[ArmAnalysis], flags: list[Flag]) -> None:
    if len({arm.settings.simulator for arm in arms}) > 1:
        shown = ", ".join(f"{arm.arm}: {simulator_label(arm)}" for arm in arms)
        flags.append(
            Flag(
                kind="different_simulators",
                message=f"arms ran on different simulators ({shown}): scores "
                "and milestone steps are not on the same scale",
            )
        )
    tools = {arm.arm: arm.latest.tool for arm in arms if arm.latest and arm.latest.tool}
    if len(set(tools.values())) > 1:
        shown = ", ".join(f"{name}: {tool}" for name, tool in tools.items())
        flags.append(
            Flag(
                kind="different_tool_versions",
                message=f"arms were run by different versions of mcu-arms ({shown}): a difference may be the tool's",
            )
        )


def _across_tasks(arms: list[ArmAnalysis], runs: list[ArmRuns], baseline: str) -> AcrossTasks | None:
    """rliable's aggregates over each arm's episodes used, from their per-task scores normalised by the task's max
    score; unavailable (saying which episodes) when a report predates per-task scores; None below 2 tasks."""
    scores: dict[str, TaskSeedScores] = {}
    excluded: list[str] = []
    older: list[str] = []
    tasks: set[str] = set()
    for arm, each in zip(arms, runs, strict=True):
        normalised: dict[str, dict[int, float]] = {}
        for ref in arm.used:
            report = each.runs[ref.episode][1]
            if report.task_scores is None:  # what it ran, from its settings and milestones, says whether it matters
                tasks |= set(report.settings.tasks or []) | {m.task for m in report.milestones}
                older.append(f"{arm.arm} episode {ref.episode}")
                continue
            tasks |= set(report.task_scores) | set(report.unscored_tasks)
            where = f"{arm.arm} episode {ref.episode} (seed {ref.seed})"
            excluded += [f"{where}: task {task} unscored, left out" for task in report.unscored_tasks]
            for task, scored in report.task_scores.items():
                if scored.max_score <= 0:
                    excluded.append(f"{where}: task {task} has max score 0, which no score can be normalised by")
                else:
                    normalised.setdefault(task, {})[ref.seed] = scored.score / scored.max_score
        if arm.used:
            scores[arm.arm] = normalised
    if len(tasks) < 2:
        return None
    if older:
        return AcrossTasks(
            tasks=sorted(tasks),
            unavailable=f"no per-task scores in the reports of {', '.join(older)} (written before mcu-arms recorded "
            "them): rerun those episodes for the aggregates across tasks",
        )
    if not scores:
        return AcrossTasks(tasks=sorted(tasks), unavailable="no arm has a finished episode")
    return across_tasks(scores, baseline, excluded=excluded)


def tool_of(provenance: Provenance) -> str:
    """The mcu-arms that made a report, as compared: its version, and its commit when it ran from a checkout."""
    if not provenance.mcu_arms_commit:
        return provenance.mcu_arms_version
    return f"{provenance.mcu_arms_version} at {provenance.mcu_arms_commit[:12]}" + (
        " (dirty)" if provenance.mcu_arms_dirty else ""
    )


def simulator_label(arm: ArmAnalysis) -> str:
    return (arm.latest.simulator_label if arm.latest else None) or label_of(arm.settings.simulator)


def analyse(
    items: list[str],
    env: Environment,
    *,
    baseline: str | None = None,
    episode: int | None = None,
    experiments: list[str] | None = None,
    show_all: bool = False,
    tags: dict[str, str] | None = None,
) -> Analysis:
    """Analyse arms (files, names, output dirs, or a campaign file: its episodes only). The baseline defaults to the
    first arm; `episode` (--run N) and `experiments` (--experiment PREFIX) choose what the automatic choice cannot;
    `tags` (--tag KEY=VALUE) keeps the episodes run with every one of them, the others excluded as "other tags"."""
    with without_cyclic_gc():  # its objects hold no cycles: a tenth of its time was the collector's passes
        return _analyse(items, env, baseline, episode, experiments, show_all, tags)


def _analyse(
    items: list[str],
    env: Environment,
    baseline: str | None,
    episode: int | None,
    experiments: list[str] | None,
    show_all: bool,
    tags: dict[str, str] | None,
) -> Analysis:
    if episode is not None and episode < 1:
        raise UserError(f"{episode} is not an episode number", key="--run", allowed="an integer >= 1")
    if episode is not None and experiments:
        raise UserError("choose by --run or by --experiment, not both", key="--experiment")
    targets = resolve_targets(items, env)
    names = [t.name for t in targets]
    baseline_name = baseline if baseline is not None else names[0]
    if baseline_name not in names:
        raise UserError(
            f"'{baseline_name}' is not one of the arms compared", key="--baseline", allowed=", ".join(names)
        )
    flags: list[Flag] = []
    wanted = dict(tags or {})
    runs = [read_arm_runs(target, episode, flags, wanted) for target in targets]
    if episode is not None:
        choices: dict[str, tuple[str | None, str]] = {
            each.target.name: (each.runs[episode][1].fingerprint, f"--run {episode}")
            if episode in each.runs
            else (None, f"no episode {episode}")
            for each in runs
        }
    else:
        choices = choose_experiments(runs, experiments or [])
    analysed = [_arm_analysis(each, choices[each.target.name], episode, flags) for each in runs]
    arms = [arm for arm, _ in analysed]
    reports = [report for _, report in analysed]
    _cross_arm_flags(arms, flags)
    base_index = names.index(baseline_name)
    campaigns = {target.campaign for target in targets}
    differences, family = compare_with_baseline(arms, base_index)
    return Analysis(
        baseline=baseline_name,
        campaign=campaigns.pop() if len(campaigns) == 1 else None,
        tags=wanted,
        show_all=show_all,
        arms=arms,
        settings=setting_rows([arm.settings for arm in arms], show_all),
        milestones=_milestone_rows(arms, reports, base_index),
        verdict=_verdict(arms, base_index),
        differences=differences,
        family=family,
        across_tasks=_across_tasks(arms, runs, baseline_name),
        flags=flags,
    )
