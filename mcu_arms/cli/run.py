"""`mcu-arms run`: plan arms, then start each arm's green, purple and client, watch them, and write the report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.cli.options import with_overrides, with_placement
from mcu_arms.cli.plan import (
    ARM_OPTION,
    BATCH_OPTION,
    DRY_RUN_OPTION,
    FILES_ARGUMENT,
    MAX_SEEDS_OPTION,
    STRICT_OPTION,
    VERBOSE_OPTION,
    differences,
    planned,
    show_differences,
    show_plans,
)
from mcu_arms.contracts.agent_report import in_its_words
from mcu_arms.contracts.annotations import checked_note, parse_tags
from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.contracts.settings import Overrides
from mcu_arms.contracts.slurm import Placement
from mcu_arms.contracts.text import MAX_MESSAGE_CHARS, shown_text
from mcu_arms.doctor import refuse_blocked
from mcu_arms.environment import Environment, fits
from mcu_arms.process.process_exit import skip_teardown
from mcu_arms.stats.sequential import (
    DEFAULT_PRIMARY,
    PRIMARY_METRICS,
)

if TYPE_CHECKING:
    from mcu_arms.contracts.settings import ArmPlan
    from mcu_arms.supervise.outcomes import ArmOutcome, RunOutcome
    from mcu_arms.supervise.until_resolved import SequentialAsk

RUN_HELP = """Run arms: plan them, start each arm's green and purple agents, wait until both are ready, run the \
evaluation client, and write output/ARM/episode_NNN/result.json (linked as logs/ARM_result.json).

FILES are arm files or campaign files (campaigns/NAME.toml: a baseline, its variants and their seeds). Each seed of \
an arm is one episode. Episodes run side by side, at most --max-parallel at a time (default: the campaign's \
max_parallel, else what this host can take); one failing does not stop the others unless --fail-fast. With --executor \
slurm each episode is a Slurm job (options from the files' [slurm] tables and the --slurm-* flags; --max-parallel \
throttles each job array); the run watches them to the end, or returns once they are submitted with --detach. An \
episode that failed for infrastructure reasons is run again up to --retries times (default: the campaign's retries, \
else 0), each attempt recorded. An episode of which any run of the same seed finished with the same fingerprint is \
skipped (--rerun runs it anyway); a failed one is retried. --notify CMD runs CMD when the run ends, with \
MCU_ARMS_RUN_STATUS and MCU_ARMS_RUN_SUMMARY (JSON) in its environment. Ctrl-C or SIGTERM stops this run's own \
processes only and marks the reports interrupted.

With --until-resolved a campaign runs its seeds a --batch at a time (looks) and stops when every variant's difference \
from the baseline on --primary is resolved by a group-sequential exact sign-flip test (valid however many looks; \
Lan–DeMets O'Brien–Fleming alpha spending up to --max-seeds), or at --max-seeds; each episode records its look. It \
needs a paired design (the embedded simulator, or MineStudio with reset_mode = "hard") and runs every episode fresh.

