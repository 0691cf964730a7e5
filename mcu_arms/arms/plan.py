"""From arm files to plans: every setting resolved, every command line, path and port decided, nothing started.

This is the one place where an arm's settings get their final values (defaults, caps, CLI overrides, the compaction
limit); the models they land in, and the fingerprint, are contracts (contracts/settings.py).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mcu_arms.arms.identity import code_identity, refuse_unstartable
from mcu_arms.arms.spec import (
    AUTO_PORT,
    SESSION_TURNS_WARN_ABOVE,
    ArmSpec,
    arm_files,
    arm_path,
    describe_error,
    known_arms_text,
    load_arm,
)
from mcu_arms.contracts.addresses import http_url, is_loopback
from mcu_arms.contracts.catalog import (
    A2A_AGENT,
    CODEX_AGENTS,
    FRAME_READING_AGENTS,
    capped_steps,
)
from mcu_arms.contracts.errors import UserError, user_error
from mcu_arms.contracts.limits import MAX_EPISODES_PER_RUN
from mcu_arms.contracts.rubric import AUTO_EVAL_ENV
from mcu_arms.contracts.settings import (
    CODEX_COMPACT_PERCENT,
    NOT_OWNED,
    OVERRIDDEN_KEYS,
    PAYLOAD_GROWTH_BYTES,
    PAYLOAD_WALL_BYTES,
    ArmPlan,
    CompactionPlan,
    Overrides,
    ProcessPlan,
    Settings,
    codex_compacts_at,
    command_lines,
    default_compact_limit,
    expected_payload_bytes,
    fingerprint,
    flag_for,
    purple_options,
)
from mcu_arms.contracts.simulators import runnable_tasks, simulator_descriptor
from mcu_arms.contracts.slurm import (
    DEFAULT_STOP_MARGIN_S,
    SINGLE_OPTIONS,
    SLURM_TICK_S,
    TIME_ALLOWED,
    Placement,
    SlurmOptions,
    SlurmSettings,
    parse_slurm_time,
)
from mcu_arms.contracts.tasks import TaskSpec, select_tasks
from mcu_arms.contracts.toml_text import toml_line
from mcu_arms.environment import Environment
from mcu_arms.isolation.codex_home import default_auth, default_root, plan_codex_home, temporary_dir_reason
from mcu_arms.layout import RunDir, check_directory, episode_name, log_links, next_episode

MB = 1_000_000


def _line(source: Path, key: str) -> int | None:
    return toml_line(source.read_text(encoding="utf-8"), key) if source.is_file() else None


def _resolve_compaction(spec: ArmSpec, warnings: list[str]) -> CompactionPlan:
    """The limit in force, as codex will apply it: told the window and the limit, it compacts at the lower of the
    limit and 90 % of the window; it cannot be told not to compact at all."""
    window = spec.context_window
    limit = spec.compact_limit or default_compact_limit(spec.compact, window)
    if not spec.compact:
        explanation = (
            f"no compaction: codex is told an unbounded window and limit, leaving only its own cap "
            f"({CODEX_COMPACT_PERCENT} % of its model's largest window); a conversation that reaches {window} tokens "
            "(or that cap, when lower) is dropped before its next turn, as is one that overflows, and the next turn "
            f"cold-starts onto the filesystem memory (the stated limit {limit} is above the window)"
        )
        return CompactionPlan(compact=False, limit=limit, context_window=window, explanation=explanation)
    at = codex_compacts_at(limit, window)
    explanation = f"compact: a conversation is summarised at {at} tokens (limit {limit}, window {window})"
    if at != limit:
        warnings.append(
            f"compact_limit {limit} is above {CODEX_COMPACT_PERCENT} % of context_window {window}: codex caps its "
            f"limit there and compacts at {at} tokens"
        )
    return CompactionPlan(
        compact=True, limit=limit, context_window=window, codex_compacts_at=at, explanation=explanation
    )


def apply_overrides(spec: ArmSpec, overrides: Overrides, source: Path) -> ArmSpec:
    """The arm with CLI overrides applied, validated by the same rules as the file."""
    given = overrides.given()
    if not given:
        return spec
    data = spec.model_dump(exclude_unset=True)
    for override, value in given.items():
        table, _, key = OVERRIDDEN_KEYS[override].rpartition(".")
        target = data.setdefault(table, {}) if table else data
        target[key] = value
    if "task" in given and given["task"] != spec.task:
        data["tasks"] = None
    if "seeds" in given:  # the flag's seeds replace the file's seed, seeds or replicates
        data.pop("seed", None)
        data.pop("replicates", None)
    try:
        return ArmSpec.model_validate(data)
    except ValidationError as error:
        key = describe_error(error.errors()[0]).key
        culprit = next((override for override in given if OVERRIDDEN_KEYS[override] == key), None)
        if culprit:
            raise user_error(error, path=source, key_of=lambda _: flag_for(culprit), describe=describe_error) from None
        problem = user_error(error, path=source, describe=describe_error)
        flags = " ".join(flag_for(override) for override in given)
        raise UserError(
            f"with {flags}: {problem.message}", path=source, line=_line(source, key), key=key, allowed=problem.allowed
        ) from None


def resolve_settings(spec: ArmSpec, warnings: list[str]) -> tuple[Settings, CompactionPlan]:
    steps, cap_note = capped_steps(spec.task, spec.steps)
    if cap_note:
        warnings.append(cap_note)
    if spec.session_turns > SESSION_TURNS_WARN_ABOVE and spec.agent in CODEX_AGENTS:
        payload = expected_payload_bytes(spec.session_turns) / MB
        warnings.append(
            f"session_turns {spec.session_turns}: a resumed session grows ~{PAYLOAD_GROWTH_BYTES / MB:g} MB a turn, "
            f"to ~{payload:.1f} MB by its last turn; past ~{PAYLOAD_WALL_BYTES / MB:g}-6 MB a turn takes a flat "
            "~600 s (measured, with no error in any log)"
        )
    if spec.compact and spec.session_turns == 1 and spec.agent in CODEX_AGENTS:
        warnings.append("compact is inert at session_turns 1: a one-turn session can never fill up")
    compaction = _resolve_compaction(spec, warnings)
    if spec.agent in CODEX_AGENTS and spec.codex.provider_base_url and not spec.codex.model:
        warnings.append(
            "[codex] model is unset with a local provider (provider_base_url): codex sends its own default model "
            "name (gpt-6.2-sol with codex-cli 0.171), which a local server rarely serves; set [codex] model"
        )
    fields = set(Settings.model_fields)
    as_written = spec.model_dump(include=fields) | spec.codex.model_dump(include=fields)
    for table in ("planner", "policy"):
        model_spec = getattr(spec, table)
        if model_spec is not None:
            as_written |= {f"{table}_{key}": value for key, value in model_spec.model_dump().items()}
    resolved: dict[str, Any] = {"steps": steps, "compact_limit": compaction.limit}
    descriptor = spec.simulator_descriptor
    if descriptor.reset_modes:
        resolved["reset_mode"] = descriptor.resolved_reset(spec.reset_mode)
    if descriptor.action_modes:
        resolved["action_mode"] = descriptor.resolved_action_mode(spec.action_mode)
    if descriptor.table is not None and descriptor.table_model is not None:
        chosen = spec.simulator_table() or descriptor.table_model()
        if descriptor.table in ArmSpec.model_fields:  # a built-in table, flattened as TABLE_KEY
            resolved |= {f"{descriptor.table}_{key}": value for key, value in chosen.model_dump().items()}
        else:
            resolved["simulator_options"] = chosen.model_dump(mode="json")
    if spec.purple is not None:
        resolved |= _external_purple(spec)
    own = spec.agent_table()
    if own is not None:
        resolved["agent_options"] = own.model_dump(mode="json")
    settings = Settings.model_validate({**as_written, **resolved})
    return settings, compaction


def _external_purple(spec: ArmSpec) -> dict[str, Any]:
    """The settings of another program's A2A purple: what starts it (or where it is), and its code identity."""
    purple = spec.purple
    assert purple is not None
    if purple.url is not None:
        return {"purple_url": purple.url.rstrip("/"), "purple_ready_timeout": purple.ready_timeout}
    cwd = Path(os.path.abspath(os.path.expanduser(purple.cwd or ".")))
    return {
        "purple_command": purple.command,
        "purple_cwd": str(cwd),
        "purple_code": code_identity(cwd, purple.identity),
        "purple_ready_timeout": purple.ready_timeout,
    }


