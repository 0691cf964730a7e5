"""Campaign files (`campaigns/NAME.toml`): a baseline arm, its variants, and the seeds every one of them runs.

    name = "agents"               # default: the file's name
    seeds = [0, 1, 2]             # or replicates = 3 (counting up from 0)
    max_parallel = 2              # default: what this host can take
    retries = 1                   # extra attempts for an episode that failed for infrastructure reasons

    [slurm]                       # `run --executor slurm`: what each arm's own [slurm] leaves unset
    time = "2-00:00:00"

    [baseline]
    arm = "demo"                  # an arm in arms/, or a path; or the arm's keys written here

    [[variants]]
    name = "demo_random"          # the arm this variant runs as (output/NAME/)
    differs_in = ["agent"]        # what it changes: checked against the resolved settings before anything starts
    agent = "random"              # the baseline's keys it overrides (or `arm = "..."`, an arm file of its own)

A variant states only the one thing under test; the campaign refuses one whose resolved settings differ from the
baseline's in anything else, or not in what it claims.
"""

from __future__ import annotations

import re
import tomllib
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mcu_arms.arms.plan import apply_overrides, resolve_settings
from mcu_arms.arms.spec import (
    ARM_NAME_PATTERN,
    ArmSpec,
    arm_path,
    describe_error,
    load_arm,
    parse_arm,
    refuse_long_seed_lists,
)
from mcu_arms.contracts.errors import UserError, did_you_mean, user_error
from mcu_arms.contracts.limits import (
    MAX_EPISODES_PER_RUN,
    MAX_PARALLEL,
    MAX_RETRIES,
    MAX_SEEDS_PER_ARM,
    MAX_VARIANTS,
    SEED_LIMIT,
)
from mcu_arms.contracts.settings import CampaignTag, Overrides, Settings, differing_settings
from mcu_arms.contracts.slurm import SlurmSettings
from mcu_arms.contracts.text import bounded
from mcu_arms.contracts.toml_text import parse_toml, toml_line

SHOWN_VALUE_CHARS = 120
CAMPAIGN_KEYS = (
    "name",
    "description",
    "seeds",
    "replicates",
    "max_parallel",
    "retries",
    "slurm",
    "baseline",
    "variants",
)
DEFAULT_RETRIES = 1


class CampaignArm(BaseModel):
    """One arm of a campaign, as it will run, and where its settings were written."""

    spec: ArmSpec
    source: Path  # the arm file, or the campaign file for an arm written inline
    differs_in: list[str] = []  # empty for the baseline

    model_config = {"arbitrary_types_allowed": True}


class Campaign(BaseModel):
    name: str
    path: Path
    description: str = ""
    seeds: list[int] | None = None
    max_parallel: int | None = None
    retries: int = DEFAULT_RETRIES
    slurm: SlurmSettings = SlurmSettings()  # site options for every arm; an arm's own [slurm] keys win
    baseline: CampaignArm
    variants: list[CampaignArm]

    def arms(self) -> list[CampaignArm]:
        return [self.baseline, *self.variants]

    def arm_names(self) -> list[str]:
        return [arm.spec.name for arm in self.arms()]


ParsedToml = tuple[str, dict[str, Any]]


def _parsed_toml(path: Path) -> ParsedToml | None:
    """A .toml file's text and table, read and parsed once; None when it cannot be (its loader then says why)."""
    if path.suffix != ".toml" or not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    refuse_long_seed_lists(text, path)
    try:
        return text, parse_toml(text, path)
    except UserError:
        return None


def is_campaign(path: Path) -> bool:
    """A campaign file: a TOML file with a [baseline] table (campaigns/ is where they live, but that is not
    required)."""
    if path.suffix != ".toml" or not path.is_file():
        return False
    try:
        return "baseline" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return path.parent.name == "campaigns"


def _shown(value: Any) -> str:
    """A value from the file as an error quotes it: bounded, so that 100,000 seeds make one short line."""
    return bounded(repr(value), SHOWN_VALUE_CHARS)


def _fail(message: str, path: Path, text: str, key: str, allowed: str | None = None) -> UserError:
    return UserError(message, path=path, line=toml_line(text, key), key=key, allowed=allowed)


