"""`mcu-arms compare`: arms side by side (settings that differ, results, milestone matrix), as tables or data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from mcu_arms.cli.common import environment, print_json, ran_arm_names, reports_user_errors
from mcu_arms.cli.options import ExperimentOption, TagFilterOption
from mcu_arms.contracts.annotations import parse_tags
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.text import MAX_MESSAGE_CHARS, neutralised, shown_text
from mcu_arms.environment import Environment
from mcu_arms.report.analysis import Analysis, analyse
from mcu_arms.report.compare import (
    across_tasks_lines,
    across_tasks_title,
    annotation_lines,
    episode_legend,
    episode_rows,
    excluded_lines,
    filter_text,
    milestone_text,
    result_rows,
    setting_text,
    to_csv,
    to_markdown,
)

if TYPE_CHECKING:
    from mcu_arms.report.tracking import TrackerName

HELP = """\
Compare arms: the settings that differ, what each scored over its seeds, and the step each milestone landed on.

ARMS are arm files (arms/x.toml), names (x: arms/x.toml, or output/x/ when there is no arm file), output dirs, \
or a campaign file (its arms, and only the episodes run for that campaign).

An arm's runs are grouped into experiments (one fingerprint each). Per arm, compare uses the experiment that \
matches the other arms except in what is under test, and of it the latest finished episode per seed; when that \
experiment is not unique it refuses (exit 2) and lists the candidates: choose with --experiment PREFIX \
(repeatable) or --run N. Interrupted, failed and unfinished episodes, other experiments and superseded episodes \
are listed with their reason and enter no statistic. --tag KEY=VALUE (repeatable) keeps only the episodes run with \
every tag given (`run --tag`); the others are listed as excluded, "other tags", with theirs.

Settings come from the run's report (the values in force), else from the arm file; only those that differ are \
shown unless --all. Milestone deltas are steps against the baseline arm (the first unless --baseline): \
negative is earlier.

--json prints the analysis itself; --csv prints tidy numbers (arm, metric, statistic, value).

--to mlflow[=TRACKING_URI] (default $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the project) or --to \
wandb[=DIR] (offline runs under DIR/wandb/, default $WANDB_DIR, else the project) also writes every compared episode \
as a run (settings as params, results and milestone steps as metrics, files as artifacts) and the verdicts as their \
parent run, in an experiment named after the campaign or the arms. Needs its extra: pip install \
'mcu-arms[mlflow]' (or [wandb]).

--to agentbeats=DIR writes each arm's finished episodes as an AgentBeats leaderboard submission (MCU leaderboard, \
"local evaluation + submission"): DIR/results/ARM.json (each seed's result as the green returned it, the replicate \
summary added under `mcu_arms`), DIR/submissions/ARM.toml (the scenario as run) and \
DIR/submissions/ARM.provenance.json. --agentbeats-id green=ID and agent=ID fill in the agents' registered ids. It \
refuses (exit 2) episodes not all finished, or run with different fingerprints, code or simulator versions, and \
never writes over a submission.

