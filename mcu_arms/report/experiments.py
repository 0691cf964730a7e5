"""Which arms, and which of each arm's experiments, a comparison is made over: the arms named on the command line
(files, names, output dirs, a campaign), each arm's readable runs split by experiment (one fingerprint), and the
choice of one experiment per arm — the one that matches the other arms except in what is under test, or a refusal
that lists the candidates (never silently "whatever ran last"). Also which settings differ between arms.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcu_arms.arms.campaign import is_campaign, load_campaign
from mcu_arms.arms.plan import apply_overrides, resolve_settings
from mcu_arms.arms.spec import ARM_NAME_PATTERN, ArmSpec, load_arm
from mcu_arms.contracts.annotations import matches_tags
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.run_report import RunReport
from mcu_arms.contracts.settings import (
    Overrides,
    Settings,
    differing_keys,
    differing_settings,
    flat_settings,
    setting_follows,
)
from mcu_arms.environment import Environment
from mcu_arms.layout import EPISODE_PATTERN, arm_runs
from mcu_arms.report.analysis_model import NOISE_SETTINGS, UNREADABLE_RUN, Experiment, Flag, SettingRow

MAX_COMBINATIONS = 4096  # experiments tried together when choosing one per arm; more is refused as ambiguous
FINGERPRINT_SHOWN = 12  # characters of a fingerprint shown where a prefix is enough


# --- which arms ------------------------------------------------------------------------------------------------


class ArmTarget(BaseModel):
    """An arm named on the command line, resolved to its arm file (if any) and its output dir, with its spec as read
    once (an arm written inline in a campaign file has no file of its own); a campaign's arms carry its name."""

    model_config = {"arbitrary_types_allowed": True}

    spec: ArmSpec | None = None
    name: str
    source: Path | None
    output_dir: Path
    campaign: str | None = None
    differs_in: list[str] | None = None  # a campaign's variant: what it states it changes


def _campaign_targets(path: Path, env: Environment) -> list[ArmTarget]:
    """A campaign's baseline, then its variants."""
    campaign = load_campaign(path, env.arms_dir)
    return [
        ArmTarget(
            name=arm.spec.name,
            source=arm.source if arm.source != path else None,
            spec=arm.spec if arm.source == path else None,
            output_dir=env.output_dir / arm.spec.name,
            campaign=campaign.name,
            differs_in=list(arm.differs_in),
        )
        for arm in campaign.arms()
    ]


def resolve_targets(items: list[str], env: Environment) -> list[ArmTarget]:
    """Each item is an arm file, a campaign file (its baseline, then its variants), an output/<arm>/ dir, or a name
    (arms/NAME.toml, else output/NAME/)."""
    if not items:
        raise UserError("name the arms to compare (arm files, names or output dirs)", allowed=_known_arms(env))
    targets: list[ArmTarget] = []
    for item in items:
        path = Path(item) if Path(item).is_absolute() else env.cwd / item
        for target in _campaign_targets(path, env) if is_campaign(path) else [_resolve_target(item, env)]:
            _add_target(targets, target)
    return targets


def _add_target(targets: list[ArmTarget], target: ArmTarget) -> None:
    """Add `target` unless it is already there; two different files naming one arm are an error."""
    same_name = next((t for t in targets if t.name == target.name), None)
    if same_name is None:
        targets.append(target)
    elif same_name.source and target.source and same_name.source.resolve() != target.source.resolve():
        raise UserError(
            f"{same_name.source} and {target.source} both name arm '{target.name}': they share "
            f"output/{target.name}/, so their runs cannot be told apart"
        )


def _resolve_target(item: str, env: Environment) -> ArmTarget:
    path = Path(item)
    candidate = path if path.is_absolute() else env.cwd / path
    if item.endswith(".toml") or candidate.is_file():
        spec = load_arm(candidate)
        return ArmTarget(name=spec.name, spec=spec, source=candidate, output_dir=env.output_dir / spec.name)
    if candidate.is_dir() and any(EPISODE_PATTERN.match(p.name) for p in candidate.iterdir()):
        source = env.arms_dir / f"{candidate.name}.toml"
        return ArmTarget(name=candidate.name, source=source if source.is_file() else None, output_dir=candidate)
    if re.fullmatch(ARM_NAME_PATTERN, item):
        source = env.arms_dir / f"{item}.toml"
        output = env.output_dir / item
        if source.is_file():
            spec = load_arm(source)  # kept: the settings it resolves to are compared with each run's
            return ArmTarget(name=spec.name, spec=spec, source=source, output_dir=output)
        if output.is_dir():
            return ArmTarget(name=item, source=None, output_dir=output)
    raise UserError(
        f"'{item}' is neither an arm file, nor an arm in {env.arms_dir}, nor a run in {env.output_dir}",
        allowed=_known_arms(env),
    )