def _validated(data: dict[str, Any], path: Path, text: str, prefix: str, model: type[BaseModel] = ArmSpec) -> Any:
    """An inline arm (or the campaign's [slurm] table), with any problem reported at its key in the campaign file."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise user_error(
            error,
            path=path,
            line_of=partial(toml_line, text),
            key_of=lambda key: f"{prefix}.{key}",
            describe=describe_error,
            every=True,
        ) from None


def _merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The baseline's keys with a variant's on top; tables ([ports], [codex], [env]...) merged key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        merged[key] = (
            _merged(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def _arm_file(reference: Any, path: Path, text: str, key: str, arms_dir: Path) -> Path:
    """`arm = "demo"` is arms/demo.toml; a path (with a / or ending in .toml) is relative to the project."""
    if not isinstance(reference, str) or not reference:
        raise _fail("must name an arm (arms/NAME.toml) or an arm file", path, text, key)
    if reference.endswith(".toml") or "/" in reference:
        candidate = Path(reference)
        return candidate if candidate.is_absolute() else arms_dir.parent / candidate
    try:
        return arm_path(arms_dir, reference)
    except UserError as error:
        raise error.at(path=path, line=toml_line(text, key), key=key) from None


def load_campaign(path: Path, arms_dir: Path, parsed: ParsedToml | None = None) -> Campaign:
    """Read a campaign file (or take its text and table, parsed already) and check that each variant differs from
    the baseline in exactly what it claims."""
    if parsed is None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError("no such campaign file", path=path) from None
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(f"cannot read the campaign file: {error}", path=path) from None
        refuse_long_seed_lists(text, path)
        parsed = text, parse_toml(text, path)
    text, data = parsed
    for key in data:
        if key not in CAMPAIGN_KEYS:
            raise _fail(
                f"unknown key{did_you_mean(key, CAMPAIGN_KEYS)}", path, text, key, allowed=", ".join(CAMPAIGN_KEYS)
            )
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(ARM_NAME_PATTERN, name):
        raise _fail("not a valid campaign name", path, text, "name", allowed="letters, digits, '_' and '-'")
    seeds = _seeds(data, path, text)
    max_parallel, retries = data.get("max_parallel"), data.get("retries", DEFAULT_RETRIES)
    if max_parallel is not None and (
        not isinstance(max_parallel, int) or isinstance(max_parallel, bool) or not 1 <= max_parallel <= MAX_PARALLEL
    ):
        allowed = f"an integer from 1 to {MAX_PARALLEL}"
        raise _fail(f"{max_parallel!r} is not allowed", path, text, "max_parallel", allowed=allowed)
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= MAX_RETRIES:
        raise _fail(f"{retries!r} is not allowed", path, text, "retries", allowed=f"an integer from 0 to {MAX_RETRIES}")

    slurm_table = data.get("slurm", {})
    if not isinstance(slurm_table, dict):
        raise _fail("must be a [slurm] table", path, text, "slurm")
    slurm = _validated(slurm_table, path, text, "slurm", SlurmSettings)

    baseline_table = data.get("baseline")
    if not isinstance(baseline_table, dict):
        raise _fail('a campaign needs a [baseline] table (`arm = "NAME"`, or the arm\'s keys)', path, text, "baseline")
    if "arm" in baseline_table:
        extra = [key for key in baseline_table if key != "arm"]
        if extra:
            raise _fail("with `arm = ...` the baseline takes no other keys", path, text, f"baseline.{extra[0]}")
        source = _arm_file(baseline_table["arm"], path, text, "baseline.arm", arms_dir)
        baseline_spec, baseline_keys = load_arm(source), tomllib.loads(source.read_text(encoding="utf-8"))
        baseline_keys.setdefault("name", baseline_spec.name)
    else:
        baseline_keys = {"name": f"{name}-baseline", **baseline_table}
        baseline_spec, source = _validated(baseline_keys, path, text, "baseline"), path
    baseline = CampaignArm(spec=baseline_spec, source=source)

    raw_variants = data.get("variants") or []
    if not isinstance(raw_variants, list) or not all(isinstance(v, dict) for v in raw_variants):
        raise _fail("must be [[variants]] tables", path, text, "variants")
    if len(raw_variants) > MAX_VARIANTS:
        raise _fail(
            f"{len(raw_variants)} variants are too many",
            path,
            text,
            "variants",
            allowed=f"at most {MAX_VARIANTS} [[variants]] tables",
        )
    episodes = len(seeds or baseline.spec.replicate_seeds()) * (1 + len(raw_variants))
    if episodes > MAX_EPISODES_PER_RUN:
        raise _fail(
            f"{episodes} episodes (seeds times arms) are too many for one campaign",
            path,
            text,
            next((key for key in ("seeds", "replicates") if key in data), "variants"),
            allowed=f"at most {MAX_EPISODES_PER_RUN} episodes",
        )
    baseline_settings = resolve_settings(baseline.spec, [])[0]
    variants = [
        _variant(index, table, baseline, baseline_settings, baseline_keys, path, text, arms_dir)
        for index, table in enumerate(raw_variants)
    ]
    seen_names: set[str] = {baseline.spec.name}
    for index, variant in enumerate(variants):
        if variant.spec.name in seen_names:
            raise _fail(
                f"arm name '{variant.spec.name}' is used twice in this campaign", path, text, f"variants[{index}].name"
            )
        seen_names.add(variant.spec.name)
    return Campaign(
        name=name,
        path=path,
        description=str(data.get("description", "")),
        seeds=seeds,
        max_parallel=max_parallel,
        retries=retries,
        slurm=slurm,
        baseline=baseline,
        variants=variants,
    )


def _seeds(data: dict[str, Any], path: Path, text: str) -> list[int] | None:
    seeds, replicates = data.get("seeds"), data.get("replicates")
    if seeds is not None and replicates is not None:
        raise _fail("give seeds = [...] or replicates = N, not both", path, text, "replicates")
    if replicates is not None:
        if not isinstance(replicates, int) or isinstance(replicates, bool) or not 1 <= replicates <= MAX_SEEDS_PER_ARM:
            raise _fail(
                f"{_shown(replicates)} is not allowed",
                path,
                text,
                "replicates",
                allowed=f"an integer from 1 to {MAX_SEEDS_PER_ARM}",
            )
        return list(range(replicates))
    if seeds is None:
        return None
    allowed = f"a list of at most {MAX_SEEDS_PER_ARM} distinct integers from 0 to 2^63 - 1 ({SEED_LIMIT - 1})"
    if isinstance(seeds, list) and len(seeds) > MAX_SEEDS_PER_ARM:
        raise _fail(f"{len(seeds)} seeds are too many", path, text, "seeds", allowed=allowed)
    valid = (
        isinstance(seeds, list)
        and seeds
        and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < SEED_LIMIT for s in seeds)
    )
    if not valid or len(set(seeds)) != len(seeds):
        raise _fail(f"{_shown(seeds)} is not allowed", path, text, "seeds", allowed=allowed)
    return list(seeds)


def _variant(
    index: int,
    table: dict[str, Any],
    baseline: CampaignArm,
    baseline_settings: Settings,
    baseline_keys: dict[str, Any],
    path: Path,
    text: str,
    arms_dir: Path,
) -> CampaignArm:
    prefix = f"variants[{index}]"
    claimed = table.get("differs_in")
    if not isinstance(claimed, list) or not claimed or not all(isinstance(key, str) for key in claimed):
        raise _fail(
            'each variant says what it changes: differs_in = ["setting", ...]', path, text, f"{prefix}.differs_in"
        )
    overrides = {key: value for key, value in table.items() if key not in ("differs_in", "arm")}
    if "arm" in table:
        if set(overrides) - {"name"}:
            extra = sorted(set(overrides) - {"name"})[0]
            raise _fail("with `arm = ...` a variant takes no other keys but name", path, text, f"{prefix}.{extra}")
        source = _arm_file(table["arm"], path, text, f"{prefix}.arm", arms_dir)
        spec = load_arm(source)
    else:
        if "name" not in overrides:
            raise _fail("an inline variant needs a name (the arm it runs as)", path, text, f"{prefix}.name")
        spec, source = _validated(_merged(baseline_keys, overrides), path, text, prefix), path
    actual = differing_settings([baseline_settings, resolve_settings(spec, [])[0]])
    if sorted(actual) != sorted(claimed):
        raise _fail(
            f"variant '{spec.name}' claims to differ from the baseline in {', '.join(claimed)}, but its settings "
            f"differ in {', '.join(actual) or 'nothing'}",
            path,
            text,
            f"{prefix}.differs_in",
        )
    return CampaignArm(spec=spec, source=source, differs_in=list(claimed))


def _slurm_under(campaign: SlurmSettings, arm: SlurmSettings) -> SlurmSettings:
    """The arm's [slurm] over the campaign's: each key the arm sets wins; the lists (sbatch, setup) are the
    campaign's lines, then the arm's."""
    merged = {**campaign.model_dump(exclude_unset=True), **arm.model_dump(exclude_unset=True)}
    for key in ("sbatch", "setup"):
        merged[key] = list(dict.fromkeys([*getattr(campaign, key), *getattr(arm, key)]))
    return SlurmSettings.model_validate(merged)


class Selection(BaseModel):
    """What a command was given: arms (from arm files, or from the campaigns that name them), ready to plan."""

    model_config = {"arbitrary_types_allowed": True}

    specs: list[tuple[ArmSpec, Path]]
    campaigns: list[Campaign]
    unreadable: list[UserError] = []  # a folder's files that could not be read, each with why (the rest still run)

    @property
    def max_parallel(self) -> int | None:
        limits = [campaign.max_parallel for campaign in self.campaigns if campaign.max_parallel is not None]
        return min(limits) if limits else None

    @property
    def retries(self) -> int:
        return max((campaign.retries for campaign in self.campaigns), default=0)

    def campaign_tags(self, run: str) -> dict[str, CampaignTag]:
        """Arm name -> the campaign its episodes run for in this `run` (arms named on their own carry none)."""
        return {arm.spec.name: CampaignTag(name=c.name, run=run) for c in self.campaigns for arm in c.arms()}


def with_seeds(spec: ArmSpec, seeds: list[int]) -> ArmSpec:
    """The arm running the campaign's seeds in place of its own seed, seeds or replicates (as if the file said so)."""
    data = {
        key: value for key, value in spec.model_dump(exclude_unset=True).items() if key not in ("seed", "replicates")
    }
    return ArmSpec.model_validate({**data, "seeds": seeds})