Exit code: 0 comparable (at most one setting differs) and every arm has a finished episode; 1 not comparable, or \
an arm has no finished episode; 3 not trustworthy (an arm's numbers are dominated by infrastructure trouble, or \
it has no finished episode because of it); 2 user error (also: the experiment to compare is not clear).
"""


def _header(result: Analysis) -> Table:
    table = Table()
    table.add_column("", overflow="fold")
    for name in result.arm_names():
        table.add_column(f"{name} (baseline)" if name == result.baseline else name, overflow="fold")
    return table


def _table(result: Analysis, title: str, rows: list[tuple[str, list[str]]], env: Environment) -> None:
    env.console.print(f"[bold]{title}[/]", highlight=False)
    table = _header(result)
    for key, cells in rows:
        table.add_row(key, *(escape(cell) for cell in cells))
    env.console.print(table)


def no_test_line(result: Analysis) -> str | None:
    """Why no test is printed, with what to run instead, or None when the tests mean something: arms that differ in
    more than one setting, or an arm with fewer than two seeds, have none worth reading."""
    names = result.arm_names()
    if not result.verdict.comparable:
        return (
            f"no test: the arms differ in {', '.join(result.verdict.differing)}, so no difference can be put down to "
            "one of them; compare arms that differ in one setting (`mcu-arms plan --strict` checks them first)"
        )
    if len(names) > 1 and min(arm.n for arm in result.arms) < 2:
        arms = " ".join(f"--arm {name}" for name in names)
        return f"no test at one seed per arm: run more seeds, e.g. `mcu-arms run {arms} --seeds 0-4`, then compare"
    return None


def render(result: Analysis, env: Environment, *, verbose: bool = False) -> None:
    """The verdict and the scores first; the tests when they mean something; how they were made with `verbose`;
    then settings, milestones and what was left out."""
    console = env.console
    good = result.verdict.comparable and result.verdict.trustworthy and not result.verdict.missing
    console.print(f"[{'green' if good else 'bold red'}]{escape(result.verdict.text)}[/]", highlight=False)
    if (tagged := filter_text(result)) is not None:
        console.print(f"[bold]{escape(tagged)}[/]", highlight=False, soft_wrap=True)
    for flag in result.flags:
        who = f" {escape(flag.arm)}:" if flag.arm else ""
        console.print(f"[bold yellow]! {flag.kind}[/]{who} {escape(flag.message)}", highlight=False, soft_wrap=True)
    _table(result, "results over the episodes used", result_rows(result), env)
    untestable = no_test_line(result)
    if untestable is not None and result.differences:
        console.print(f"[yellow]{escape(untestable)}[/]", highlight=False)
    for difference in result.differences if untestable is None else []:
        for line in difference.lines():
            style = "green" if line.verdict == "distinguishable" else "default"
            console.print(f"[{style}]{escape(line.text)}[/]", highlight=False, soft_wrap=True)
    if result.differences and untestable is None and verbose:
        console.print(
            f"[dim]statistics: {escape(result.statistics_method)}; multiple comparisons: {escape(result.family)}[/]",
            highlight=False,
            soft_wrap=True,
        )
    elif result.differences and untestable is None:
        console.print("[dim]how each test was made: --verbose[/]", highlight=False)

    if (across := across_tasks_title(result)) is not None:
        console.print(f"[bold]{escape(across)}[/]", highlight=False, soft_wrap=True)
        for said in across_tasks_lines(result):
            console.print(f"  {escape(said)}", highlight=False, soft_wrap=True)
        if verbose and result.across_tasks is not None and result.across_tasks.unavailable is None:
            console.print(f"[dim]  {escape(result.across_tasks.method)}[/]", highlight=False, soft_wrap=True)

    if result.settings:
        console.print("[bold]settings" + (" (all)" if result.show_all else " that differ") + "[/]")
        settings = _header(result)
        for row in result.settings:
            mark = " [red]*[/]" if row.differs and result.show_all else ""
            if row.ignored:
                mark = " [dim](ignored)[/]"
            elif row.follows:
                mark = f" [dim](follows {row.follows})[/]"
            settings.add_row(f"{row.key}{mark}", *(escape(setting_text(v)) for v in row.values))
        console.print(settings)

    if result.milestones:
        tasks = list(dict.fromkeys(row.task for row in result.milestones))
        one_task = len(tasks) == 1
        title = f"milestones{f' of {tasks[0]}' if one_task else ''}: step reached (delta vs baseline)"
        console.print(f"[bold]{title}[/]", highlight=False)
        matrix = _header(result)
        names = result.arm_names()
        for milestone in result.milestones:
            cells = [
                milestone_text(cell, name == result.baseline) for cell, name in zip(milestone.cells, names, strict=True)
            ]
            matrix.add_row(milestone.identity if one_task else f"{milestone.task}/{milestone.identity}", *cells)
        console.print(matrix)

    annotations = annotation_lines(result)
    if annotations:
        console.print("[bold]tags and notes of the episodes used[/]", highlight=False)
    for annotation in annotations:
        console.print(f"  {escape(shown_text(annotation, MAX_MESSAGE_CHARS))}", highlight=False, soft_wrap=True)
    excluded = excluded_lines(result)
    console.print(f"[bold]excluded episodes[/] ({len(excluded) or 'none'})", highlight=False)
    for reason in excluded:
        console.print(f"  {escape(shown_text(reason, MAX_MESSAGE_CHARS))}", highlight=False, soft_wrap=True)
    counters = episode_rows(result)
    _table(result, "one episode per arm: the latest used (counters, not statistics)", counters, env)
    if (legend := episode_legend(counters)) is not None:
        console.print(f"[dim]{escape(legend)}[/]", highlight=False)

    for arm in result.arms:
        facts = arm.latest
        if arm.status != "finished" and facts is not None:
            process = f" ({facts.failure_process})" if facts.failure_process else ""
            reason = facts.failure_reason or "no failure recorded"
            console.print(
                f"[bold red]{arm.arm} {arm.status}{process}:[/] {escape(shown_text(reason, MAX_MESSAGE_CHARS))}",
                soft_wrap=True,
            )
            for role, path in facts.logs.items():
                console.print(f"  {role}: {escape(path)}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command(help=HELP)
    @reports_user_errors
    def compare(
        ctx: typer.Context,
        arms: list[str] = typer.Argument(
            None, help="Arm files, names or output dirs.", show_default=False, autocompletion=ran_arm_names
        ),
        baseline: str | None = typer.Option(None, "--baseline", help="Arm the deltas are against (default: first)."),
        show_all: bool = typer.Option(False, "--all", help="Show every setting, not only those that differ."),
        run: int | None = typer.Option(None, "--run", help="Compare episode N of each arm."),
        experiment: ExperimentOption = None,
        tag: TagFilterOption = None,
        json_output: bool = typer.Option(False, "--json", help="Print the analysis as JSON."),
        csv_output: bool = typer.Option(False, "--csv", help="Print tidy numbers: arm, metric, statistic, value."),
        markdown_output: bool = typer.Option(False, "--markdown", help="Print markdown tables."),
        plot: Path | None = typer.Option(
            None, "--plot", help="Also draw milestones against step to FILE (.png, .pdf or .svg, by its suffix)."
        ),
        log_x: bool = typer.Option(False, "--log-x", help="Draw the plot's step axis on a log scale."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Also say how each test was made."),
        export: Path | None = typer.Option(
            None, "--export", help="Also write tidy tables (CSV, and Parquet when pyarrow is installed) into DIR."
        ),
        to: str | None = typer.Option(
            None,
            "--to",
            help="Also write each compared episode as a tracker run: mlflow[=TRACKING_URI], or "
            "wandb[=DIR] (offline runs, for `wandb sync`); a rerun updates those runs, never adds more. "
            "agentbeats=DIR: each arm as an AgentBeats leaderboard submission.",
        ),
        agentbeats_id: list[str] = typer.Option(
            None,
            "--agentbeats-id",
            help="With --to agentbeats=DIR: ROLE=ID, the agent's id on agentbeats.dev (roles: green, agent).",
            show_default=False,
        ),
    ) -> None:
        env = environment(ctx)
        if sum((json_output, csv_output, markdown_output)) > 1:
            raise UserError("choose one output format", allowed="--json, --csv, --markdown")
        if export is not None:
            export = export if export.is_absolute() else env.cwd / export
            _refuse_earlier_export(export)
        submission_dir = _submission_dir(to, env)
        ids = _agentbeats_ids(agentbeats_id or [], submission_dir)
        tracker = _parsed_destination(to) if to is not None and submission_dir is None else None
        result = analyse(
            arms or [],
            env,
            baseline=baseline,
            episode=run,
            experiments=experiment,
            show_all=show_all,
            tags=parse_tags(tag or []),
        )
        if plot is not None:
            _write_plot(result, plot if plot.is_absolute() else env.cwd / plot, env, log_x=log_x)
        if export is not None:
            _write_export(result, export, env)
        if tracker is not None:
            _write_tracking(result, tracker, arms or [], env)
        if submission_dir is not None:
            _write_submissions(result, submission_dir, ids, env)
        if json_output:
            print_json(env, result)
        elif csv_output:
            env.console.out(to_csv(result), highlight=False, end="")
        elif markdown_output:
            env.console.out(to_markdown(result), highlight=False, end="")
        else:
            render(result, env, verbose=verbose)
        raise typer.Exit(result.exit_code)


def _refuse_earlier_export(directory: Path) -> None:
    """Before anything is written (the plot included): an export is a record of what was compared, never replaced."""
    from mcu_arms.report.export import earlier_export

    found = earlier_export(directory)
    if found:
        raise UserError(
            f"already holds an export ({', '.join(found)}), which is never written over",
            path=directory,
            key="--export",
            allowed="a directory without one (a new name, or remove the old export)",
        )


def _write_export(result: Analysis, directory: Path, env: Environment) -> None:
    from mcu_arms.report.export import write_export

    try:
        written, excluded = write_export(result, directory)
    except OSError as error:
        raise UserError(
            f"cannot write the export: {error.strerror or error}; nothing was left behind",
            path=directory,
            key="--export",
        ) from None
    env.err_console.print(f"export: {', '.join(str(path) for path in written)}", highlight=False, soft_wrap=True)
    for reason in excluded:
        env.err_console.print(f"excluded: {escape(neutralised(reason))}", highlight=False, soft_wrap=True)


def _parsed_destination(value: str) -> tuple[TrackerName, str | None]:
    from mcu_arms.report.tracking import parse_destination

    return parse_destination(value)


def _write_tracking(
    result: Analysis, destination: tuple[TrackerName, str | None], items: list[str], env: Environment
) -> None:
    """Through report/tracking.py, which reads the comparison with one adapter (`compared`)."""
    from mcu_arms.report.trackers import export_to
    from mcu_arms.report.tracking import compared, experiment_name

    tracker, where = destination
    outcome = export_to(tracker, where, compared(result), experiment_name(items, env, result.arm_names()), env)
    env.err_console.print(outcome.text(), highlight=False, soft_wrap=True)


def _submission_dir(to: str | None, env: Environment) -> Path | None:
    if to is None:
        return None
    from mcu_arms.report.agentbeats import destination_dir

    return destination_dir(to, env.cwd)


def _agentbeats_ids(values: list[str], submission_dir: Path | None) -> dict[str, str]:
    if not values:
        return {}
    if submission_dir is None:
        raise UserError("is for an AgentBeats submission", key="--agentbeats-id", allowed="with --to agentbeats=DIR")
    from mcu_arms.report.agentbeats import parse_ids

    return parse_ids(values)


def _write_submissions(result: Analysis, directory: Path, ids: dict[str, str], env: Environment) -> None:
    """Each arm's episodes the comparison used, read through the trackers' adapter (`compared`), as a leaderboard
    submission (report/agentbeats.py); an arm with none is refused there."""
    from mcu_arms.report.agentbeats import export_arms
    from mcu_arms.report.tracking import compared

    arms: dict[str, list[Path]] = {name: [] for name in result.arm_names()}
    for episode in compared(result).episodes:
        arms[episode.arm].append(Path(episode.episode_dir))
    for submission in export_arms(arms, directory, ids, env.clock()):
        env.err_console.print(submission.text(), highlight=False, soft_wrap=True)
        for warning in submission.warnings:
            env.err_console.print(f"[yellow]! {escape(warning)}[/]", highlight=False, soft_wrap=True)


def _write_plot(result: Analysis, path: Path, env: Environment, *, log_x: bool) -> None:
    """The note goes to stderr so that --json/--csv output stays clean."""
    from mcu_arms.report.plot import save_plot

    try:
        data = save_plot(result, path, log_x=log_x)
    except OSError as error:
        raise UserError(f"cannot write the plot: {error.strerror or error}", path=path, key="--plot") from None
    env.err_console.print(
        f"plot: {path} ({len(data.arms)} arm(s), {len(data.milestones)} milestone(s))", highlight=False
    )