# What a plan says of every arm whose purple is another program's server.
FOREIGN_PURPLE_NOTE = (
    "the purple is another program's A2A server: it does not check this arm's per-run token (the green still answers "
    "only to this arm's processes)"
)


def purple_notes(plan: ArmPlan) -> list[str]:
    """What the plan says of a purple that is another program's server (shown on `plan`'s screen, not only with
    --verbose): who owns it, and which token it does not check."""
    return [note for note in plan.notes if note == FOREIGN_PURPLE_NOTE or note.endswith(NOT_OWNED)]


def url_port(url: str) -> int:
    """The port an A2A purple's address names (its scheme's default where it names none)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def check_tasks(spec: ArmSpec, source: Path, warnings: list[str], notes: list[str]) -> list[TaskSpec]:
    """The tasks the arm will run: they exist, and the simulator can score them — found now, not after three
    processes started.

    On the embedded simulator a whole category may be partly runnable (the rest is skipped: a warning). An entry the
    simulator can never observe (no Crafter analogue; no Minecraft 1.16 statistic on MineStudio) still counts in the
    total but can never be reached: a note with the reason — a fixed fact of the simulator, not an alert that would
    wear down attention for real ones at every run.
    """
    try:
        tasks = select_tasks(spec.task, spec.tasks)
    except UserError as error:
        raise error.at(path=source, line=_line(source, "tasks"), key="tasks") from None
    runnable, support = runnable_tasks(spec.simulator, tasks)
    blocked = {name: s.reason for name, s in support.items() if not s.runnable}
    if blocked and (spec.tasks or not runnable):
        reasons = "; ".join(f"{name}: {reason}" for name, reason in blocked.items())
        raise UserError(f"not runnable on the {spec.simulator} simulator: {reasons}", path=source, key="tasks")
    if blocked:
        warnings.append(
            f"{len(blocked)} of {len(tasks)} '{spec.task}' tasks cannot run on the {spec.simulator} simulator and will "
            f"be skipped (`mcu-arms tasks {spec.task} --simulator {spec.simulator}` says why): " + ", ".join(blocked)
        )
    if spec.steve1_condition is not None and len(runnable) > 1:
        warnings.append(
            f"steve1_condition: all {len(runnable)} tasks are conditioned on {spec.steve1_condition!r}, not on their "
            "own text (give each task its own arm to condition each on its own command)"
        )
    for task in runnable:
        for line in support[task.name].unavailable_text():
            notes.append(
                f"{task.name}: {line}: counted in the total, never reachable on the {spec.simulator} simulator"
            )
        notes += [f"{task.name}: {note}" for note in support[task.name].notes]
    return runnable


def _refuse_env_that_isolation_sets(arm_env: dict[str, str], purple_env: dict[str, str], source: Path) -> None:
    """An [env] entry that the arm's isolation overrides (CODEX_HOME, HOME, CUDA_VISIBLE_DEVICES...) is an error:
    silently dropping it would run the arm differently from what its file says."""
    for name, value in arm_env.items():
        if purple_env[name] != value:
            raise UserError(
                f"{name} is set by mcu-arms for this arm (to {purple_env[name]}); remove it from [env]",
                path=source,
                line=_line(source, f"env.{name}"),
                key=f"env.{name}",
                allowed="[codex] root for the codex home, cuda_device for the CUDA device",
            )


def _green_rubric_env(settings: Settings, environment: Mapping[str, str], warnings: list[str]) -> dict[str, str]:
    """An arm's rubric is its file's `auto_eval_dir`, never the shell's MCU_AUTO_EVAL_DIR, which the fingerprint
    cannot see: the green of an arm without one gets the variable blanked, and the plan says so."""
    if settings.auto_eval_dir or not environment.get(AUTO_EVAL_ENV):
        return {}
    warnings.append(
        f"{AUTO_EVAL_ENV} is set here, but an arm takes its video rubric from its file: this arm grades with "
        f"mcu-arms' rubric (set auto_eval_dir = \"{environment[AUTO_EVAL_ENV]}\" for MCU's)"
    )
    return {AUTO_EVAL_ENV: ""}


def simulator_table(settings: Settings) -> BaseModel | None:
    """The simulator table an arm's settings hold (flattened as TABLE_KEY, or a third party's as its simulator
    options), None for a simulator without one."""
    descriptor = simulator_descriptor(settings.simulator)
    if descriptor.table is None or descriptor.table_model is None:
        return None
    if settings.simulator_options is not None:
        return descriptor.table_model.model_validate(settings.simulator_options)
    fields = {key: getattr(settings, f"{descriptor.table}_{key}", None) for key in descriptor.table_model.model_fields}
    return descriptor.table_model(**{key: value for key, value in fields.items() if value is not None})


def _with_value(argv: list[str], flag: str, value: str) -> list[str]:
    index = argv.index(flag)
    return [*argv[: index + 1], value, *argv[index + 2 :]]


def on_ports(plan: ArmPlan, listeners: Mapping[str, tuple[int, int]]) -> ArmPlan:
    """The plan with its servers on the ports picked where the episode runs (`listeners`: role -> (port, the
    listening socket's descriptor, handed to the server)): their command lines, URLs and the plan's ports."""
    processes = []
    for process in plan.processes:
        if process.role in listeners:
            port, fd = listeners[process.role]
            url = http_url(plan.host, port)
            argv = _with_value(_with_value(process.argv, "--port", str(port)), "--card-url", url)
            process = process.model_copy(update={"port": port, "url": url, "argv": argv, "listen_fd": fd})
        processes.append(process)
    ports = {f"{role}_port": listeners[role][0] for role in ("green", "purple") if role in listeners}
    return plan.model_copy(update={"processes": processes, **ports})


def build_plan(
    spec: ArmSpec,
    source: Path,
    overrides: Overrides,
    env: Environment,
    *,
    green_port: int,
    purple_port: int,
    ports_auto: list[str],
    episode: int,
    home_name: str | None = None,
    checked: tuple[list[TaskSpec], list[str], list[str]] | None = None,
) -> ArmPlan:
    """One episode of an arm. `home_name` is its CODEX_HOME's name under the codex root (the arm's own name unless
    its replicates need one home each); `checked`: the arm's tasks with their warnings and notes, when check_tasks
    has already found them (they are the same for every seed)."""
    warnings: list[str] = list(checked[1]) if checked is not None else []
    notes: list[str] = list(checked[2]) if checked is not None else []
    tasks = checked[0] if checked is not None else check_tasks(spec, source, warnings, notes)
    settings, compaction = resolve_settings(spec, warnings)
    host = spec.ports.host
    run_dir = RunDir(env.output_dir / spec.name / episode_name(episode))
    green_url = http_url(host, green_port)
    purple_url = http_url(host, purple_port)
    exposed = not is_loopback(host)
    if exposed:
        warnings.append(
            f"ports.host {host} is not loopback (expose = true): the green and purple listen beyond this host; "
            "each requires its per-run token, but the network can reach them"
        )

    codex_home = sqlite_dir = codex_auth = None
    purple_env: dict[str, str] = dict(settings.env)
    if spec.agent in CODEX_AGENTS:
        root = Path(spec.codex.root) if spec.codex.root else default_root(env.variables)
        auth = Path(spec.codex.auth) if spec.codex.auth else default_auth(env.variables)
        reason = temporary_dir_reason(root, env.variables)
        if reason:
            raise UserError(reason, path=source, line=_line(source, "codex.root"), key="codex.root")
        home = plan_codex_home(home_name or spec.name, root, auth)
        codex_home, sqlite_dir, codex_auth = str(home.home), str(home.sqlite_dir), str(auth)
        purple_env.update(home.environment())
        if not auth.exists():
            warnings.append(f"the codex credential {auth} does not exist yet; `run` will refuse to start this arm")
    if spec.cuda_device is not None:
        purple_env["CUDA_VISIBLE_DEVICES"] = spec.cuda_device
    options = purple_options(settings, run_dir.purple)
    purple_env.update(options.environment())
    _refuse_env_that_isolation_sets(settings.env, purple_env, source)
    green_env = _green_rubric_env(settings, env.variables, warnings)
    purple_cwd = settings.purple_cwd or str(env.cwd)
    if settings.purple_command is not None:
        refuse_unstartable(
            settings.purple_command,
            Path(purple_cwd),
            {**env.variables, **settings.env},
            source=source,
            line=_line(source, "purple.command"),
        )
    if settings.purple_command is not None or settings.purple_url is not None:
        notes.append(FOREIGN_PURPLE_NOTE)
    if settings.purple_url is not None:
        notes.append(f"purple at {settings.purple_url}: {NOT_OWNED}")
        purple_url = settings.purple_url
    if settings.obs_encoding == "jpeg_bgr" and settings.agent in FRAME_READING_AGENTS:
        warnings.append(
            f"obs_encoding jpeg_bgr is for purples that decode with cv2 (MCU-AgentBeats'); agent '{settings.agent}' "
            "decodes with Pillow and will see red and blue swapped"
        )

    argv = command_lines(
        settings,
        host=host,
        green_port=green_port,
        purple_port=purple_port,
        episode_dir=run_dir.path,
        purple_dir=run_dir.purple,
        scenario=run_dir.scenario,
        events=run_dir.events,
    )
    processes = [
        ProcessPlan(
            role="green",
            argv=argv["green"],
            env=green_env,
            cwd=str(env.cwd),
            log=str(run_dir.log("green")),
            port=green_port,
            url=green_url,
        ),
        ProcessPlan(
            role="purple",
            argv=argv["purple"],
            env=purple_env,
            cwd=purple_cwd,
            log=str(run_dir.log("purple")),
            port=None if settings.purple_url is not None else purple_port,
            url=purple_url,
        ),
        ProcessPlan(role="client", argv=argv["client"], env={}, cwd=str(env.cwd), log=str(run_dir.log("client"))),
    ]
    return ArmPlan(
        arm=spec.name,
        source=str(source),
        fingerprint=fingerprint(settings),
        settings=settings,
        overrides=overrides.given(),
        tasks=[task.name for task in tasks],
        host=host,
        green_port=green_port,
        purple_port=purple_port,
        ports_auto=ports_auto,
        episode=episode,
        episode_dir=str(run_dir.path),
        links=log_links(env.logs_dir, spec.name, run_dir),
        codex_home=codex_home,
        sqlite_dir=sqlite_dir,
        codex_auth=codex_auth,
        compaction=compaction,
        thresholds=spec.thresholds,
        processes=processes,
        warnings=warnings,
        notes=notes,
    )


def scenario_toml(plan: ArmPlan) -> str:
    """The AgentBeats scenario the client reads: the green, the participant, and the evaluation config."""
    import tomlkit

    settings = plan.settings
    document = tomlkit.document()
    document.add(tomlkit.comment(f"mcu-arms scenario for arm {plan.arm} (fingerprint {plan.fingerprint})"))
    document["green_agent"] = {"endpoint": plan.process("green").url}
    participants = tomlkit.aot()
    participants.append(tomlkit.table().add("role", "agent").add("endpoint", plan.process("purple").url))
    document["participants"] = participants
    config = {
        "task_category": settings.task,
        "max_steps": settings.steps,
        "step_timeout": settings.step_timeout,
        "seed": settings.seed,
        "simulator": settings.simulator,
        "video_eval": settings.video_eval,
        "video_model": settings.video_model,
        "save_frames": settings.save_frames,
        "obs_size": list(settings.obs_size),
        "obs_encoding": settings.obs_encoding,
        "observe": settings.observe,
        "output_dir": str(RunDir(Path(plan.episode_dir)).green),
    }
    if settings.tasks:
        config["tasks"] = settings.tasks
    if settings.auto_eval_dir:
        config["auto_eval_dir"] = settings.auto_eval_dir
    if settings.reset_mode:
        config["reset_mode"] = settings.reset_mode
    if settings.action_mode:
        config["action_mode"] = settings.action_mode
    table, name = simulator_table(settings), simulator_descriptor(settings.simulator).table
    if table is not None and name is not None:
        config[name] = table.model_dump()
    document["config"] = config
    return tomlkit.dumps(document)


def resolve_sources(
    files: list[Path], arm_names: list[str], env: Environment, *, every_arm_when_none: bool = False
) -> list[Path]:
    """Arm (or campaign) files named directly or by `--arm NAME`; with neither, every arm in the arms dir (`plan`)
    or an error listing them (`run`, which never starts arms nobody named)."""
    named = [path if path.is_absolute() else env.cwd / path for path in files]
    for given, path in zip(files, named, strict=True):
        if not path.exists() and (env.arms_dir / f"{given}.toml").is_file():  # `run demo` meant `run --arm demo`
            raise UserError(
                f"no such arm file: {given} (FILES are paths; did you mean `--arm {given}`?)",
                allowed=f"--arm {given}, or arms/{given}.toml",
            )
    sources = [*named, *(path for name in arm_names for path in _arm_paths(env.arms_dir, name))]
    if not sources and every_arm_when_none:
        sources = arm_files(env.arms_dir)
        if not sources:
            raise UserError(f"no arm files in {env.arms_dir}", allowed="mcu-arms new NAME writes one")
    if not sources:
        raise UserError("name at least one arm (FILES or --arm NAME)", allowed=known_arms_text(env.arms_dir))
    unique: list[Path] = []
    for source in sources:
        if source.resolve() not in {u.resolve() for u in unique}:
            unique.append(source)
    return unique


GLOB_CHARACTERS = frozenset("*?[")


def _arm_paths(arms_dir: Path, name: str) -> list[Path]:
    """`--arm NAME`, or `--arm 'GLOB'`: every arm whose name matches (at least one)."""
    if not GLOB_CHARACTERS & set(name):
        return [arm_path(arms_dir, name)]
    matched = sorted(path for path in arm_files(arms_dir) if fnmatch.fnmatchcase(path.stem, name))
    if not matched:
        raise UserError(f"no arm matches '{name}'", key="--arm", allowed=known_arms_text(arms_dir))
    return matched


def load_specs(sources: list[Path], overrides: Overrides) -> list[tuple[ArmSpec, Path]]:
    """Each arm file as it will run: loaded, with the CLI overrides applied (and validated like the file)."""
    return [(apply_overrides(load_arm(source), overrides, source), source) for source in sources]


def plan_arms(
    sources: list[Path],
    overrides: Overrides,
    env: Environment,
) -> list[ArmPlan]:
    """Load, resolve and cross-check a set of arms, one plan per episode (per seed of each arm). Raises UserError on
    any collision before anything happens."""
    return plan_specs(load_specs(sources, overrides), overrides, env)


def resolve_slurm(spec: ArmSpec, given: SlurmSettings, source: Path) -> SlurmOptions:
    """The arm's Slurm options: its [slurm] table (a campaign's already merged under it), the --slurm-* flags on
    top. A time limit is required: a site's default could end a week-long episode after minutes."""
    written = spec.slurm
    flags = given.given()
    time = flags.get("time", written.time)
    if time is None:
        raise UserError(
            "a Slurm job needs a time limit",
            path=source,
            key="slurm.time",
            allowed=f"[slurm] time in the arm or campaign file, or --slurm-time: {TIME_ALLOWED}",
        )
    time_s = parse_slurm_time(time)  # type: ignore[arg-type]  # checked when the file or the flags were read
    margin = written.stop_margin or DEFAULT_STOP_MARGIN_S
    if margin + SLURM_TICK_S >= time_s:
        raise UserError(
            f"told to stop {margin} s before a time limit of {time_s} s, the episode would have under "
            f"{SLURM_TICK_S} s to run",
            path=source,
            line=_line(source, "slurm.stop_margin"),
            key="slurm.stop_margin",
            allowed=f"a margin below the time limit minus {SLURM_TICK_S} s, or a longer time",
        )
    chosen: dict[str, Any] = {key: flags.get(key, getattr(written, key)) for key in SINGLE_OPTIONS}
    return SlurmOptions(
        time_s=time_s, sbatch=[*written.sbatch, *given.sbatch], setup=written.setup, stop_margin_s=margin, **chosen
    )


