"""From arm files to plans: every setting resolved, every command line, path and port decided, nothing started.

This is the one place where an arm's settings get their final values (defaults, caps, CLI overrides, the compaction
limit) and where the fingerprint that says "these two runs are the same experiment" is computed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from mcu_arms.arms.spec import (
    SESSION_TURNS_WARN_ABOVE,
    ArmSpec,
    arm_path,
    describe_error,
    key_line,
    load_arm,
)
from mcu_arms.contracts.catalog import CODEX_AGENTS, default_max_steps, step_cap
from mcu_arms.environment import Environment
from mcu_arms.contracts.errors import UserError
from mcu_arms.atomic import write_json_atomic, write_text_atomic
from mcu_arms.contracts.wire import DEFAULT_VIDEO_MODEL
from mcu_arms.isolation.codex_home import (
    default_auth,
    default_root,
    plan_codex_home,
    temporary_dir_reason,
)

FINGERPRINT_VERSION = "v1"
# A planning turn carries the frame; measured: a constant ~0.48 MB at one turn per session, ~0.4 MB more per
# resumed turn, and a flat ~600 s per turn once a request passes ~5-6 MB.
FIRST_TURN_PAYLOAD_MB = 0.48
PAYLOAD_GROWTH_MB = 0.4
PAYLOAD_WALL_MB = 5.15
COMPACT_FRACTION = 0.8
NO_COMPACT_FACTOR = 2
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|AUTH|CREDENTIAL", re.IGNORECASE)
EPISODE_PATTERN = re.compile(r"^episode_(\d{3,})$")


def redact(key: str, value: str) -> str:
    """A secret-looking variable's value as *** plus a short hash: never shown, yet two secrets still differ.

    Idempotent, so a value read back from a saved plan or report stays as it is.
    """
    if not SECRET_NAME.search(key) or value.startswith("***"):
        return value
    return "***" + hashlib.sha256(value.encode()).hexdigest()[:6]


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {key: redact(key, value) for key, value in env.items()}


class Overrides(BaseModel):
    """CLI overrides, mirroring run-arm.sh's flags. None means "as the file says"."""

    task: str | None = None
    steps: int | None = Field(default=None, gt=0)
    step_timeout: float | None = Field(default=None, gt=0)
    session_turns: int | None = None
    compact: bool | None = None
    green_port: int | None = None
    purple_port: int | None = None

    def given(self) -> dict[str, Any]:
        return {key: value for key, value in self.model_dump().items() if value is not None}


class Settings(BaseModel):
    """The values in force for one arm; everything that can change a result is here."""

    agent: str
    task: str
    tasks: list[str] | None
    simulator: str
    seed: int
    steps: int
    step_timeout: float
    session_turns: int
    compact: bool
    compact_limit: int
    context_window: int
    model: str | None
    provider_base_url: str | None
    provider_wire_api: str | None
    provider_env_key: str | None = None
    video_eval: bool
    video_model: str = DEFAULT_VIDEO_MODEL  # reports written before it was a setting read as the model then used
    save_frames: bool
    env: dict[str, str]
    cuda_device: str | None

    def redacted(self) -> "Settings":
        """These settings as saved and shown: secret environment values masked."""
        return self.model_copy(update={"env": redact_env(self.env)})

    def fingerprinted(self) -> dict[str, Any]:
        """What the fingerprint covers: every setting except where things run (cuda_device picks a device).

        Unset (None) settings are left out, so a new optional setting does not change existing fingerprints.
        """
        data = {key: value for key, value in self.model_dump().items() if value is not None}
        data.pop("cuda_device", None)
        return data


class ProcessPlan(BaseModel):
    role: Literal["green", "purple", "client"]
    argv: list[str]
    env: dict[str, str]  # added to the inherited environment
    cwd: str
    log: str
    port: int | None = None
    url: str | None = None

    def redacted_env(self) -> dict[str, str]:
        return redact_env(self.env)

    def command_line(self) -> str:
        return shlex.join(self.argv)


class CompactionPlan(BaseModel):
    compact: bool
    limit: int
    context_window: int
    explanation: str


