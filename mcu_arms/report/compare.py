"""The analysis as tables: the cells the console, markdown and the results browser show, the tidy CSV, and markdown.

Rendering only: every number comes from report/analysis.py's Analysis, and every sentence about a statistic is the
one the analysis wrote (a difference's `text`). What belongs to one episode (counters by cause, the purple's own
counters) is shown in its own table, labelled with its episode, never beside the statistics over replicates.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from mcu_arms.contracts.agent_report import in_its_words
from mcu_arms.contracts.catalog import CODEX_AGENTS, PLANNED_AGENTS
from mcu_arms.contracts.states import INFRASTRUCTURE_CAUSES, NO_EFFECT_LABEL, NO_EFFECT_PREFIX
from mcu_arms.report.analysis import (
    Analysis,
    ArmAnalysis,
    MilestoneCell,
    SettingRow,
    short,
    simulator_label,
    tags_text,
)
from mcu_arms.report.analysis_model import UNREADABLE_RUN
from mcu_arms.stats.basics import Summary

# Which agent kinds report each purple counter (and have a compaction limit). A row is shown only when one of the
# arms compared has such an agent; the cells of the other arms say NOT_ITS_AGENT, never a blank that reads as zero.
REPORTED_BY: dict[str, frozenset[str]] = {
    "failed_turns": CODEX_AGENTS | PLANNED_AGENTS,
    "compactions": CODEX_AGENTS,
    "overflow_resets": CODEX_AGENTS,
    "compaction_limit": CODEX_AGENTS,
    **{
        key: PLANNED_AGENTS
        for key in (
            "decisions",
            "invalid_outputs",
            "stale_replans",
            "reflex_interrupts",
            "median_planner_ms",
            "median_decision_ms",
        )
    },
}
NOT_REACHED = "—"
UNAVAILABLE = "n/a"
NOT_ITS_AGENT = "·"
NOT_ITS_AGENT_LEGEND = f"{NOT_ITS_AGENT} this arm's agent does not report it"
CELL_WORDS = {
    "not reached": NOT_REACHED,
    "unavailable": UNAVAILABLE,
    "no run": "no run",
    "none finished": "none finished",
}
METRIC_LABELS = {
    "score": "score",
    "sim_score": "sim score",
    "steps_run": "steps run",
    "wall_s": "wall s",
    "steps_per_minute": "steps/min",
    "noops": "noops",
    "infrastructure_noops": "infrastructure noops",
}
CSV_COLUMNS = ("arm", "metric", "statistic", "value")


def number(value: float | None, digits: int = 2) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def summary_text(summary: Summary | None, digits: int = 2) -> str:
    """A metric over an arm's episodes: the one value at n = 1, else the mean with its interval and n."""
    if summary is None or summary.mean is None:
        return ""
    if summary.n == 1:
        return number(summary.mean, digits)
    return summary.text(digits)


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(counts.items()))


def _purple_counter(arm: ArmAnalysis, key: str) -> str:
    """A purple's own counter; NOT_ITS_AGENT for agents of a kind that never reports it."""
    facts = arm.latest
    if facts is None:
        return ""
    if arm.settings.agent not in REPORTED_BY[key]:
        return NOT_ITS_AGENT
    if not facts.purple_report:
        return "no purple report"
    value = getattr(facts, key)
    if value is None:
        return "not reported"
    if key == "invalid_outputs" and facts.invalid_outputs_by_kind:
        return f"{value} ({_counts(facts.invalid_outputs_by_kind)})"
    if key == "failed_turns" and facts.failed_turns_by_reason:
        return f"{value} ({_counts(facts.failed_turns_by_reason)}){in_its_words(facts.top_failure_reasons)}"
    return number(value, 1) if isinstance(value, float) else str(value)


def replicates_text(arm: ArmAnalysis) -> str:
    if arm.n == 0:
        return "n = 0"
    seeds = ", ".join(str(seed) for seed in arm.seeds)
    return f"n = {arm.n} (seed{'s' if arm.n > 1 else ''} {seeds})"


def experiment_text(arm: ArmAnalysis) -> str:
    if arm.experiment.fingerprint is None:
        return f"none ({arm.experiment.why})"
    return f"{short(arm.experiment.fingerprint)} ({arm.experiment.why})"


def _share(arm: ArmAnalysis) -> str:
    """Infrastructure noops with their share of the steps run."""
    facts = arm.latest
    if facts is None or facts.infrastructure_share is None:
        return ""
    noops = sum(count for cause, count in facts.infrastructure.items() if cause in INFRASTRUCTURE_CAUSES)
    return f"{noops} ({facts.infrastructure_share:.1%})"