def place(plan: ArmPlan, spec: ArmSpec, source: Path, placement: Placement) -> ArmPlan:
    """The plan as the executor runs it. On Slurm the servers listen on the node's loopback, on ports picked there
    when the episode starts; the CODEX_HOME is built there too, on the node's own disk."""
    if placement.executor == "local":
        return plan
    if plan.settings.agent == A2A_AGENT:
        raise UserError(
            f'an arm of agent = "{A2A_AGENT}" runs on this host only (its Slurm placement is not built yet)',
            path=source,
            key="agent",
            allowed="--executor local",
        )
    if not is_loopback(plan.host):
        raise UserError(
            f"on Slurm an arm's servers listen on the loopback of the node the job lands on, not on {plan.host}",
            path=source,
            line=_line(source, "ports.host"),
            key="ports.host",
            allowed="127.0.0.1 or ::1 (the default)",
        )
    warnings = list(plan.warnings)
    fixed = [role for role in ("green", "purple") if role not in plan.ports_auto]
    if fixed and plan.replicates > 1:
        warnings.append(
            f"fixed {' and '.join(fixed)} port(s) on Slurm: two episodes of this arm on one node at once need the same "
            'port, and the second aborts; "auto" picks free ones on the node'
        )
    return plan.model_copy(
        update={"executor": "slurm", "slurm": resolve_slurm(spec, placement.slurm, source), "warnings": warnings}
    )