class ArmPlan(BaseModel):
    schema_version: int = 1
    arm: str
    source: str
    fingerprint: str
    settings: Settings
    overrides: dict[str, Any]
    host: str
    green_port: int
    purple_port: int
    ports_auto: list[str]
    episode: int
    episode_dir: str
    result_path: str
    evaluation_path: str
    scenario_path: str
    plan_path: str
    links: dict[str, str]  # logs/<arm>_*.log and _result.json -> files in the episode dir
    codex_home: str | None
    sqlite_dir: str | None
    codex_auth: str | None
    compaction: CompactionPlan
    processes: list[ProcessPlan]
    warnings: list[str]

    def process(self, role: str) -> ProcessPlan:
        return next(p for p in self.processes if p.role == role)

    def public(self) -> dict[str, Any]:
        """The plan as shown and saved: secrets in environments redacted."""
        data = self.model_dump(mode="json")
        for process, shown in zip(self.processes, data["processes"]):
            shown["env"] = process.redacted_env()
        data["settings"]["env"] = redact_env(self.settings.env)
        return data


def fingerprint(settings: Settings) -> str:
    """A versioned hash of what changes results. Name, ports and paths are left out on purpose."""
    canonical = json.dumps(settings.fingerprinted(), sort_keys=True, separators=(",", ":"))
    return f"{FINGERPRINT_VERSION}:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"


def default_compact_limit(compact: bool, context_window: int) -> int:
    """The limit when the arm file sets none: below the window to compact, above it so a full conversation overflows."""
    return int(context_window * COMPACT_FRACTION) if compact else context_window * NO_COMPACT_FACTOR


def _resolve_compaction(spec: ArmSpec) -> CompactionPlan:
    window = spec.context_window
    if spec.compact:
        limit = spec.compact_limit or default_compact_limit(True, window)
        explanation = f"compact: a full conversation is summarised at {limit} tokens (window {window})"
    else:
        limit = spec.compact_limit or default_compact_limit(False, window)
        explanation = (
            f"no compaction: the limit {limit} is above the window {window}, so a full conversation overflows "
            "and cold-starts onto the filesystem memory"
        )
    return CompactionPlan(compact=spec.compact, limit=limit, context_window=window, explanation=explanation)


def expected_payload_mb(session_turns: int) -> float:
    return FIRST_TURN_PAYLOAD_MB + PAYLOAD_GROWTH_MB * (session_turns - 1)


# The arm-file key each CLI override (an Overrides field, flag --field-name) sets.
OVERRIDDEN_KEYS: dict[str, str] = {
    "task": "task",
    "steps": "steps",
    "step_timeout": "step_timeout",
    "session_turns": "session_turns",
    "compact": "compact",
    "green_port": "ports.green",
    "purple_port": "ports.purple",
}


def _flag(override: str) -> str:
    return "--" + override.replace("_", "-")


def apply_overrides(spec: ArmSpec, overrides: Overrides, source: Path) -> ArmSpec:
    """The arm with CLI overrides applied, validated by the same rules as the file."""
    given = overrides.given()
    if not given:
        return spec
    data = spec.model_dump()
    for override, value in given.items():
        table, _, key = OVERRIDDEN_KEYS[override].rpartition(".")
        (data[table] if table else data)[key] = value
    if "task" in given and given["task"] != spec.task:
        data["tasks"] = None
    try:
        return ArmSpec.model_validate(data)
    except ValidationError as error:
        key, message, allowed = describe_error(error.errors()[0])
        culprit = next((override for override in given if OVERRIDDEN_KEYS[override] == key), None)
        if culprit:
            raise UserError(message, path=source, key=_flag(culprit), allowed=allowed) from None
        flags = " ".join(_flag(override) for override in given)
        line = key_line(source.read_text(encoding="utf-8"), key) if source.is_file() else None
        raise UserError(f"with {flags}: {message}", path=source, line=line, key=key, allowed=allowed) from None