def _known_arms(env: Environment) -> str:
    names = {p.stem for p in env.arms_dir.glob("*.toml")} if env.arms_dir.is_dir() else set()
    if env.output_dir.is_dir():
        names |= {p.name for p in env.output_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return ", ".join(sorted(names)) or "none in arms/ or output/"


def _readable_runs(target: ArmTarget, episode: int | None, flags: list[Flag]) -> dict[int, tuple[Path, RunReport]]:
    """Every run of the arm that wrote a readable report, by episode number (plan-only dirs have none). An
    unreadable report is an error only when it is the run asked for (--run N) or the arm has no other; otherwise
    it is flagged and the others are compared."""
    runs: dict[int, tuple[Path, RunReport]] = {}
    unreadable: dict[int, str] = {}
    for run in arm_runs(target.output_dir):
        if run.report_error:
            unreadable[run.number] = run.report_error
        elif run.report is not None:
            runs[run.number] = (run.run_dir.report, run.report)
    runs = dict(sorted(runs.items()))
    if episode in unreadable or (unreadable and not runs):
        raise UserError((unreadable.get(episode) if episode is not None else None) or next(iter(unreadable.values())))
    for number, error in unreadable.items():
        message = f"episode {number} skipped, unreadable: {error}"
        flags.append(Flag(kind=UNREADABLE_RUN, arm=target.name, message=message))
    return runs


def settings_from_file(target: ArmTarget, overrides: dict[str, Any]) -> tuple[Settings, int]:
    """The settings the arm resolves to today (its file, or its campaign's inline keys), with the run's overrides."""
    # a target without a spec of its own has an arm file (only an arm written inline in a campaign has none)
    spec: ArmSpec = target.spec or load_arm(target.source)  # type: ignore[arg-type]
    source = target.source or target.output_dir
    if overrides:
        spec = apply_overrides(spec, Overrides.model_validate(overrides), source)
    settings, compaction = resolve_settings(spec, [])
    return settings, compaction.limit


# --- experiments -----------------------------------------------------------------------------------------------


def episode_ref(report: RunReport) -> dict[str, Any]:
    return {
        "episode": report.episode,
        "seed": report.settings.seed,
        "status": report.status,
        "fingerprint": report.fingerprint,
        "started_at": report.started_at,
        "attempt": report.attempt,
        "campaign": report.campaign.name if report.campaign else None,
        "tags": dict(report.tags),
        "note": report.note,
        "look": report.sequential.look if report.sequential else None,
    }


def short(fingerprint_text: str) -> str:
    """A fingerprint as shown where a prefix is enough: its hash part."""
    return fingerprint_text.split(":", 1)[-1][:FINGERPRINT_SHOWN]


class ArmRuns(BaseModel):
    """One arm's readable runs split by experiment (what the choice is made over)."""

    model_config = {"arbitrary_types_allowed": True}

    target: ArmTarget
    runs: dict[int, tuple[Path, RunReport]]  # of its campaign only, when compared as a campaign's arm
    other_campaign: list[RunReport]
    other_tags: list[RunReport]  # of its campaign, but without every tag asked for (`--tag`)
    file_settings: Settings | None  # what the arm file says today (None: no arm file)
    experiments: dict[str, list[RunReport]]  # fingerprint -> its runs, oldest first; newest experiment first

    def candidates(self) -> list[str]:
        """Experiments with at least one finished episode, newest first."""
        return [fp for fp, reports in self.experiments.items() if any(r.status == "finished" for r in reports)]

    def describe(self, fp: str) -> Experiment:
        reports = self.experiments[fp]
        settings = reports[-1].settings
        differs = differing_settings([self.file_settings, settings]) if self.file_settings is not None else []
        ours, theirs = flat_settings(settings), flat_settings(self.file_settings) if self.file_settings else {}
        return Experiment(
            fingerprint=fp,
            episodes=[r.episode for r in reports],
            finished=len({r.settings.seed for r in reports if r.status == "finished"}),
            first_started=min(r.started_at for r in reports),
            last_started=max(r.started_at for r in reports),
            differs=differs,
            values={key: [ours.get(key), theirs.get(key)] for key in differs},
        )


def read_arm_runs(target: ArmTarget, episode: int | None, flags: list[Flag], tags: dict[str, str]) -> ArmRuns:
    every = _readable_runs(target, episode, flags)
    ours = {n: pair for n, pair in every.items() if target.campaign is None or _of_campaign(pair[1], target.campaign)}
    other = [report for n, (_, report) in every.items() if n not in ours]
    runs = {n: pair for n, pair in ours.items() if matches_tags(pair[1].tags, tags)}
    other_tags = [report for n, (_, report) in ours.items() if n not in runs]
    experiments: dict[str, list[RunReport]] = {}
    for number in sorted(runs, reverse=True):
        experiments.setdefault(runs[number][1].fingerprint, []).insert(0, runs[number][1])
    # as reports keep them: secrets masked (a masked report value never 'differs' from the file's, nor shows it)
    from_file = settings_from_file(target, {})[0] if target.source is not None or target.spec is not None else None
    file_settings = from_file.redacted() if from_file is not None else None
    return ArmRuns(
        target=target,
        runs=runs,
        other_campaign=other,
        other_tags=other_tags,
        file_settings=file_settings,
        experiments=experiments,
    )


def _of_campaign(report: RunReport, campaign: str) -> bool:
    return report.campaign is not None and report.campaign.name == campaign


def counted_differences(settings: list[Settings]) -> list[str]:
    rows = setting_rows(settings, show_all=False)
    return [row.key for row in rows if row.counted()]


def _matches_prefix(fp: str, prefix: str) -> bool:
    return fp.startswith(prefix) or fp.split(":", 1)[-1].startswith(prefix)


def _candidates_text(arms: list[ArmRuns]) -> str:
    lines = []
    for each in arms:
        for fp in each.experiments:
            described = each.describe(fp)
            differs = ", ".join(
                f"{key} = {ours} (arm file: {theirs})" for key, (ours, theirs) in described.values.items()
            )
            lines.append(
                f"  {each.target.name}: experiment {short(fp)}: {differs or 'as its arm file says today'}; "
                f"n = {described.finished} finished; episodes {', '.join(map(str, described.episodes))}; "
                f"{described.first_started[:16]} – {described.last_started[:16]}"
            )
    return "\n".join(lines)


def choose_experiments(arms: list[ArmRuns], prefixes: list[str]) -> dict[str, tuple[str | None, str]]:
    """Per arm, (fingerprint, why): the experiment that matches the other arms except in what is under test. When that
    is not unique, a UserError lists the candidates and how to choose (--experiment PREFIX, --run N)."""
    how = "choose with --experiment PREFIX (repeatable, one per arm) or --run N"
    chosen: dict[str, tuple[str | None, str]] = {}
    open_arms: list[ArmRuns] = []
    for each in arms:
        candidates = each.candidates()
        if prefixes:
            picked = [fp for fp in candidates if any(_matches_prefix(fp, p) for p in prefixes)]
            if len(picked) > 1 or (not picked and candidates):
                what = "matches more than one" if picked else "matches none"
                raise UserError(
                    f"--experiment {' '.join(prefixes)} {what} of arm '{each.target.name}''s experiments:\n"
                    f"{_candidates_text([each])}",
                    key="--experiment",
                    allowed="a fingerprint prefix of one of them",
                )
            chosen[each.target.name] = (
                (picked[0], f"chosen by --experiment {short(picked[0])}") if picked else (None, "no finished episode")
            )
        elif not candidates:
            never = "no episode with the tags asked for" if each.other_tags else "never ran"
            chosen[each.target.name] = (None, "no finished episode" if each.runs else never)
        elif len(candidates) == 1:
            reason = (
                "its only experiment" if len(each.experiments) == 1 else "its only experiment with a finished episode"
            )
            chosen[each.target.name] = (candidates[0], reason)
        else:
            open_arms.append(each)
    if not open_arms:
        return chosen
    under_test = _under_test(arms)
    fixed = [each.experiments[fp][-1].settings for each in arms if (fp := chosen.get(each.target.name, (None, ""))[0])]
    combinations = list(
        itertools.islice(itertools.product(*(each.candidates() for each in open_arms)), MAX_COMBINATIONS + 1)
    )
    matches = []
    for combination in combinations[:MAX_COMBINATIONS]:
        settings = fixed + [each.experiments[fp][-1].settings for each, fp in zip(open_arms, combination, strict=True)]
        differing = counted_differences(settings)
        if (sorted(differing) == sorted(under_test)) if under_test is not None else len(differing) <= 1:
            matches.append(combination)
    if len(matches) != 1 or len(combinations) > MAX_COMBINATIONS:
        what = "more than one experiment of" if len(matches) > 1 else "no experiment of"
        names = ", ".join(f"'{each.target.name}'" for each in open_arms)
        tested = f"in {', '.join(under_test) or 'nothing'}" if under_test is not None else "in at most one setting"
        raise UserError(
            f"{what} {names} matches the other arms except {tested}: which to compare is not clear.\n"
            f"{_candidates_text(arms)}",
            key="--experiment",
            allowed=how,
        )
    tested = ", ".join(under_test) if under_test else "what is under test"
    for each, fp in zip(open_arms, matches[0], strict=True):
        chosen[each.target.name] = (
            fp,
            f"the one of its {len(each.candidates())} experiments that differs from the other arms only in {tested}",
        )
    return chosen


def _under_test(arms: list[ArmRuns]) -> list[str] | None:
    """What the arms differ in as their files say today (a campaign's variants: what they state); None when an arm
    has no file to say it."""
    if any(each.file_settings is None for each in arms):
        return None
    return counted_differences([each.file_settings for each in arms if each.file_settings is not None])


def setting_rows(settings: list[Settings], show_all: bool) -> list[SettingRow]:
    flats = [flat_settings(each) for each in settings]
    keys: list[str] = []
    for flat in flats:
        keys += [key for key in flat if key not in keys]
    differing = differing_keys(settings)
    rows = []
    for key in keys:
        ignored = key in NOISE_SETTINGS
        if key in differing and not ignored or show_all:
            rows.append(
                SettingRow(
                    key=key,
                    values=[flat.get(key) for flat in flats],
                    differs=key in differing,
                    ignored=ignored,
                    follows=setting_follows(key, settings, differing),
                )
            )
    return rows
