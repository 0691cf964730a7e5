"""`mcu-arms plan`: resolve arms into plans and show them; without --dry-run, prepare their episode dirs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mcu_arms.arms.campaign import Selection, select_arms, select_readable_arms
from mcu_arms.arms.differences import ArmPair, arm_pairs, refuse_incomparable
from mcu_arms.arms.plan import plan_specs, purple_notes, resolve_sources
from mcu_arms.cli.common import (
    arm_file_names,
    environment,
    print_json,
    report_unreadable,
    reports_user_errors,
    show_groups,
)
from mcu_arms.cli.options import with_overrides, with_placement
from mcu_arms.contracts.catalog import CODEX_AGENTS
from mcu_arms.contracts.project import ENVIRONMENT_SETTINGS
from mcu_arms.contracts.settings import ArmPlan, Overrides
from mcu_arms.contracts.slurm import Placement
from mcu_arms.contracts.timestamps import file_stamp
from mcu_arms.doctor import (
    ArmGroup,
    Check,
    endpoint_warnings,
    group_name,
    model_endpoints,
    preflight,
    readiness_groups,
    slurm_preflight,
)
from mcu_arms.environment import ARMS_DIR_ENV, OUTPUT_DIR_ENV, Environment, fits
from mcu_arms.isolation.codex_home import default_root
from mcu_arms.layout import state_dir
from mcu_arms.stats.sequential import DEFAULT_BATCH, DEFAULT_MAX_SEEDS
from mcu_arms.supervise.reruns import RerunDecision

FILES_ARGUMENT = typer.Argument(None, help="Arm files (arms/NAME.toml).")
ARM_OPTION = typer.Option(
    [], "--arm", help="Arm by name (arms/NAME.toml) or glob ('dm_*'). Repeatable.", autocompletion=arm_file_names
)
STRICT_OPTION = typer.Option(
    False, "--strict", help="Refuse arms of which a pair differs in more than one setting (not comparable)."
)
DRY_RUN_OPTION = typer.Option(False, "--dry-run", help="Show the plans and touch nothing.")
VERBOSE_OPTION = typer.Option(
    False, "--verbose", "-v", help="After the one-line-per-arm summary, each plan whole: settings, commands, logs."
)
MAX_SEEDS_OPTION = typer.Option(
    None, "--max-seeds", min=2, help=f"--until-resolved: the most seeds per arm [{DEFAULT_MAX_SEEDS}]."
)
BATCH_OPTION = typer.Option(None, "--batch", min=1, help=f"--until-resolved: seeds per look [{DEFAULT_BATCH}].")
# Settings that only a codex-driven agent reads: left out of another agent's plan rather than shown as if they counted.
CODEX_ONLY_SETTINGS = frozenset({"session_turns", "compact", "compact_limit", "context_window"})


def _short(text: str, env: Environment) -> str:
    """Paths relative to the project and the interpreter as `python`, for reading; the plan keeps them whole."""
    return text.replace(sys.executable, "python").replace(str(env.cwd) + "/", "")


def render_plan(plan: ArmPlan, env: Environment) -> None:
    settings = Table.grid(padding=(0, 2))
    settings.add_column(style="bold")
    settings.add_column()
    codex = plan.settings.agent in CODEX_AGENTS
    for key, value in plan.settings.redacted().model_dump().items():
        if value is None or (key == "env" and not value) or (key in CODEX_ONLY_SETTINGS and not codex):
            continue
        if key == "video_model" and not plan.settings.video_eval:
            continue
        shown = ", ".join(f"{k}=***" for k in value) if key == "env" else value
        if key == "simulator_options":  # the simulator's own table, as its arm file writes it
            shown = escape(f"[{plan.settings.simulator}] " + ", ".join(f"{k} = {v!r}" for k, v in value.items()))
        mark = " [yellow](override)[/]" if key in plan.overrides else ""
        settings.add_row(key, f"{shown}{mark}")
    if codex:
        settings.add_row("compaction", plan.compaction.explanation)
    settings.add_row("fingerprint", plan.fingerprint)
    ports = f"{plan.host}: green {plan.green_port}, purple {plan.purple_port}"
    if plan.ports_auto:
        ports += f" (auto: {', '.join(plan.ports_auto)})"
        if plan.slurm is not None:
            ports = f"{plan.host}: {', '.join(plan.ports_auto)} picked on the node when the episode starts"
    settings.add_row("ports", ports)
    if plan.slurm is not None:
        settings.add_row("executor", f"slurm: {escape(plan.slurm.shown())}")
    settings.add_row("episode dir", _short(plan.episode_dir, env))
    if plan.codex_home:
        built = "; built on the node's own disk" if plan.slurm is not None else ""
        settings.add_row("CODEX_HOME", f"{plan.codex_home} (sqlite: {plan.sqlite_dir}{built})")
        settings.add_row("credential", f"{plan.codex_auth} (symlinked, never copied)")

    processes = Table.grid(padding=(0, 1))
    processes.add_column(style="bold cyan")
    processes.add_column()
    for process in plan.processes:
        processes.add_row(process.role, f"$ {_short(process.command_line(), env)}")
        for key, value in process.redacted_env().items():
            processes.add_row("", f"[dim]env[/] {key}={value}")
        processes.add_row("", f"[dim]log[/] {_short(process.log, env)}")
    links = Table.grid(padding=(0, 1))
    links.add_column()
    for link, target in plan.links.items():
        links.add_row(f"[dim]{_short(link, env)} -> {_short(target, env)}[/]")

    parts: list = [settings, "", processes, "", links]
    for warning in plan.warnings:
        parts.append(f"[yellow]warning:[/] {escape(warning)}")
    for note in plan.notes:
        parts.append(f"[dim]note:[/] {escape(note)}")
    for problem in plan.blocked:
        parts.append(f"[bold red]cannot run here:[/] {escape(problem)}")
    title = f"arm [bold]{plan.arm}[/] ({plan.source})"
    env.console.print(Panel(Group(*parts), title=title, title_align="left", expand=False))


def planned(
    files: list[Path],
    arm_names: list[str],
    overrides: Overrides,
    env: Environment,
    placement: Placement | None = None,
    *,
    every_arm_when_none: bool = False,
) -> tuple[list[ArmPlan], Selection]:
    """The episodes to run for what was named (arm files, `--arm`, campaign files; with none and
    `every_arm_when_none`, every arm in arms/), each with what stops it here for the plan to show and `run` to
    refuse: doctor's failed checks of this host, or for Slurm the failed checks of what submitting from here needs
    (what the episode needs is checked on its node)."""
    sources = resolve_sources(files, arm_names, env, every_arm_when_none=every_arm_when_none)
    folder = not files and not arm_names  # every arm of arms/: a bad file is reported, the rest still planned
    selection = (select_readable_arms if folder else select_arms)(sources, overrides, env.arms_dir)
    tags = selection.campaign_tags(f"{file_stamp(env.clock())}-{os.getpid()}")
    plans = [
        plan.model_copy(update={"campaign": tags.get(plan.arm)})
        for plan in plan_specs(selection.specs, overrides, env, placement)
    ]
    if placement is not None and placement.executor == "slurm":
        partitions = {plan.arm: plan.slurm.partition for plan in plans if plan.slurm is not None}
        roots = {plan.arm: Path(plan.codex_home).parent for plan in plans if plan.codex_home}
        blocked = slurm_preflight(env.variables, env.output_dir, partitions, roots)
    else:
        blocked = preflight([spec for spec, _ in selection.specs], env.variables)
    unanswered = endpoint_warnings([spec for spec, _ in selection.specs])
    return [
        plan.model_copy(
            update={
                "blocked": blocked.get(plan.arm, []),
                "warnings": plan.warnings + unanswered[plan.arm],
                "unanswered": unanswered[plan.arm],
            }
        )
        for plan in plans
    ], selection


def plan_groups(plans: list[ArmPlan], selection: Selection) -> list[ArmGroup]:
    """The arms grouped by what they need (doctor's groups), from what their plans found."""
    specs = {spec.name: spec for spec, _ in selection.specs}
    arms = dict.fromkeys(plan.arm for plan in plans)
    named = [(a, group_name(specs[a].simulator, specs[a].agent, bool(model_endpoints(specs[a])))) for a in arms]
    checks = [
        Check(name=problem.split(": ", 1)[0], status="fail", detail="", needed_by=[plan.arm])
        for plan in plans
        for problem in plan.blocked
    ]
    checks += [
        Check(name=problem.split(": ", 1)[0], status="warn", detail="", needed_by=[plan.arm], endpoint=True)
        for plan in plans
        for problem in plan.unanswered
    ]
    return readiness_groups(named, checks)


CANNOT_RUN_HERE = "cannot run here"
ENDPOINTS_DOWN = "endpoints down"
WILL_STYLES = {
    "ready": "green",
    "run": "green",
    "retry": "yellow",
    "skip": "dim",
    ENDPOINTS_DOWN: "yellow",
    CANNOT_RUN_HERE: "bold red",
}


def _will(plan: ArmPlan, decision: RerunDecision | None) -> tuple[str, str]:
    """What happens to this episode (ready, or run / skip / retry for `run --dry-run`, or cannot run here) and why."""
    if plan.blocked:  # each "check: what is wrong and how to fix it"; the summary names the checks
        checks = ", ".join(problem.split(": ", 1)[0] for problem in plan.blocked)
        return CANNOT_RUN_HERE, f"{checks} (`mcu-arms doctor` or --verbose says how to fix them)"
    if decision is None and plan.unanswered:  # never "ready" while its models cannot be reached
        return ENDPOINTS_DOWN, ", ".join(problem.split(": ", 1)[0] for problem in plan.unanswered)
    if decision is None:
        return "ready", ""
    return decision.action, decision.message or ""


SUMMARY_COLUMNS = ("arm", "agent", "simulator", "task", "steps", "seed", "fingerprint", "will", "why")


def _summary_values(plan: ArmPlan, decisions: dict[str, RerunDecision] | None) -> tuple[str, ...]:
    will, why = _will(plan, (decisions or {}).get(plan.label))
    settings = plan.settings
    return (
        plan.label,
        settings.agent,
        settings.simulator,
        settings.task,
        str(settings.steps),
        str(settings.seed),
        plan.fingerprint,
        will,
        why,
    )


def plan_summary(
    plans: list[ArmPlan], env: Environment, decisions: dict[str, RerunDecision] | None = None
) -> RenderableType:
    """One line per episode, what matters first: what it is, what will happen to it, and why. A table when the
    terminal is wide enough, else a plain line each (`ARM: WILL - why (what it is)`), never a cut name."""
    table = Table(title="plan" if decisions is None else "run --dry-run", title_justify="left")
    for column in SUMMARY_COLUMNS[:-1]:
        table.add_column(column, no_wrap=True)
    table.add_column(SUMMARY_COLUMNS[-1], overflow="fold")
    rows = [_summary_values(plan, decisions) for plan in plans]
    for *values, will, why in rows:
        table.add_row(*(escape(value) for value in values), f"[{WILL_STYLES[will]}]{will}[/]", escape(why))
    if fits(env.console, table):
        return table
    lines = []
    for label, agent, simulator, task, steps, seed, fingerprint, will, why in rows:
        reason = f" - {escape(why)}" if why else ""
        lines.append(
            f"[bold]{escape(label)}[/]: [{WILL_STYLES[will]}]{will}[/]{reason} "
            f"[dim]({agent} on {simulator}, {escape(task)}, {steps} steps, seed {seed}, {fingerprint})[/]"
        )
    return Group(*lines)


def project_settings_table(env: Environment) -> Table:
    """Each project setting in force and where it came from: a flag, the environment, the settings file, a default."""
    in_force = env.project.describe() if env.project is not None else f"none (the project is {env.cwd})"
    table = Table(title=f"project settings: {escape(in_force)}", title_justify="left", box=None)
    for column in ("setting", "value", "from"):
        table.add_column(column)
    for setting, (given, variable, default) in {
        "arms_dir": (env.arms_root, ARMS_DIR_ENV, "arms"),
        "output_dir": (env.output_root, OUTPUT_DIR_ENV, "output"),
    }.items():
        path, source = env.located(given, variable, setting, default)
        table.add_row(setting, escape(env.shown(path)), source)
    for setting, chosen in (("state_dir", state_dir(env.variables)), ("codex_root", default_root(env.variables))):
        variable = ENVIRONMENT_SETTINGS[setting]
        source = "environment" if env.variables.get(variable) else "default"
        source = "settings file" if variable in env.set_by_project else source
        table.add_row(setting, escape(str(chosen)), source)
    return table


def show_plans(
    plans: list[ArmPlan],
    env: Environment,
    *,
    dry_run: bool,
    json_output: bool,
    decisions: dict[str, RerunDecision] | None = None,
    verbose: bool = False,
    groups: list[ArmGroup] | None = None,
    pairs: list[ArmPair] | None = None,
) -> None:
    """A summary line per episode first (for `run --dry-run`: run, skip as finished, retry, or cannot run here), then
    the warnings; each plan whole only with `verbose`."""
    if json_output:
        shown: dict = {"dry_run": dry_run, "plans": [p.public() for p in plans]}
        if decisions is not None:
            shown["decisions"] = {arm: {"action": d.action, "message": d.message} for arm, d in decisions.items()}
        print_json(env, shown)
        return
    env.console.print(plan_summary(plans, env, decisions))
    if env.project is not None and env.project.root != env.cwd:  # a settings file above: say which is in force
        env.console.print(f"[dim]project settings: {escape(env.project.describe())} (found above this folder)[/]")
    if groups is not None and len(groups) > 1:
        show_groups(groups, env)
    said: dict[str, list[str]] = {}  # one warning once, with every arm it concerns (an endpoint several arms share)
    for arm_plan in plans:
        for warning in arm_plan.warnings:
            labels = said.setdefault(warning, [])
            if arm_plan.arm not in labels and arm_plan.label not in labels:
                labels.append(arm_plan.label if warning not in arm_plan.unanswered else arm_plan.arm)
    for warning, labels in said.items():
        env.console.print(f"[yellow]warning:[/] {escape(', '.join(labels))}: {escape(warning)}")
    for arm_plan in plans:
        for note in purple_notes(arm_plan):
            env.console.print(f"note: {escape(arm_plan.label)}: {escape(note)}")
    show_differences(pairs or [], env.console)
    if verbose:
        for arm_plan in plans:
            render_plan(arm_plan, env)
        env.console.print(project_settings_table(env))
    else:
        env.console.print("[dim]each plan whole (settings, commands, logs, notes): --verbose[/]")
    if dry_run:
        env.console.print("[bold]dry run:[/] nothing was created, reserved or started.")


def show_power(
    files: list[Path],
    pilot: list[str],
    effect: float | None,
    spread: float | None,
    env: Environment,
    *,
    until_resolved: tuple[int, int] | None,
    json_output: bool,
) -> None:
    """`plan CAMPAIGN --power`: seeds for 80 % power from a pilot or a stated effect and spread, nothing planned."""
    from mcu_arms.contracts.errors import UserError
    from mcu_arms.report.planning import power_plan, power_text

    if len(files) != 1:
        raise UserError("--power plans one campaign: name its file", key="--power", allowed="campaigns/NAME.toml")
    result = power_plan(files[0], env, pilot=pilot or None, effect=effect, spread=spread, until_resolved=until_resolved)
    if json_output:
        print_json(env, result.model_dump(mode="json"))
        return
    for line in power_text(result):
        env.console.print(escape(line), highlight=False, soft_wrap=True)


def differences(plans: list[ArmPlan], selection: Selection, named: bool, *, strict: bool) -> list[ArmPair]:
    """The pairs of the named arms with what each differs in; with `strict`, a pair `compare` would call NOT
    comparable stops the command here, before anything is prepared. Every arm of arms/ (nothing named) is no
    comparison: no pairs."""
    pairs = arm_pairs(plans, selection) if named else []
    if strict:
        refuse_incomparable(pairs)
    return pairs


def show_differences(pairs: list[ArmPair], console: Console) -> None:
    """Pair by pair what the arms differ in, and a warning for each pair that differs in more than one setting."""
    if pairs:
        console.print("[bold]the arms differ in[/] (what `compare` will test):")
        for pair in pairs:
            console.print(f"  {escape(pair.text())}", soft_wrap=False)
    for pair in pairs:
        if not pair.comparable:
            console.print(
                f"[yellow]warning:[/] {escape(pair.first)} and {escape(pair.second)} differ in "
                f"{len(pair.differing)} settings ({escape(', '.join(pair.differing))}): `compare` will call them NOT "
                "comparable; change one setting per pair (--strict refuses such arms)"
            )


def register(app: typer.Typer) -> None:
    @app.command()
    @reports_user_errors
    @with_overrides
    @with_placement
    def plan(
        ctx: typer.Context,
        overrides: Overrides,
        placement: Placement,
        files: list[Path] = FILES_ARGUMENT,
        arm: list[str] = ARM_OPTION,
        dry_run: bool = DRY_RUN_OPTION,
        verbose: bool = VERBOSE_OPTION,
        strict: bool = STRICT_OPTION,
        json_output: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
        power: bool = typer.Option(
            False,
            "--power",
            help="Plan a campaign's seeds: 80% power and the smallest effect resolvable, by simulation.",
        ),
        pilot: list[str] = typer.Option(
            [], "--pilot", help="With --power: an earlier experiment's arms (as compare names them), baseline first."
        ),
        effect: float | None = typer.Option(None, "--effect", help="With --power: the mean difference expected."),
        spread: float | None = typer.Option(None, "--spread", help="With --power: the sd of per-seed differences."),
        until_resolved: bool = typer.Option(
            False, "--until-resolved", help="With --power: also simulate `run --until-resolved` (power, seeds used)."
        ),
        max_seeds: int | None = MAX_SEEDS_OPTION,
        batch: int | None = BATCH_OPTION,
    ) -> None:
        """Resolve arms into plans: commands, environment, ports, paths, fingerprint and warnings.

        With no arm named, every arm in arms/. Without --dry-run it also checks that the ports are free now and builds each codex agent's CODEX_HOME (on Slurm both happen on the node, when each episode starts); only `run` creates episode dirs.
        """  # noqa: E501 - typer keeps a help paragraph's line breaks, so each paragraph is one line
        env = environment(ctx)
        from mcu_arms.report.planning import sequential_asked

        sequential = sequential_asked(power=power, until_resolved=until_resolved, max_seeds=max_seeds, batch=batch)
        if power:
            show_power(files, pilot, effect, spread, env, until_resolved=sequential, json_output=json_output)
            return
        plans, selection = planned(files or [], arm, overrides, env, placement, every_arm_when_none=True)
        pairs = differences(plans, selection, bool(files or arm), strict=strict)
        on_nodes = placement.executor == "slurm"
        if not dry_run and not on_nodes:
            from mcu_arms.arms.prepare import prepare_hosts

            plans = prepare_hosts(plans, env)
        show_plans(
            plans,
            env,
            dry_run=dry_run or on_nodes,
            json_output=json_output,
            verbose=verbose,
            groups=plan_groups(plans, selection),
            pairs=pairs,
        )
        if json_output:
            show_differences(pairs, env.err_console)
        if not dry_run and not json_output and on_nodes:
            env.console.print(
                f"planned {len(plans)} arm(s) for Slurm: ports and codex homes are made on each episode's node when it "
                "starts; `mcu-arms run --executor slurm` submits them."
            )
        elif not dry_run and not json_output:
            env.console.print(
                f"prepared {len(plans)} arm(s): ports free now, codex homes built; `mcu-arms run` creates the episode."
            )
        report_unreadable(selection, env)