def resolve_settings(spec: ArmSpec, warnings: list[str]) -> tuple[Settings, CompactionPlan]:
    task = spec.task
    steps = spec.steps or default_max_steps(task)
    cap = step_cap(task)
    if cap is not None and steps > cap:
        warnings.append(f"steps {steps} is capped at {cap} for the standard category '{task}', as MCU does")
        steps = cap
    if spec.session_turns > SESSION_TURNS_WARN_ABOVE and spec.agent in CODEX_AGENTS:
        payload = expected_payload_mb(spec.session_turns)
        warnings.append(
            f"session_turns {spec.session_turns}: a resumed session grows ~{PAYLOAD_GROWTH_MB} MB a turn, to "
            f"~{payload:.1f} MB by its last turn; past ~{PAYLOAD_WALL_MB}-6 MB a turn takes a flat ~600 s "
            "(measured, with no error in any log)"
        )
    if spec.compact and spec.session_turns == 1 and spec.agent in CODEX_AGENTS:
        warnings.append("compact is inert at session_turns 1: a one-turn session can never fill up")
    compaction = _resolve_compaction(spec)
    settings = Settings(
        agent=spec.agent,
        task=task,
        tasks=spec.tasks,
        simulator=spec.simulator,
        seed=spec.seed,
        steps=steps,
        step_timeout=spec.step_timeout,
        session_turns=spec.session_turns,
        compact=spec.compact,
        compact_limit=compaction.limit,
        context_window=spec.context_window,
        model=spec.codex.model,
        provider_base_url=spec.codex.provider_base_url,
        provider_wire_api=spec.codex.provider_wire_api,
        provider_env_key=spec.codex.provider_env_key,
        video_eval=spec.video_eval,
        video_model=spec.video_model,
        save_frames=spec.save_frames,
        env=dict(spec.env),
        cuda_device=spec.cuda_device,
    )
    return settings, compaction


def next_episode(arm_output: Path) -> int:
    """The next free episode number: one above any that exists, so an earlier run is never reused."""
    numbers = [0]
    if arm_output.is_dir():
        numbers += [int(m.group(1)) for p in arm_output.iterdir() if (m := EPISODE_PATTERN.match(p.name))]
    return max(numbers) + 1


def check_tasks(spec: ArmSpec, source: Path, warnings: list[str]) -> None:
    """The arm's tasks exist, and the simulator can score them: found now, not after three processes started.

    On the embedded simulator a whole category may be partly runnable (the rest is skipped, and said so), and a
    milestone with no Crafter analogue still counts in the total but can never be reached (said so too).
    """
    from mcu_arms.contracts.tasks import select_tasks

    try:
        tasks = select_tasks(spec.task, spec.tasks)
    except UserError as error:
        line = key_line(source.read_text(encoding="utf-8"), "tasks") if source.exists() else None
        raise UserError(error.message, path=source, line=line, key="tasks", allowed=error.allowed) from None
    if spec.simulator != "embedded":
        return
    from mcu_arms.green.sims.embedded import support_for

    support = {task.name: support_for(task) for task in tasks}
    blocked = {name: s.reason for name, s in support.items() if not s.runnable}
    if blocked and (spec.tasks or len(blocked) == len(tasks)):
        reasons = "; ".join(f"{name}: {reason}" for name, reason in blocked.items())
        raise UserError(f"not runnable on the embedded simulator: {reasons}", path=source, key="tasks")
    if blocked:
        warnings.append(
            f"{len(blocked)} of {len(tasks)} '{spec.task}' tasks have no Crafter analogue and will be skipped: "
            + ", ".join(blocked)
        )
    for name, task_support in support.items():
        if task_support.runnable and task_support.unavailable:
            warnings.append(
                f"{name}: {', '.join(task_support.unavailable)} has no Crafter analogue: counted in the total, "
                "never reachable on the embedded simulator"
            )


def _refuse_env_that_isolation_sets(arm_env: dict[str, str], purple_env: dict[str, str], source: Path) -> None:
    """An [env] entry that the arm's isolation overrides (CODEX_HOME, HOME, CUDA_VISIBLE_DEVICES...) is an error:
    silently dropping it would run the arm differently from what its file says."""
    for name, value in arm_env.items():
        if purple_env[name] != value:
            raise UserError(
                f"{name} is set by mcu-arms for this arm (to {purple_env[name]}); remove it from [env]",
                path=source,
                line=key_line(source.read_text(encoding="utf-8"), f"env.{name}") if source.is_file() else None,
                key=f"env.{name}",
                allowed="[codex] root for the codex home, cuda_device for the CUDA device",
            )