def _failed_turns(arm: ArmAnalysis) -> str:
    """A codex agent's failed turns, with their share of the steps when any failed."""
    shown = _purple_counter(arm, "failed_turns")
    facts = arm.latest
    if facts is not None and facts.failed_turns and facts.steps_run:
        shown += f" ({facts.failed_turns / facts.steps_run:.1%} of steps)"
    return shown


def result_rows(result: Analysis) -> list[tuple[str, list[str]]]:
    """The statistics over each arm's episodes used, one row per metric, one cell per arm."""
    arms = result.arms
    rows: list[tuple[str, list[str]]] = [
        ("status", [arm.status for arm in arms]),
        ("experiment", [experiment_text(arm) for arm in arms]),
        ("replicates", [replicates_text(arm) for arm in arms]),
        ("excluded", [str(len(arm.excluded)) for arm in arms]),
        ("simulator", [simulator_label(arm) for arm in arms]),
    ]
    rows += [(label, [summary_text(arm.metrics.get(name)) for arm in arms]) for name, label in METRIC_LABELS.items()]
    rows.append(("max score", [number(arm.max_score) for arm in arms]))
    return rows


def _no_effect(fallbacks: dict[str, int], wanted: bool) -> dict[str, int]:
    """The inputs without effect (by key, the prefix dropped) when `wanted`, else the simulator's other fallbacks."""
    if wanted:
        return {
            key.removeprefix(NO_EFFECT_PREFIX): n for key, n in fallbacks.items() if key.startswith(NO_EFFECT_PREFIX)
        }
    return {key: n for key, n in fallbacks.items() if not key.startswith(NO_EFFECT_PREFIX)}


def episode_rows(result: Analysis) -> list[tuple[str, list[str]]]:
    """What belongs to one episode (the latest used, else the latest run), one row per counter; a purple counter's
    row only when an arm's agent reports it."""
    arms = result.arms

    def facts(get: Any) -> list[str]:
        return [get(arm) if arm.latest is not None else "" for arm in arms]

    def applies(label: str) -> bool:
        key = AGENT_ROWS.get(label)
        return key is None or any(arm.settings.agent in REPORTED_BY[key] for arm in arms)

    rows: list[tuple[str, list[str]]] = [
        ("episode", facts(lambda arm: f"{arm.latest.episode} ({arm.latest.status})")),
        ("noops by cause", facts(lambda arm: _counts(arm.latest.noops))),
        ("infrastructure", [_share(arm) for arm in arms]),
        ("infrastructure by cause", facts(lambda arm: _counts(arm.latest.infrastructure))),
        ("dropped keys", facts(lambda arm: _counts(arm.latest.dropped_keys))),
        (NO_EFFECT_LABEL, facts(lambda arm: _counts(_no_effect(arm.latest.sim_fallbacks, True)))),
        ("sim fallbacks", facts(lambda arm: _counts(_no_effect(arm.latest.sim_fallbacks, False)))),
        ("failed turns", [_failed_turns(arm) for arm in arms]),
        ("compactions", [_purple_counter(arm, "compactions") for arm in arms]),
        ("overflow resets", [_purple_counter(arm, "overflow_resets") for arm in arms]),
        ("decisions", [_purple_counter(arm, "decisions") for arm in arms]),
        ("invalid outputs", [_purple_counter(arm, "invalid_outputs") for arm in arms]),
        ("stale re-plans", [_purple_counter(arm, "stale_replans") for arm in arms]),
        ("reflex interrupts", [_purple_counter(arm, "reflex_interrupts") for arm in arms]),
        ("planner ms (median)", [_purple_counter(arm, "median_planner_ms") for arm in arms]),
        ("decision ms (median)", [_purple_counter(arm, "median_decision_ms") for arm in arms]),
        ("compaction limit", [_compaction_limit(arm) for arm in arms]),
    ]
    return [(label, cells) for label, cells in rows if applies(label)]


AGENT_ROWS = {  # episode_rows' label -> the counter whose agents it applies to
    "failed turns": "failed_turns",
    "compactions": "compactions",
    "overflow resets": "overflow_resets",
    "decisions": "decisions",
    "invalid outputs": "invalid_outputs",
    "stale re-plans": "stale_replans",
    "reflex interrupts": "reflex_interrupts",
    "planner ms (median)": "median_planner_ms",
    "decision ms (median)": "median_decision_ms",
    "compaction limit": "compaction_limit",
}


