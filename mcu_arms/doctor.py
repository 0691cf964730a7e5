"""`mcu-arms doctor`: does this host have what the arms need? Checks only; it changes nothing.

`plan` and `run` make the same checks for the arms they are given (`preflight`) and refuse an arm whose check
fails, before anything starts: a codex arm without codex would otherwise run to a clean-looking 0.

Each simulator's rows are its backend's own preflight, which its descriptor names (contracts/simulators.py), and
STEVE-1's are its `requirement_checks`, one row per thing checked: what doctor passes is what a run accepts.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import BaseModel

from mcu_arms.arms.spec import ArmSpec, CodexSpec
from mcu_arms.contracts.catalog import CODEX_AGENTS
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.preflight import CheckStatus, HostCheck
from mcu_arms.contracts.redaction import scrub
from mcu_arms.contracts.settings import ArmPlan, PurpleOptions
from mcu_arms.contracts.simulators import GB, simulator_descriptor
from mcu_arms.isolation.codex_home import default_auth, default_root, temporary_dir_reason
from mcu_arms.isolation.host import network_filesystem_reason, shared_filesystem
from mcu_arms.process.containment import containment_support

Status = CheckStatus


class Check(BaseModel):
    name: str
    status: Status
    detail: str
    needed_by: list[str]
    endpoint: bool = False  # a model endpoint asked whether it answers (not this host's own)

    @classmethod
    def of(cls, check: HostCheck, needed_by: list[str]) -> Check:
        return cls(name=check.name, status=check.status, detail=check.problem(), needed_by=needed_by)


ArmState = Literal["ready", "endpoints down", "cannot run here"]
STATE_ORDER: tuple[ArmState, ...] = ("ready", "endpoints down", "cannot run here")


class ArmGroup(BaseModel):
    """Arms that need the same things (one simulator, or the model endpoints of one kind of agent), and whether this
    host gives them what they need: what doctor and plan say first, before any single check."""

    name: str  # "embedded arms", "minestudio arms", "planned arms on embedded"
    arms: list[str]
    state: ArmState  # the worst of its arms'
    problems: list[str]  # the names of the checks in the way, each once

    def text(self) -> str:
        arms = ", ".join(self.arms)
        if self.state == "ready":
            return f"{self.name} ({arms}): ready"
        if self.state == "endpoints down":
            return f"{self.name} ({arms}): endpoints down ({', '.join(self.problems)}): start them or fix the URLs"
        return (
            f"{self.name} ({arms}): cannot run here, {len(self.problems)} missing ({', '.join(self.problems)}); "
            "each check says how to fix it"
        )


def group_name(simulator: str, agent: str, has_endpoints: bool) -> str:
    """An arm that names model endpoints is ready when they answer; any other arm when its simulator is here."""
    return f"{agent} arms on {simulator}" if has_endpoints else f"{simulator} arms"


def readiness_groups(arms: list[tuple[str, str]], checks: list[Check]) -> list[ArmGroup]:
    """`arms`: (arm, group name) in order. Each group with the checks that fail for its arms (cannot run here) or,
    failing none, the model endpoints that do not answer (endpoints down)."""
    groups: dict[str, list[str]] = {}
    for arm, group in arms:
        groups.setdefault(group, []).append(arm)
    found = []
    for name, members in groups.items():
        failed = [c.name for c in checks if c.status == "fail" and set(c.needed_by) & set(members)]
        down = [c.name for c in checks if c.status == "warn" and c.endpoint and set(c.needed_by) & set(members)]
        state: ArmState = "cannot run here" if failed else "endpoints down" if down else "ready"
        found.append(ArmGroup(name=name, arms=members, state=state, problems=list(dict.fromkeys(failed or down))))
    return found


def asked_can_run(groups: list[ArmGroup], *, named: bool) -> bool:
    """Exit 0 when what was asked about can run: every arm named, or (nothing named: the install) some group."""
    if named:
        return all(group.state != "cannot run here" for group in groups)
    return not groups or any(group.state != "cannot run here" for group in groups)


class DoctorReport(BaseModel):
    checks: list[Check]
    groups: list[ArmGroup] = []

    @property
    def failed(self) -> bool:
        return any(check.status == "fail" for check in self.checks)


def _run_version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout + done.stderr).strip()


def steve1_checks(env: Mapping[str, str], specs: list[ArmSpec]) -> list[Check]:
    """STEVE-1's own requirement checks (extra, weights, tokenizer, driver), per arm, in the environment its purple
    gets (the host's plus the arm's [env], where MCU_STEVE1_WEIGHTS or HF_HOME may be set)."""
    from mcu_arms.purple.steve1 import requirement_checks

    rows = []
    for spec in specs:
        options = PurpleOptions(cuda_device=spec.cuda_device)
        rows += [Check.of(check, [spec.name]) for check in requirement_checks(options, {**env, **spec.env})]
    return rows


def _codex_version(codex: str, env: Mapping[str, str], root: Path) -> str | None:
    """`codex --version` with a scratch CODEX_HOME removed afterwards: it creates $CODEX_HOME/tmp/, and neither the
    user's own ~/.codex nor any arm's home is written. The scratch sits in the codex root (or the nearest directory
    above it that exists): local disk, where codex will run, and not under /tmp, where it refuses its helpers."""
    parent = next(directory for directory in (root, *root.parents) if directory.is_dir())
    with tempfile.TemporaryDirectory(prefix=".doctor-codex-version-", dir=parent) as scratch:
        try:
            done = subprocess.run(
                [codex, "--version"],
                capture_output=True,
                text=True,
                timeout=20,
                stdin=subprocess.DEVNULL,
                env={**env, "CODEX_HOME": scratch, "HOME": scratch},
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def codex_checks(env: Mapping[str, str], specs: list[ArmSpec]) -> list[Check]:
    names = [spec.name for spec in specs]
    checks = []
    codex = shutil.which("codex", path=env.get("PATH"))
    roots = sorted({Path(s.codex.root) if s.codex.root else default_root(env) for s in specs})
    version = _codex_version(codex, env, roots[0]) if codex else None
    if codex and version:
        checks.append(Check(name="codex CLI", status="ok", detail=f"{codex}: {version}", needed_by=names))
    elif codex:
        checks.append(Check(name="codex CLI", status="fail", detail=f"{codex} --version failed", needed_by=names))
    else:
        checks.append(
            Check(
                name="codex CLI",
                status="fail",
                detail="codex not on PATH (npm install -g @openai/codex)",
                needed_by=names,
            )
        )
    for root in roots:
        reason = temporary_dir_reason(root, env) or network_filesystem_reason(root)
        checks.append(
            Check(
                name=f"codex root {root}",
                status="fail" if reason else "ok",
                detail=reason or "local disk",
                needed_by=names,
            )
        )
    for auth in sorted({Path(s.codex.auth) if s.codex.auth else default_auth(env) for s in specs}):
        if auth.exists():
            target = os.path.realpath(auth)
            mode = oct(os.stat(target).st_mode & 0o777)
            status: Status = "ok" if mode == "0o600" else "warn"
            checks.append(
                Check(name="codex credential", status=status, detail=f"{auth} -> {target} ({mode})", needed_by=names)
            )
        else:
            checks.append(
                Check(
                    name="codex credential", status="fail", detail=f"{auth} missing: run `codex login`", needed_by=names
                )
            )
    return checks


MODEL_ENDPOINT_TIMEOUT_S = 3.0


def model_endpoints(spec: ArmSpec) -> list[tuple[str, str]]:
    """(what, URL to ask) for every model endpoint an arm names: its planner, its policy (a decision service's
    model listing, a chat model's `/models`), its codex provider. The user's own codex provider (none named) is
    codex's to reach."""
    found = []
    if spec.planner is not None and spec.planner.base_url:
        found.append(("planner", spec.planner.base_url.rstrip("/") + "/models"))
    if spec.policy is not None and spec.policy.base_url:
        root = spec.policy.base_url.rstrip("/")
        found.append(("policy", root + ("/v1/models" if spec.policy.backend == "decision_service" else "/models")))
    if spec.agent in CODEX_AGENTS and spec.codex.provider_base_url:
        found.append(("codex provider", spec.codex.provider_base_url.rstrip("/") + "/models"))
    return found


@functools.cache
def _answers(url: str) -> str | None:
    """None when something answers HTTP at `url` (any status: a 401 still says the server is there), else why not.
    Asked once per command: `plan` reads both the failed checks and the warnings of one doctor run."""
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()  # credentials are not needed to knock
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the agent reaches it directly too
    try:
        with direct.open(bare, timeout=MODEL_ENDPOINT_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None
    except Exception as error:  # refused, unresolvable, timed out, not a URL at all: each is "does not answer"
        cause = getattr(error, "reason", error)
        return f"{type(cause).__name__}: {cause}" if not isinstance(cause, str) else cause


def _card_answer(url: str) -> str | None:
    """None when an A2A agent card (0.3 or 1.x shape) answers at `url`, else why not (unreachable, or no card)."""
    import json
    import urllib.request

    from mcu_arms.contracts.agent_card import card_problem
    from mcu_arms.contracts.wire import AGENT_CARD_PATH

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(url.rstrip("/") + AGENT_CARD_PATH, timeout=MODEL_ENDPOINT_TIMEOUT_S) as response:
            return card_problem(json.loads(response.read(1_000_000)))
    except ValueError as error:
        return f"its agent card is not JSON ({error})"
    except Exception as error:  # refused, unresolvable, timed out, an HTTP error: each is "does not answer"
        cause = getattr(error, "reason", error)
        return f"{type(cause).__name__}: {cause}" if not isinstance(cause, str) else cause


def purple_card_checks(specs: list[ArmSpec]) -> list[Check]:
    """The card of each purple an arm reaches at its url (agent "a2a"): a warning when it does not answer now (it
    may be started before the run; a run it does not answer fails loud)."""
    checks = []
    for spec in specs:
        url = spec.purple.url if spec.purple is not None else None
        if url is None:
            continue
        problem = _card_answer(url)
        detail = f"{scrub(url)} serves its agent card" if problem is None else f"{scrub(url)}: {scrub(problem)}"
        checks.append(
            Check(name="purple card", status="ok" if problem is None else "warn", detail=detail, needed_by=[spec.name])
        )
    return checks


def model_endpoint_checks(specs: list[ArmSpec]) -> list[Check]:
    """Each model endpoint the arms name, asked once: a planned arm whose planner does not answer would only say so
    at its first decision, after three processes started. A warning, not a refusal: the service may be started
    between the plan and the run (or on the Slurm node)."""
    needed: dict[tuple[str, str], list[str]] = {}
    for spec in specs:
        for what, url in model_endpoints(spec):
            needed.setdefault((what, url), []).append(spec.name)
    checks = []
    for (what, url), names in needed.items():
        problem = _answers(url)
        shown = scrub(url)
        detail = (
            f"{shown} answers"
            if problem is None
            else f"{shown} does not answer ({scrub(problem)}): start it or fix the URL"
        )
        checks.append(
            Check(
                name=f"{what} endpoint",
                status="ok" if problem is None else "warn",
                detail=detail,
                needed_by=names,
                endpoint=True,
            )
        )
    return checks


def cuda_check(env: Mapping[str, str], specs: list[ArmSpec]) -> Check:
    names = [spec.name for spec in specs]
    devices = [spec.cuda_device for spec in specs if spec.cuda_device is not None]
    shared = {d for d in devices if devices.count(d) > 1}
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    listing = _run_version([smi, "-L"]) if smi else None
    if not listing or "GPU" not in listing:
        return Check(name="CUDA", status="fail", detail="no CUDA device visible (nvidia-smi -L)", needed_by=names)
    if shared:
        return Check(
            name="CUDA",
            status="warn",
            detail=f"{listing.splitlines()[0]}; arms share device(s) {sorted(shared)}: "
            "give concurrent neural arms different devices",
            needed_by=names,
        )
    return Check(name="CUDA", status="ok", detail=listing.splitlines()[0], needed_by=names)


def memory_check(specs: list[ArmSpec]) -> Check:
    """Each arm's episode wants what its simulator's descriptor says one costs."""
    needed = sum(spec.simulator_descriptor.cost.memory_bytes for spec in specs)
    per_simulator: dict[str, int] = {}
    for spec in specs:
        per_simulator[spec.simulator] = per_simulator.get(spec.simulator, 0) + 1
    shown = ", ".join(
        f"{count} {name} at ~{simulator_descriptor(name).cost.memory_bytes / GB:g} GB"
        for name, count in per_simulator.items()
    )
    available = psutil.virtual_memory().available
    status: Status = "ok" if available >= needed else "warn"
    return Check(
        name="memory",
        status=status,
        detail=f"{available / GB:.1f} GB available; {len(specs)} arm(s) want about {needed / GB:.1f} GB ({shown})",
        needed_by=[s.name for s in specs],
    )


def containment_check(specs: list[ArmSpec]) -> Check:
    """Can every process an arm starts be found again, even one that leaves its session and scrubs its environment?"""
    names = [spec.name for spec in specs]
    support = containment_support()
    if support.cgroup is not None:
        detail = (
            f"cgroup v2 under {support.cgroup}: every process an arm starts is found and stopped, even one that "
            "leaves its session and scrubs its environment, even after `mcu-arms run` itself was killed"
        )
        return Check(name="process containment", status="ok", detail=detail, needed_by=names)
    fallback = (
        "mcu-arms run becomes a subreaper: such a process is found while the run lives, not after it was killed"
        if support.subreaper
        else "no subreaper either (not Linux): such a process is not found"
    )
    detail = (
        f"no writable cgroup v2 ({support.cgroup_reason}); a process that leaves its session and scrubs its "
        f"environment escapes the process group and owner token; {fallback}"
    )
    return Check(name="process containment", status="warn", detail=detail, needed_by=names)


def simulator_checks(specs: list[ArmSpec], env: Mapping[str, str]) -> list[Check]:
    """Each simulator's own preflight (its descriptor names it: the same checks a run makes), in the environment the
    green agent inherits, one row per thing checked, with the arms that need it."""
    by_simulator: dict[str, dict[str, BaseModel | None]] = {}
    for spec in specs:
        by_simulator.setdefault(spec.simulator, {})[spec.name] = spec.simulator_table()
    return [
        Check.of(check, names)
        for name, arms in by_simulator.items()
        for check, names in simulator_descriptor(name).run_preflight(env, arms)
    ]


def _table_field(simulator: str, table: BaseModel | None) -> dict[str, Any]:
    """The ArmSpec field a simulator's table travels in (none for a simulator without one)."""
    name = simulator_descriptor(simulator).table
    return {name: table} if name is not None and table is not None else {}


def run_doctor(specs: list[ArmSpec], env: Mapping[str, str]) -> DoctorReport:
    checks = simulator_checks(specs, env)
    codex_specs = [s for s in specs if s.agent in CODEX_AGENTS]
    if codex_specs:
        checks += codex_checks(env, codex_specs)
    checks += model_endpoint_checks(specs) + purple_card_checks(specs)
    steve1_specs = [s for s in specs if s.agent == "steve1"]
    if steve1_specs:
        checks += steve1_checks(env, steve1_specs)
        checks.append(cuda_check(env, steve1_specs))
    if specs:
        checks.append(memory_check(specs))
        checks.append(containment_check(specs))
    return DoctorReport(checks=checks)


def _seen_by_the_nodes(name: str, path: Path, nodes: list[str] | None, names: list[str]) -> Check:
    """A path every node must see as this host does: on a single-node cluster (the node is this host) or on a shared
    filesystem; else the jobs would find nothing there."""
    from mcu_arms.cluster.slurm import this_host

    shared, fstype = shared_filesystem(path)
    if nodes == [this_host()]:
        return Check(name=name, status="ok", detail=f"{path}: the one node is this host", needed_by=names)
    if shared:
        return Check(name=name, status="ok", detail=f"{path} is on {fstype}, shared with the nodes", needed_by=names)
    where = f"the nodes ({', '.join(nodes[:4])}{', ...' if len(nodes) > 4 else ''})" if nodes else "the nodes"
    return Check(
        name=name,
        status="fail",
        detail=f"{path} is on {fstype}, local to this host: {where} would not see it; put it on a filesystem the "
        "nodes share (NFS, Lustre, GPFS, BeeGFS...)",
        needed_by=names,
    )


def slurm_checks(
    env: Mapping[str, str], output_dir: Path, partitions: dict[str, str | None], codex_roots: dict[str, Path]
) -> list[Check]:
    """What Slurm arms need from the login host: the Slurm commands, a partition that exists, the run directory and this
    mcu-arms on a filesystem the nodes share, codex homes on node-local disk. `partitions`: arm -> its partition
    (None: the site's default); `codex_roots`: codex arm -> its codex root. What the episode itself needs (JDK 8,
    Xvfb, codex, CUDA) is checked on the node when it starts."""
    from mcu_arms.cluster.slurm import accounting_answers, missing_commands, partition_names, partition_nodes

    names = list(partitions)
    missing = missing_commands(env)
    checks = [
        Check(
            name="Slurm commands",
            status="fail",
            needed_by=names,
            detail=f"{', '.join(missing)} not on PATH: run from a login node of the cluster (or install its client)",
        )
        if missing
        else Check(name="Slurm commands", status="ok", detail="sbatch, squeue and scancel on PATH", needed_by=names),
    ]
    if not missing:
        checks.append(
            Check(name="sacct", status="ok", detail="answers (ended jobs are read from accounting)", needed_by=names)
            if accounting_answers(env)
            else Check(
                name="sacct",
                status="warn",
                needed_by=names,
                detail="does not answer (no accounting here): an ended job whose episode wrote no final "
                "report is read from squeue, which forgets it after MinJobAge",
            )
        )
    for partition in sorted(set(partitions.values()), key=str):
        users = [arm for arm, chosen in partitions.items() if chosen == partition]
        nodes = partition_nodes(partition, env) if not missing else None
        suffix = f" ({partition})" if partition else ""
        if partition and nodes == []:
            known = ", ".join(partition_names(env)) or "none"
            checks.append(
                Check(
                    name=f"partition {partition}",
                    status="fail",
                    needed_by=users,
                    detail=f"sinfo knows no partition '{partition}' (or it has no nodes): the partitions "
                    f"here are {known}",
                )
            )
            continue
        checks.append(_seen_by_the_nodes(f"run directory{suffix}", output_dir, nodes, users))
        checks.append(_seen_by_the_nodes(f"mcu-arms{suffix}", Path(sys.executable).parent, nodes, users))
    for root in sorted(set(codex_roots.values())):
        users = [arm for arm, chosen in codex_roots.items() if chosen == root]
        reason = network_filesystem_reason(root)
        checks.append(
            Check(
                name=f"codex homes {root}",
                status="fail" if reason else "ok",
                needed_by=users,
                detail=reason or "local disk here; built on each node's own disk when the episode starts",
            )
        )
    return checks


def slurm_preflight(
    env: Mapping[str, str], output_dir: Path, partitions: dict[str, str | None], codex_roots: dict[str, Path]
) -> dict[str, list[str]]:
    """What stops each Slurm arm from being submitted from here: every failed Slurm check."""
    return _failed_by_arm(list(partitions), slurm_checks(env, output_dir, partitions, codex_roots))


def _failed_by_arm(names: list[str], checks: list[Check], status: Status = "fail") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {name: [] for name in names}
    for check in checks:
        if check.status == status:
            for name in check.needed_by:
                found[name].append(f"{check.name}: {check.detail}")
    return found


def preflight(specs: list[ArmSpec], env: Mapping[str, str]) -> dict[str, list[str]]:
    """What stops each arm from running on this host: every failed doctor check, with its fix (empty: nothing)."""
    return _failed_by_arm([spec.name for spec in specs], run_doctor(specs, env).checks)


def endpoint_warnings(specs: list[ArmSpec]) -> dict[str, list[str]]:
    """The model endpoints of each arm that do not answer now, for the plan's warnings."""
    checks = model_endpoint_checks(specs) + purple_card_checks(specs)
    return _failed_by_arm([spec.name for spec in specs], checks, status="warn")


def plan_preflight(plan: ArmPlan, env: Mapping[str, str]) -> list[str]:
    """What stops a planned episode on this host: the checks `run` makes before it starts an arm here, made where
    the episode landed (a Slurm node checks them when the episode starts)."""
    settings = plan.settings
    codex = CodexSpec.model_construct(
        root=str(Path(plan.codex_home).parent) if plan.codex_home else None, auth=plan.codex_auth
    )
    from mcu_arms.arms.plan import simulator_table

    spec = ArmSpec.model_construct(
        name=plan.arm,
        agent=settings.agent,
        simulator=settings.simulator,
        cuda_device=settings.cuda_device,
        env=settings.env,
        codex=codex,
        **_table_field(settings.simulator, simulator_table(settings)),
    )
    return preflight([spec], env)[plan.arm]


def refuse_blocked(blocked: dict[str, list[str]]) -> None:
    """`run` starts nothing when any arm it was given cannot run here."""
    lines = [f"{arm}: {problem}" for arm, problems in blocked.items() for problem in problems]
    if lines:
        raise UserError(
            "this host cannot run these arms; nothing was started (`mcu-arms doctor` shows every check):\n  "
            + "\n  ".join(lines)
        )