def _mcu_arms_argv() -> list[str]:
    return [sys.executable, "-m", "mcu_arms"]


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
) -> ArmPlan:
    warnings: list[str] = []
    check_tasks(spec, source, warnings)
    settings, compaction = resolve_settings(spec, warnings)
    host = spec.ports.host
    cwd = env.cwd
    episode_dir = env.output_dir / spec.name / f"episode_{episode:03d}"
    logs_dir = episode_dir / "logs"
    green_url = f"http://{host}:{green_port}"
    purple_url = f"http://{host}:{purple_port}"

    codex_home = sqlite_dir = codex_auth = None
    purple_env: dict[str, str] = dict(settings.env)
    if spec.agent in CODEX_AGENTS:
        root = Path(spec.codex.root) if spec.codex.root else default_root(env.env)
        auth = Path(spec.codex.auth) if spec.codex.auth else default_auth(env.env)
        reason = temporary_dir_reason(root, env.env)
        if reason:
            line = key_line(source.read_text(encoding="utf-8"), "codex.root") if source.is_file() else None
            raise UserError(reason, path=source, line=line, key="codex.root")
        home = plan_codex_home(spec.name, root, auth)
        codex_home, sqlite_dir, codex_auth = str(home.home), str(home.sqlite_dir), str(auth)
        purple_env.update(home.environment())
        if not auth.exists():
            warnings.append(f"the codex credential {auth} does not exist yet; `run` will refuse to start this arm")
    if spec.cuda_device is not None:
        purple_env["CUDA_VISIBLE_DEVICES"] = spec.cuda_device
    _refuse_env_that_isolation_sets(settings.env, purple_env, source)

    purple_argv = _mcu_arms_argv() + [
        "serve", "purple", "--agent", settings.agent, "--host", host, "--port", str(purple_port),
        "--card-url", purple_url, "--seed", str(settings.seed), "--output-dir", str(episode_dir / "purple"),
        "--step-timeout", str(settings.step_timeout), "--session-turns", str(settings.session_turns),
        "--compact-limit", str(compaction.limit),
    ]  # fmt: skip
    if settings.model:
        purple_argv += ["--model", settings.model]
    if settings.provider_base_url:
        purple_argv += ["--provider-base-url", settings.provider_base_url]
    if settings.provider_wire_api:
        purple_argv += ["--provider-wire-api", settings.provider_wire_api]
    if settings.provider_env_key:
        purple_argv += ["--provider-env-key", settings.provider_env_key]
    if settings.cuda_device is not None:
        purple_argv += ["--cuda-device", settings.cuda_device]

    processes = [
        ProcessPlan(
            role="green",
            argv=_mcu_arms_argv() + ["serve", "green", "--host", host, "--port", str(green_port), "--card-url", green_url],
            env={},
            cwd=str(cwd),
            log=str(logs_dir / "green.log"),
            port=green_port,
            url=green_url,
        ),
        ProcessPlan(
            role="purple",
            argv=purple_argv,
            env=purple_env,
            cwd=str(cwd),
            log=str(logs_dir / "purple.log"),
            port=purple_port,
            url=purple_url,
        ),
        ProcessPlan(
            role="client",
            argv=_mcu_arms_argv() + ["evaluate", str(episode_dir / "scenario.toml"), str(episode_dir / "evaluation.json")],
            env={},
            cwd=str(cwd),
            log=str(logs_dir / "client.log"),
        ),
    ]
    links = {
        str(env.logs_dir / f"{spec.name}_{role}.log"): str(logs_dir / f"{role}.log")
        for role in ("green", "purple", "client")
    }
    links[str(env.logs_dir / f"{spec.name}_result.json")] = str(episode_dir / "result.json")
    return ArmPlan(
        arm=spec.name,
        source=str(source),
        fingerprint=fingerprint(settings),
        settings=settings,
        overrides=overrides.given(),
        host=host,
        green_port=green_port,
        purple_port=purple_port,
        ports_auto=ports_auto,
        episode=episode,
        episode_dir=str(episode_dir),
        result_path=str(episode_dir / "result.json"),
        evaluation_path=str(episode_dir / "evaluation.json"),
        scenario_path=str(episode_dir / "scenario.toml"),
        plan_path=str(episode_dir / "plan.json"),
        links=links,
        codex_home=codex_home,
        sqlite_dir=sqlite_dir,
        codex_auth=codex_auth,
        compaction=compaction,
        processes=processes,
        warnings=warnings,
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
        "output_dir": str(Path(plan.episode_dir) / "green"),
    }
    if settings.tasks:
        config["tasks"] = settings.tasks
    document["config"] = config
    return tomlkit.dumps(document)