def _compaction_limit(arm: ArmAnalysis) -> str:
    return str(arm.compaction_limit) if arm.settings.agent in REPORTED_BY["compaction_limit"] else NOT_ITS_AGENT


def episode_legend(rows: list[tuple[str, list[str]]]) -> str | None:
    """What NOT_ITS_AGENT means, when a row shows it."""
    return NOT_ITS_AGENT_LEGEND if any(NOT_ITS_AGENT in cells for _, cells in rows) else None


def cell_text(cell: MilestoneCell) -> str:
    """One episode: the step (or —, n/a); several: reached k/n · the Kaplan–Meier median steps [its interval], or
    "not reached" (episodes that did not reach it count as censored at their steps run, never left out)."""
    if cell.state == "unavailable" or cell.stats is None:
        return CELL_WORDS.get(cell.state, "")
    if cell.time_to_event is not None:
        return f"{cell.stats.reached}/{cell.stats.n} · {cell.time_to_event.median_text()}"
    if cell.state == "reached":
        return str(cell.step)
    return CELL_WORDS.get(cell.state, "")


def milestone_text(cell: MilestoneCell, is_baseline: bool) -> str:
    text = cell_text(cell)
    if cell.delta is not None and not is_baseline:
        text += f" ({cell.delta:+d})"
    return text


def setting_text(value: Any) -> str:
    """A setting as the tables and markdown show it: TOML-style booleans, lists joined, None blank."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def setting_label(row: SettingRow) -> str:
    if row.ignored:
        return f"{row.key} (ignored)"
    return f"{row.key} (follows {row.follows})" if row.follows else row.key


def excluded_lines(result: Analysis) -> list[str]:
    """Every episode left out of the statistics, with its reason; those whose files broke a reading rule
    (contracts/reading.py) first, as unreadable."""
    unreadable = [f"{flag.arm} {flag.message}" for flag in result.flags if flag.kind == UNREADABLE_RUN]
    return unreadable + [
        f"{arm.arm} episode {each.episode} (seed {each.seed}, {each.status}): {each.reason}: {each.detail}"
        for arm in result.arms
        for each in arm.excluded
    ]


def across_tasks_title(result: Analysis) -> str | None:
    """The across-tasks section's heading (None: fewer than 2 tasks, no section)."""
    section = result.across_tasks
    if section is None:
        return None
    if section.unavailable is not None:
        return "across tasks: not available"
    return (
        f"across {len(section.tasks)} tasks ({', '.join(section.tasks)}): scores normalised per task (score / max), "
        "95% stratified bootstrap intervals"
    )


def across_tasks_lines(result: Analysis) -> list[str]:
    """The across-tasks section in words: each arm's IQM with its interval and n, each arm's probability of
    improvement over the baseline, what was left out; or why it is not available. Empty below 2 tasks."""
    section = result.across_tasks
    if section is None:
        return []
    if section.unavailable is not None:
        return [section.unavailable]
    return [arm.text for arm in section.arms] + [each.text for each in section.improvement] + section.excluded


def filter_text(result: Analysis) -> str | None:
    """The `--tag` filter in force, in words (None: none)."""
    return f"only episodes run with tags {tags_text(result.tags)}" if result.tags else None


def annotation_lines(result: Analysis) -> list[str]:
    """The tags and note of each episode used (`run --tag`, `--note`): why it was run. Empty when none has any."""
    lines = []
    for arm in result.arms:
        for ref in arm.used:
            if ref.tags or ref.note:
                said = "; ".join(part for part in (tags_text(ref.tags), ref.note) if part)
                lines.append(f"{arm.arm} episode {ref.episode} (seed {ref.seed}): {said}")
    return lines