Exit codes: 0 every arm ended as asked (finished, skipped, or stopped by `mcu-arms stop`, which the output names), 1 \
an arm failed, 130 the run itself was interrupted (Ctrl-C, a signal), 2 a user error (bad arm file, busy port, arm \
already running).
"""


def register(app: typer.Typer) -> None:
    @app.command(help=RUN_HELP, short_help="Run arms: each arm's green, purple and client, to output/ARM/episode_NNN/.")
    @reports_user_errors
    @with_overrides
    @with_placement
    def run(
        ctx: typer.Context,
        overrides: Overrides,
        placement: Placement,
        files: list[Path] = FILES_ARGUMENT,
        arm: list[str] = ARM_OPTION,
        dry_run: bool = DRY_RUN_OPTION,
        verbose: bool = VERBOSE_OPTION,
        strict: bool = STRICT_OPTION,
        fail_fast: bool = typer.Option(False, "--fail-fast", help="Stop every arm as soon as one fails."),
        ready_timeout: float = typer.Option(
            120.0, "--ready-timeout", min=1.0, help="Seconds green and purple get to become ready."
        ),
        rerun: bool = typer.Option(
            False, "--rerun", help="Run episodes that already finished with the same fingerprint and seed."
        ),
        max_parallel: int | None = typer.Option(
            None, "--max-parallel", min=1, help="Episodes at once [the campaign's, else what this host can take]."
        ),
        retries: int | None = typer.Option(
            None, "--retries", min=0, help="Extra attempts for an episode that failed for infrastructure reasons."
        ),
        notify: str | None = typer.Option(
            None, "--notify", help="Shell command to run when the run ends (status and summary in its environment)."
        ),
        detach: bool = typer.Option(
            False, "--detach", help="Slurm: submit the episodes and return, leaving the jobs to run (see `status`)."
        ),
        tag: list[str] = typer.Option(
            [], "--tag", help="KEY=VALUE kept in every episode's report, shown and filtered by (repeatable)."
        ),
        note: str | None = typer.Option(None, "--note", help="Why this run was made: kept in every episode's report."),
        json_output: bool = typer.Option(False, "--json", help="Print the outcome as JSON (progress on stderr)."),
        until_resolved: bool = typer.Option(
            False,
            "--until-resolved",
            help="A campaign: run its seeds in batches until every variant's difference "
            "from the baseline is resolved (a group-sequential test, valid however many looks), or --max-seeds.",
        ),
        max_seeds: int | None = MAX_SEEDS_OPTION,
        batch: int | None = BATCH_OPTION,
        primary: str | None = typer.Option(
            None,
            "--primary",
            help=f"--until-resolved: the metric the stopping rule reads: "
            f"{', '.join(PRIMARY_METRICS)} [{DEFAULT_PRIMARY}].",
        ),
    ) -> None:
        from mcu_arms.supervise.until_resolved import checked_modes

        skip_teardown()
        env = environment(ctx)
        sequential = checked_modes(
            on_slurm=placement.executor == "slurm",
            detach=detach,
            dry_run=dry_run,
            until_resolved=until_resolved,
            seeds_given=overrides.seeds is not None,
            max_seeds=max_seeds,
            batch=batch,
            primary=primary,
        )
        annotations = {"tags": parse_tags(tag), "note": checked_note(note)}
        given: dict[str, Any] = {"fail_fast": fail_fast, "ready_timeout_s": ready_timeout, "max_parallel": max_parallel}
        if sequential is not None:
            _run_until_resolved(env, files or [], arm, overrides, placement, json_output, sequential, retries, given)
        plans, selection = planned(files or [], arm, overrides, env, placement)
        plans = [plan.model_copy(update=annotations) for plan in plans]
        pairs = differences(plans, selection, True, strict=strict)
        human = env.err_console if json_output else env.console
        if dry_run:
            from mcu_arms.supervise.reruns import rerun_decision

            decisions = {p.label: rerun_decision(p, env.output_dir / p.arm, rerun=rerun) for p in plans}
            show_plans(
                plans, env, dry_run=True, json_output=json_output, decisions=decisions, verbose=verbose, pairs=pairs
            )
            if json_output:
                show_differences(pairs, human)
            return

        from mcu_arms.supervise.executors import run_arms, run_options

        refuse_blocked({plan.arm: plan.blocked for plan in plans})
        options = run_options(plans, selection, retries=retries, rerun=rerun, **given)
        show_differences(pairs, human)
        outcome = run_arms(plans, env, options, human, detach=detach)
        if notify:
            from mcu_arms.supervise.notify import run_notify

            for problem in run_notify(notify, outcome, env):
                human.print(f"[yellow]warning:[/] {escape(problem)}", highlight=False, soft_wrap=True)
        if json_output:
            print_json(env, {"exit_code": outcome.exit_code, **outcome.model_dump(mode="json")})
        else:
            _render_outcome(outcome, env)
        raise typer.Exit(outcome.exit_code)


def _run_until_resolved(
    env: Environment,
    files: list[Path],
    arm_names: list[str],
    overrides: Overrides,
    placement: Placement,
    json_output: bool,
    sequential: SequentialAsk,
    retries: int | None,
    given: dict[str, Any],
) -> None:
    from mcu_arms.supervise.executors import run_arms, run_options
    from mcu_arms.supervise.until_resolved import run_until_resolved, the_campaign

    plans, selection = planned(files, arm_names, overrides, env, placement)
    campaign = the_campaign(selection)
    human = env.err_console if json_output else env.console
    options = run_options(plans, selection, retries=retries, rerun=True, **given)

    def plan_look(seeds: list[int], look: SequentialLook) -> list[ArmPlan]:
        batch_plans, _ = planned(files, arm_names, overrides.model_copy(update={"seeds": seeds}), env, placement)
        refuse_blocked({plan.arm: plan.blocked for plan in batch_plans})
        return [plan.model_copy(update={"sequential": look}) for plan in batch_plans]

    def run_look(batch_plans: list[ArmPlan]) -> RunOutcome:
        outcome = run_arms(batch_plans, env, options, human)
        if not json_output:
            _render_outcome(outcome, env)
        return outcome

    result = run_until_resolved(
        campaign,
        plan_look,
        run_look,
        human,
        max_seeds=sequential.max_seeds,
        batch=sequential.batch,
        primary=sequential.primary,
    )
    if json_output:
        print_json(env, {"exit_code": result.exit_code, **result.model_dump(mode="json")})
    else:
        seeds = sum(len(look.seeds) for look in result.looks)
        env.console.print(
            f"stopped ({result.stopped}) after {len(result.looks)} look{'s' if len(result.looks) > 1 else ''}"
            f", {seeds} seeds per arm; {escape(result.method)}",
            highlight=False,
        )
    raise typer.Exit(result.exit_code)


def _milestones(arm: ArmOutcome) -> str:
    """k/n, and how many this simulator can reach at all when that is fewer (a perfect run reaches only those)."""
    if arm.milestones_reached is None or not arm.milestones_total:
        return "-"
    shown = f"{arm.milestones_reached}/{arm.milestones_total}"
    if arm.milestones_reachable is not None and arm.milestones_reachable < arm.milestones_total:
        shown += f" ({arm.milestones_reachable} reachable)"
    return shown


STATUS_STYLES = {
    "finished": "green",
    "failed": "bold red",
    "interrupted": "magenta",
    "skipped": "dim",
    "queued": "cyan",
}
OUTCOME_COLUMNS = ("score", "steps", "milestones", "alerts", "report / reason")


def _where(arm: ArmOutcome, env: Environment) -> tuple[str, str]:
    """("reason", why it failed or was skipped), else ("report", where its report is)."""
    if arm.failure is not None:  # a reason may quote an agent: neutralised and bounded
        reason = f"{arm.failure.process or 'mcu-arms'}: {arm.failure.reason}{in_its_words(arm.agent_reasons)}"
        return "reason", shown_text(reason, MAX_MESSAGE_CHARS)
    if arm.status in ("skipped", "queued"):
        return "reason", arm.message
    return "report", env.shown(arm.report_path) if arm.report_path else ""


def _outcome_values(arm: ArmOutcome, env: Environment) -> tuple[str, ...]:
    """One arm's values, in the order of OUTCOME_COLUMNS, as plain text."""
    score = f"{arm.score:g} / {arm.max_score:g}" if arm.score is not None and arm.max_score is not None else "-"
    steps = str(arm.steps_run) if arm.steps_run is not None else "-"
    return score, steps, _milestones(arm), str(len(arm.alerts)), _where(arm, env)[1]