def resolve_sources(files: list[Path], arm_names: list[str], env: Environment) -> list[Path]:
    """Arm files named directly or by `--arm NAME`; with neither, an error listing what exists."""
    sources = [*files, *(arm_path(env.arms_dir, name) for name in arm_names)]
    if not sources:
        known = sorted(p.stem for p in env.arms_dir.glob("*.toml")) if env.arms_dir.is_dir() else []
        raise UserError("name at least one arm (FILES or --arm NAME)", allowed=", ".join(known) or "none in arms/")
    unique: list[Path] = []
    for source in sources:
        if source.resolve() not in {u.resolve() for u in unique}:
            unique.append(source)
    return unique


def plan_arms(
    sources: list[Path],
    overrides: Overrides,
    env: Environment,
) -> list[ArmPlan]:
    """Load, resolve and cross-check a set of arms. Raises UserError on any collision before anything happens."""
    specs = [(apply_overrides(load_arm(source), overrides, source), source) for source in sources]
    if len(specs) > 1 and (overrides.green_port or overrides.purple_port):
        raise UserError("--green-port/--purple-port apply to one arm; give ports in each arm file instead")
    _check_unique([(spec.name, source) for spec, source in specs], "arm name", key="name")

    from mcu_arms.isolation.ports import pick_free_port

    fixed: set[int] = set()
    for spec, _ in specs:
        for port in (spec.ports.green, spec.ports.purple):
            if isinstance(port, int):
                fixed.add(port)
    plans: list[ArmPlan] = []
    used: dict[int, str] = {}
    for spec, source in specs:
        auto: list[str] = []
        ports: dict[str, int] = {}
        for role in ("green", "purple"):
            declared = getattr(spec.ports, role)
            if declared == "auto":
                ports[role] = pick_free_port(spec.ports.host, avoid=fixed | set(used))
                auto.append(role)
            else:
                ports[role] = declared
            if ports[role] in used:
                raise UserError(
                    f"{role} port {ports[role]} of arm '{spec.name}' is also used by {used[ports[role]]}",
                    path=source,
                    line=key_line(source.read_text(encoding="utf-8"), f"ports.{role}") if source.is_file() else None,
                    key=f"ports.{role}",
                )
            used[ports[role]] = f"arm '{spec.name}' ({role})"
        episode = next_episode(env.output_dir / spec.name)
        plans.append(
            build_plan(
                spec,
                source,
                overrides,
                env,
                green_port=ports["green"],
                purple_port=ports["purple"],
                ports_auto=auto,
                episode=episode,
            )
        )
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


def prepare_episode(plan: ArmPlan) -> ArmPlan:
    """Create the episode dir (never an existing one) and write plan.json and scenario.toml into it.

    If another process took the planned number meanwhile, the next free number is used and the plan's paths follow.
    """
    episode_dir = Path(plan.episode_dir)
    while True:
        try:
            episode_dir.parent.mkdir(parents=True, exist_ok=True)
            episode_dir.mkdir()
            break
        except FileExistsError:
            plan = _renumber(plan, next_episode(episode_dir.parent))
            episode_dir = Path(plan.episode_dir)
    (episode_dir / "logs").mkdir()
    write_json_atomic(Path(plan.plan_path), plan.public())
    write_text_atomic(Path(plan.scenario_path), scenario_toml(plan))
    return plan


def _renumber(plan: ArmPlan, episode: int) -> ArmPlan:
    old = plan.episode_dir
    new = str(Path(old).parent / f"episode_{episode:03d}")
    text = plan.model_dump_json().replace(old, new)
    return ArmPlan.model_validate_json(text).model_copy(update={"episode": episode})