def tidy_numbers(result: Analysis) -> list[tuple[str, str, str, float]]:
    """The analysis as (arm, metric, statistic, value) rows of numbers only — what --csv prints.

    Per metric: n, mean, std, ci_low, ci_high, and each episode's value as `episode:N`. Per milestone
    (`milestone:task/identity`): reached, n, and over several episodes km_median, km_median_low, km_median_high,
    reached_by_cap (Kaplan–Meier), over one its step; delta. Per difference (`difference:<metric>`, under the arm,
    against the baseline): estimate, ci_low, ci_high, p, p_adjusted, n_a, n_b, seeds_needed, `design:<paired or
    unpaired>` = 1, `verdict:<word>` = 1, and when paired pairing_correlation, variance_paired, variance_unpaired; per
    seed left out of a pairing (`pairing`, under the arm): `excluded_seed:<seed>:<arm lacking it>:<cause>` = 1. Per
    arm: `episodes` used/excluded:<reason>, `experiment:<fingerprint>` = n. Across tasks (2 or more, under the arm):
    `across_tasks` iqm, iqm_ci_low, iqm_ci_high, tasks, scores, `profile:<τ>` (with profile_low:<τ>, profile_high:<τ>),
    probability_of_improvement (over the baseline) with poi_ci_low, poi_ci_high; `across_tasks:<task>` `seed:<seed>` =
    the normalised score. Across arms (arm empty): `verdict` comparable, trustworthy, exit_code.
    """
    rows: list[tuple[str, str, str, float]] = []

    def add(arm: str, metric: str, statistic: str, value: float | None) -> None:
        if value is not None:
            rows.append((arm, metric, statistic, float(value)))

    for arm in result.arms:
        add(arm.arm, "episodes", "used", arm.n)
        for each in arm.excluded:
            add(arm.arm, "episodes", f"excluded:{each.reason}:episode:{each.episode}", 1)
        if arm.experiment.fingerprint is not None:
            add(arm.arm, f"experiment:{arm.experiment.fingerprint}", "n", arm.n)
        for name, summary in arm.metrics.items():
            add(arm.arm, name, "n", summary.n)
            add(arm.arm, name, "mean", summary.mean)
            add(arm.arm, name, "std", summary.std)
            add(arm.arm, name, "ci_low", summary.ci.low if summary.ci else None)
            add(arm.arm, name, "ci_high", summary.ci.high if summary.ci else None)
            for ref, value in zip(arm.used, _episode_values(arm, name), strict=True):
                add(arm.arm, name, f"episode:{ref.episode}", value)
    for row in result.milestones:
        for arm, cell in zip(result.arms, row.cells, strict=True):
            metric = f"milestone:{row.task}/{row.identity}"
            stats = cell.stats
            if stats is not None and stats.available:
                add(arm.arm, metric, "reached", stats.reached)
                add(arm.arm, metric, "n", stats.n)
            survival = cell.time_to_event
            if survival is not None:
                add(arm.arm, metric, "km_median", survival.median)
                add(arm.arm, metric, "km_median_low", survival.median_ci[0])
                add(arm.arm, metric, "km_median_high", survival.median_ci[1])
                add(arm.arm, metric, "reached_by_cap", survival.reached_by_cap)
            elif cell.state == "reached":
                add(arm.arm, metric, "step", cell.step)
            add(arm.arm, metric, "delta", cell.delta)
    for difference in result.differences:
        for seed in difference.pairing.excluded:
            add(difference.arm, "pairing", f"excluded_seed:{seed.seed}:{seed.arm}:{seed.cause}", 1)
        for line in difference.lines():
            metric = f"difference:{line.metric}"
            add(line.arm, metric, "estimate", line.estimate)
            add(line.arm, metric, "ci_low", line.interval.low if line.interval else None)
            add(line.arm, metric, "ci_high", line.interval.high if line.interval else None)
            add(line.arm, metric, "p", line.p)
            add(line.arm, metric, "p_adjusted", line.p_adjusted)
            add(line.arm, metric, "n_a", line.n_a)
            add(line.arm, metric, "n_b", line.n_b)
            add(line.arm, metric, "seeds_needed", line.seeds_needed)
            add(line.arm, metric, f"design:{line.design}", 1)
            add(line.arm, metric, f"verdict:{line.verdict}", 1)
            effect = line.pairing_effect
            if effect is not None:
                add(line.arm, metric, "pairing_correlation", effect.correlation)
                add(line.arm, metric, "variance_paired", effect.variance_paired)
                add(line.arm, metric, "variance_unpaired", effect.variance_unpaired)
    _across_tasks_numbers(result, add)
    add("", "verdict", "comparable", int(result.verdict.comparable))
    add("", "verdict", "trustworthy", int(result.verdict.trustworthy))
    add("", "verdict", "exit_code", result.exit_code)
    return rows