def select_arms(sources: list[Path], overrides: Overrides, arms_dir: Path) -> Selection:
    """Arm files as they are, and each campaign's baseline and variants with the campaign's seeds; the CLI's
    overrides on top of all of them (its --seeds over the campaign's)."""
    specs: list[tuple[ArmSpec, Path]] = []
    campaigns: list[Campaign] = []
    for source in sources:
        parsed = _parsed_toml(source)  # parsed once: a file of 100,000 seeds takes tomllib half a second
        campaign_file = "baseline" in parsed[1] if parsed else is_campaign(source)
        if not campaign_file:
            spec = parse_arm(parsed[0], source, parsed[1]) if parsed else load_arm(source)
            specs.append((apply_overrides(spec, overrides, source), source))
            continue
        campaign = load_campaign(source, arms_dir, parsed)
        campaigns.append(campaign)
        for arm in campaign.arms():
            spec = arm.spec.model_copy(update={"slurm": _slurm_under(campaign.slurm, arm.spec.slurm)})
            if campaign.seeds is not None:
                spec = with_seeds(spec, campaign.seeds)
            specs.append((apply_overrides(spec, overrides, arm.source), arm.source))
    return Selection(specs=specs, campaigns=campaigns)


def select_readable_arms(sources: list[Path], overrides: Overrides, arms_dir: Path) -> Selection:
    """A folder of arm files read file by file: each bad one is set aside with its error (for the command to report
    at the end, exiting non-zero) and the rest are selected, rather than one typo hiding every other arm."""
    selections: list[Selection] = []
    unreadable: list[UserError] = []
    for source in sources:
        try:
            selections.append(select_arms([source], overrides, arms_dir))
        except UserError as error:
            unreadable.append(error if error.path is not None else error.at(path=source))
    return Selection(
        specs=[spec for each in selections for spec in each.specs],
        campaigns=[campaign for each in selections for campaign in each.campaigns],
        unreadable=unreadable,
    )