def plan_specs(
    specs: list[tuple[ArmSpec, Path]], overrides: Overrides, env: Environment, placement: Placement | None = None
) -> list[ArmPlan]:
    """One plan per (arm, seed): the episodes to run. Replicates of one arm with fixed ports share them (they run one
    after another); every other port is one arm's only."""
    placement = placement or Placement()
    if len(specs) > 1 and (overrides.green_port or overrides.purple_port):
        raise UserError("--green-port/--purple-port apply to one arm; give ports in each arm file instead")
    _check_unique([(spec.name, source) for spec, source in specs], "arm name", key="name")
    check_directory(env.output_dir, "the arms' episodes")
    check_directory(env.logs_dir, "the links to each arm's latest logs")
    for spec, _ in specs:
        check_directory(env.output_dir / spec.name, f"the episodes of arm '{spec.name}'")

    from mcu_arms.isolation.ports import local_address_reason, pick_free_port

    for spec, source in specs:
        reason = local_address_reason(spec.ports.host)
        if reason:
            raise UserError(
                reason,
                path=source,
                line=_line(source, "ports.host"),
                key="ports.host",
                allowed="127.0.0.1, ::1, or with expose = true an address of this host, 0.0.0.0 or ::",
            )
    episodes = sum(len(spec.replicate_seeds()) for spec, _ in specs)
    if episodes > MAX_EPISODES_PER_RUN:
        raise UserError(
            f"{episodes} episodes (seeds times arms) are too many for one run",
            key="seeds",
            allowed=f"at most {MAX_EPISODES_PER_RUN} episodes",
        )
    fixed: set[int] = set()
    for spec, _ in specs:
        for port in (spec.ports.green, spec.ports.purple):
            if isinstance(port, int):
                fixed.add(port)
    plans: list[ArmPlan] = []
    used: dict[int, str] = {}
    taken = set(fixed)  # fixed ports and every port picked so far: grown as picked, so planning stays linear
    for spec, source in specs:
        seeds = spec.replicate_seeds()
        first_episode = next_episode(env.output_dir / spec.name)
        task_warnings: list[str] = []
        task_notes: list[str] = []
        checked = (check_tasks(spec, source, task_warnings, task_notes), task_warnings, task_notes)  # once per arm
        for index, seed in enumerate(seeds):
            auto: list[str] = []
            ports: dict[str, int] = {}
            for role in ("green", "purple"):
                declared = getattr(spec.ports, role)
                if role == "purple" and spec.purple is not None and spec.purple.url is not None:
                    ports[role] = url_port(spec.purple.url)  # reached there: nothing of this arm listens on it
                    continue
                if declared == AUTO_PORT:
                    ports[role] = pick_free_port(spec.ports.host, avoid=taken)
                    auto.append(role)
                else:
                    ports[role] = declared
                holder = used.get(ports[role])
                if holder is not None and holder != spec.name:
                    raise UserError(
                        f"{role} port {ports[role]} of arm '{spec.name}' is also used by arm '{holder}'",
                        path=source,
                        line=_line(source, f"ports.{role}"),
                        key=f"ports.{role}",
                    )
                used[ports[role]] = spec.name
                taken.add(ports[role])
            replicate = spec.model_copy(update={"seed": seed})
            episode_plan = build_plan(
                replicate,
                source,
                overrides,
                env,
                green_port=ports["green"],
                purple_port=ports["purple"],
                ports_auto=auto,
                episode=first_episode + index,
                home_name=spec.name if len(seeds) == 1 else f"{spec.name}-seed{seed}",
                checked=checked,
            ).model_copy(update={"replicates": len(seeds)})
            plans.append(place(episode_plan, spec, source, placement))
    homes = [(os.path.realpath(p.codex_home), Path(p.source)) for p in plans if p.codex_home]
    _check_unique(homes, "CODEX_HOME (through a linked codex root)", key="codex.root")
    return plans


def _check_unique(values: list[tuple[str, Path]], what: str, *, key: str) -> None:
    """Each (value, arm file) pair's value is used by one arm only: two arms sharing it would mix their runs."""
    seen: dict[str, Path] = {}
    for value, source in values:
        if value in seen:
            raise UserError(
                f"{seen[value]} and {source} share the same {what} '{value}'; each arm needs its own",
                key=key,
            )
        seen[value] = source