def _across_tasks_numbers(result: Analysis, add: Callable[[str, str, str, float | None], None]) -> None:
    section = result.across_tasks
    if section is None:
        return
    for aggregate in section.arms:
        name, interval, profile = aggregate.arm, aggregate.iqm_interval, aggregate.profile
        add(name, "across_tasks", "iqm", aggregate.iqm)
        add(name, "across_tasks", "iqm_ci_low", interval.low if interval else None)
        add(name, "across_tasks", "iqm_ci_high", interval.high if interval else None)
        add(name, "across_tasks", "tasks", aggregate.tasks)
        add(name, "across_tasks", "scores", aggregate.scores)
        for index, tau in enumerate(profile.thresholds):
            add(name, "across_tasks", f"profile:{tau:g}", profile.share[index])
            add(name, "across_tasks", f"profile_low:{tau:g}", profile.low[index] if profile.low else None)
            add(name, "across_tasks", f"profile_high:{tau:g}", profile.high[index] if profile.high else None)
        for task, seeds in aggregate.normalised.items():
            for seed, value in sorted(seeds.items()):
                add(name, f"across_tasks:{task}", f"seed:{seed}", value)
    for each in section.improvement:
        add(each.arm, "across_tasks", "probability_of_improvement", each.probability)
        add(each.arm, "across_tasks", "poi_ci_low", each.interval.low if each.interval else None)
        add(each.arm, "across_tasks", "poi_ci_high", each.interval.high if each.interval else None)


def _episode_values(arm: ArmAnalysis, name: str) -> list[float | None]:
    """Each used episode's value of a metric, in `arm.used` order (a metric an episode lacks is None)."""
    summary = arm.metrics.get(name)
    if summary is None or summary.n != arm.n:
        return [None] * arm.n
    return list(summary.values)


def to_csv(result: Analysis) -> str:
    """Tidy numbers: arm, metric, statistic, value (see `tidy_numbers`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows((arm, metric, statistic, repr(value)) for arm, metric, statistic, value in tidy_numbers(result))
    return buffer.getvalue()


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def to_markdown(result: Analysis) -> str:
    names = result.arm_names()
    header = ["", *(f"{name} (baseline)" if name == result.baseline else name for name in names)]
    lines = [f"**{result.verdict.text}**", ""]
    if result.tags:
        lines += [f"_{filter_text(result)}_", ""]
    for flag in result.flags:
        lines.append(f"- **{flag.kind}**{f' ({flag.arm})' if flag.arm else ''}: {flag.message}")
    if result.flags:
        lines.append("")
    for difference in result.differences:
        lines += [f"- {line.text}" for line in difference.lines()]
    if result.differences:
        lines += ["", f"_Statistics: {result.statistics_method}. Multiple comparisons: {result.family}._", ""]
    section = result.across_tasks
    if (across := across_tasks_title(result)) is not None:
        lines += [f"## {across[0].upper()}{across[1:]}", "", *(f"- {line}" for line in across_tasks_lines(result))]
        lines += ["", f"_{section.method}_", ""] if section and section.unavailable is None else [""]
    if result.settings:
        lines += ["## Settings", ""]
        lines += _md_table(
            header, [[setting_label(row), *(setting_text(v) for v in row.values)] for row in result.settings]
        )
        lines.append("")
    lines += ["## Results (over the episodes used)", ""]
    lines += _md_table(header, [[key, *cells] for key, cells in result_rows(result)])
    lines.append("")
    if result.milestones:
        lines += ["## Milestones (step reached; delta vs baseline)", ""]
        rows = [
            [
                f"{m.task}/{m.identity}",
                *(milestone_text(c, n == result.baseline) for c, n in zip(m.cells, names, strict=True)),
            ]
            for m in result.milestones
        ]
        lines += _md_table(header, rows)
        lines.append("")
    annotations = annotation_lines(result)
    if annotations:
        lines += ["## Tags and notes of the episodes used", "", *(f"- {line}" for line in annotations), ""]
    excluded = excluded_lines(result)
    lines += ["## Excluded episodes", ""] + ([f"- {line}" for line in excluded] or ["- none"]) + [""]
    lines += ["## One episode per arm (not a statistic)", ""]
    facts = episode_rows(result)
    lines += _md_table(header, [[key, *cells] for key, cells in facts])
    lines.append("")
    if (legend := episode_legend(facts)) is not None:
        lines += [f"_{legend}_", ""]
    for arm in result.arms:
        if arm.status != "finished" and arm.latest is not None:
            lines.append(f"- {arm.arm} {arm.status}: {arm.latest.failure_reason or 'no failure recorded'}")
            lines += [f"  - {role}: `{path}`" for role, path in arm.latest.logs.items()]
    return "\n".join(lines).rstrip() + "\n"