def _status(arm: ArmOutcome) -> str:
    return f"[{STATUS_STYLES[arm.status]}]{arm.status}[/]"


def _wide_outcome(outcome: RunOutcome, env: Environment) -> Table:
    """One row per arm, one column per value, none of them wrapped."""
    table = Table(title="mcu-arms run", title_justify="left")
    replicated = _replicated(outcome)
    for column in ("arm", *(("seed",) if replicated else ()), "status", *OUTCOME_COLUMNS[:-1]):
        table.add_column(column, no_wrap=True)
    table.add_column(OUTCOME_COLUMNS[-1], overflow="fold")  # a long path or reason yields first, never the status
    for arm in outcome.arms:
        seed = (_seed_text(arm),) if replicated else ()
        table.add_row(escape(arm.arm), *seed, _status(arm), *(escape(value) for value in _outcome_values(arm, env)))
    return table


def _replicated(outcome: RunOutcome) -> bool:
    """Whether an arm appears more than once (seeds, or a retried attempt): then each row says which it is."""
    names = [arm.arm for arm in outcome.arms]
    return len(set(names)) < len(names)


def _seed_text(arm: ArmOutcome) -> str:
    seed = "-" if arm.seed is None else str(arm.seed)
    return seed if arm.attempt == 1 else f"{seed} (attempt {arm.attempt})"


def _stacked_outcome(outcome: RunOutcome, env: Environment) -> Group:
    """Each arm as a block of labelled lines, for a terminal too narrow for the table (50 columns)."""
    blocks: list[RenderableType] = [Text("mcu-arms run", style="italic")]
    for arm in outcome.arms:
        lines = Table.grid(padding=(0, 2))
        lines.add_column(style="dim", no_wrap=True)
        lines.add_column(overflow="fold")
        labels = (*OUTCOME_COLUMNS[:-1], _where(arm, env)[0])
        for label, value in zip(labels, _outcome_values(arm, env), strict=True):
            lines.add_row(label, escape(value))
        seed = f" seed {_seed_text(arm)}" if _replicated(outcome) else ""
        blocks += [f"[bold]{escape(arm.arm)}[/]{seed} {_status(arm)}", Padding(lines, (0, 0, 0, 2))]
    return Group(*blocks)


def _render_outcome(outcome: RunOutcome, env: Environment) -> None:
    wide = _wide_outcome(outcome, env)
    env.console.print(wide if fits(env.console, wide) else _stacked_outcome(outcome, env))
    labels = {arm.simulator_label for arm in outcome.arms if arm.simulator_label}
    for label in sorted(labels):
        env.console.print(f"[dim]simulator: {escape(label)}[/]")
    for arm, who in outcome.stopped_by_users():
        env.console.print(f"[magenta]{escape(arm)} stopped as asked, by {escape(who)}[/]")
    if outcome.interrupted_by and outcome.exit_code != 0:
        env.console.print(f"[magenta]interrupted by {outcome.interrupted_by}[/]")
    if (hint := next_step(outcome)) is not None:
        env.console.print(f"[dim]next:[/] {escape(hint)}", highlight=False)


def next_step(outcome: RunOutcome) -> str | None:
    """What to do with what just finished: compare the arms (two or more), or look at the one (one)."""
    arms = list(dict.fromkeys(arm.arm for arm in outcome.arms if arm.status in ("finished", "skipped")))
    if not arms:
        return None
    if len(arms) == 1:
        return f"`mcu-arms view {arms[0]}` shows its episode step by step; run a second arm to compare it with"
    return f"`mcu-arms compare {' '.join(arms)}` tests the difference; `mcu-arms view {' '.join(arms)}` shows it"
