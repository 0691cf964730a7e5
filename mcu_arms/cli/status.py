"""`mcu-arms status` and `mcu-arms stop`: each arm's latest episode, and stopping an arm's own processes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.contracts.text import MAX_MESSAGE_CHARS, shown_text
from mcu_arms.environment import Environment, fits

if TYPE_CHECKING:
    from mcu_arms.arms.campaign import Campaign
    from mcu_arms.report.status import ArmState, CampaignState

STATE_STYLES = {
    "queued": "dim",
    "started": "cyan",
    "finished": "green",
    "failed": "bold red",
    "failed (time limit)": "bold red",
    "interrupted": "magenta",
    "interrupted (cancelled)": "magenta",
}

STOP_HELP = """Stop a running arm, whichever of its episodes started its processes: only processes the private record \
of what mcu-arms started names and that still carry its evidence (recorded pids with their create_time re-checked and \
their owner token, holders of a recorded owner token, members of a recorded cgroup that still carries its marker), \
never anything a report in output/ names, nor anything found by name; never pid 1, stop itself or its ancestors. The \
supervising `mcu-arms run` is asked first (SIGTERM, or a stop request when it also runs other arms) so that it \
finalises the report as interrupted; when it is gone, the arm's process groups are stopped here (TERM, wait, KILL) \
and the report is marked interrupted.

Exit codes: 0 done (stopped, or nothing was running), 1 a process survived SIGKILL, 2 a user error (unknown arm).
"""


def _slurm(state: ArmState) -> list[str]:
    """The episode's job: id and state (why it waits), name, the episode's logs and sacct's figures."""
    if not state.slurm_job or state.slurm is None:
        return []
    from mcu_arms.cluster.slurm import accounting_text

    job = state.slurm
    parts = [f"slurm {state.slurm_job}", *([f"name {job.name}"] if job.name else [])]
    parts += [f"{which} {path}" for which, path in (("stdout", job.stdout), ("stderr", job.stderr)) if path]
    if job.accounting is not None:
        parts.append(f"sacct {accounting_text(job.accounting)}")
    return [escape(part) for part in parts]


def _processes(state: ArmState, *, stacked: bool) -> str:
    parts = _slurm(state)
    for process in state.processes:
        mark = "[green]alive[/]" if process.alive else "[dim]gone[/]"
        parts.append(f"{process.role} {process.pid} {mark}")
    for live in state.live_elsewhere:
        parts.append(f"[bold yellow]ep {live.episode:03d} {live.role} {live.pid} alive ({live.found_by})[/]")
    return ("\n" if stacked else ", ").join(parts) or "-"


def _milestones(state: ArmState, *, stacked: bool) -> str:
    """Every milestone reached, with the count against the total (and what this simulator can reach)."""
    if not (state.milestones or state.milestones_total):
        return "-"
    count = str(len(state.milestones))
    if state.milestones_total:
        count += f"/{state.milestones_total}"
        if state.milestones_reachable is not None and state.milestones_reachable < state.milestones_total:
            count += f" ({state.milestones_reachable} reachable)"
    if not state.milestones:
        return count
    return "\n".join([count, *state.milestones]) if stacked else f"{count}: {', '.join(state.milestones)}"


def _step(state: ArmState) -> str:
    return f"{state.step if state.step is not None else '-'}/{state.max_steps or '-'}"


MAX_NOTE_SHOWN = 80  # status shows the start of a run's note; the report keeps it whole


def _score(state: ArmState) -> str | None:
    return f"{state.score:g} / {state.max_score:g}" if state.score is not None and state.max_score else None


def _note(state: ArmState) -> str:
    """Why it failed (or how many alerts), then the run's tags and note (`run --tag`, `--note`)."""
    parts = []
    if state.failure:
        parts.append(shown_text(state.failure, MAX_MESSAGE_CHARS))  # a reason from a report may quote an agent
    elif state.alerts:
        parts.append(f"{state.alerts} alert(s)")
    if state.tags:
        parts.append(" ".join(f"{key}={value}" for key, value in state.tags.items()))
    if state.note:
        parts.append(shown_text(state.note, MAX_NOTE_SHOWN))
    return "; ".join(parts)


def _styled_state(state: ArmState, text: str) -> str:
    return f"[{STATE_STYLES.get(state.state, 'yellow')}]{escape(text)}[/]"


def _wide(states: list[ArmState]) -> Table:
    """One line per arm, one column per value: for a wide terminal or a pipe."""
    table = Table(title="mcu-arms status", title_justify="left")
    for column in ("arm", "episode", "seed", "state", "task", "step", "score", "milestones", "processes", "note"):
        table.add_column(column, no_wrap=True)
    for state in states:
        table.add_row(
            escape(state.arm),
            f"{state.episode:03d}" if state.episode is not None else "-",
            str(state.seed) if state.seed is not None else "-",
            _styled_state(state, state.state),
            escape(state.task or "-"),
            _step(state),
            _score(state) or "-",
            escape(_milestones(state, stacked=False)),
            _processes(state, stacked=False),
            escape(_note(state)),
        )
    return table


def _episode_lines(state: ArmState) -> list[str]:
    episode = [f"episode {state.episode:03d}"] if state.episode is not None else []
    return episode + ([f"seed {state.seed}"] if state.seed is not None else [])


def _stacked(states: list[ArmState]) -> Group:
    """The same values as a paragraph per arm, for a terminal too narrow for the table: every line wraps on word
    boundaries, so a task, milestone or pid is never split or cut."""
    blocks: list[RenderableType] = [Text.from_markup("[bold]mcu-arms status[/]")]
    for state in states:
        score = _score(state)
        head = " · ".join([f"[bold]{escape(state.arm)}[/]", _styled_state(state, state.state), *_episode_lines(state)])
        progress = ", ".join([state.task or "-", f"step {_step(state)}", *([f"score {score}"] if score else [])])
        lines = [
            escape(progress),
            f"milestones {escape(_milestones(state, stacked=False))}",
            f"processes {_processes(state, stacked=False)}",
        ]
        if _note(state):
            lines.append(f"note {escape(_note(state))}")
        blocks.append(Text.from_markup(head))
        blocks += [Padding(Text.from_markup(line), (0, 0, 0, 2), expand=False) for line in lines]
    return Group(*blocks)


def _render(states: list[ArmState], env: Environment) -> None:
    wide = _wide(states)
    env.console.print(wide if fits(env.console, wide) else _stacked(states))


def _campaigns(paths: list[Path], env: Environment) -> list[Campaign]:
    from mcu_arms.arms.campaign import load_campaign

    return [load_campaign(path if path.is_absolute() else env.cwd / path, env.arms_dir) for path in paths]


CELL_STYLES = {
    "done": "green",
    "running": "cyan",
    "queued": "dim",
    "failed": "bold red",
    "interrupted": "magenta",
    "stale": "yellow",
    "not started": "dim",
}


def _render_campaign(state: CampaignState, env: Environment) -> None:
    """The campaign's arm × seed grid under one line: k of n done, and the ETA from the pace so far."""
    run = f" (run {state.run}{', running' if state.supervisor_alive else ''})" if state.run else " (never run)"
    env.console.print(
        f"[bold]campaign {escape(state.campaign)}[/]{escape(run)}: {escape(state.tally.text())}", highlight=False
    )  # wrapped on word boundaries at a terminal's width (a pipe has none)
    table = Table(title_justify="left")
    for column in ("arm", "seed", "state", "episode", "attempts", "step", "score", "note"):
        table.add_column(column, overflow="fold")
    for cell in state.cells:
        step = f"{cell.step}/{cell.max_steps}" if cell.step is not None else "-"
        table.add_row(
            escape(cell.arm),
            str(cell.seed),
            f"[{CELL_STYLES[cell.state]}]{cell.state}[/]",
            f"{cell.episode:03d}" if cell.episode is not None else "-",
            str(cell.attempts) if cell.attempts else "-",  # 0: not run by the campaign's latest run
            step,
            f"{cell.score:g}" if cell.score is not None else "-",
            escape(shown_text(cell.note, MAX_MESSAGE_CHARS)) if cell.note else "",
        )
    env.console.print(table if fits(env.console, table) else _campaign_grid(state))


def _campaign_grid(state: CampaignState) -> Group:
    """For a terminal too narrow for a row per cell: arms as rows, seeds as columns, a cell in a word or two; then
    each cell's note on a line of its own, wrapped on word boundaries."""
    seeds = sorted({cell.seed for cell in state.cells})
    grid = Table(box=None, padding=(0, 1))
    grid.add_column("arm", no_wrap=True)
    for seed in seeds:
        grid.add_column(f"s{seed}", no_wrap=True)
    arms = list(dict.fromkeys(cell.arm for cell in state.cells))
    by_cell = {(cell.arm, cell.seed): cell for cell in state.cells}
    for arm in arms:
        shown = []
        for seed in seeds:
            cell = by_cell.get((arm, seed))
            if cell is None:
                shown.append("")
                continue
            detail = f"{cell.step}/{cell.max_steps}" if cell.state == "running" else ""
            detail = f"{cell.score:g}" if cell.state == "done" and cell.score is not None else detail
            shown.append(f"[{CELL_STYLES[cell.state]}]{cell.state}[/] {detail}".rstrip())
        grid.add_row(escape(arm), *shown)
    notes = [
        f"{escape(cell.arm)} s{cell.seed}: {escape(shown_text(cell.note, MAX_MESSAGE_CHARS))}"
        for cell in state.cells
        if cell.note
    ]
    return Group(grid, *notes)


def campaign_arms(campaigns: list[Path], env: Environment) -> list[str]:
    """The arms the campaign files name (baseline first), those that have run (status and stop look at runs)."""
    from mcu_arms.arms.campaign import load_campaign
    from mcu_arms.layout import known_arms

    ran = set(known_arms(env.output_dir))
    names: list[str] = []
    for path in campaigns:
        campaign = load_campaign(path if path.is_absolute() else env.cwd / path, env.arms_dir)
        names += [name for name in campaign.arm_names() if name in ran and name not in names]
    return names


def register(app: typer.Typer) -> None:
    @app.command(
        short_help="Each arm's latest episode, or a campaign's arm × seed grid: state, progress, processes.",
        help="Each arm in output/: its latest episode's state, progress and recorded processes (alive or not), and "
        "every other live process of the arm, whichever episode started it. With --campaign: each arm × seed of the "
        "campaign (done, running, queued, failed; attempts), k of n done and an ETA from the pace so far. "
        "A started run whose mcu-arms supervisor is gone shows as 'stale (supervisor gone)'. "
        "Exit codes: 0 shown, 2 a user error (unknown arm).",
    )
    @reports_user_errors
    def status(
        ctx: typer.Context,
        arm: list[str] = typer.Option([], "--arm", help="Only these arms. Repeatable."),
        campaign: list[Path] = typer.Option(
            [], "--campaign", help="This campaign: each arm × seed of it, from its own episodes only. Repeatable."
        ),
        json_output: bool = typer.Option(False, "--json", help="Print as JSON."),
    ) -> None:
        from mcu_arms.layout import known_arms
        from mcu_arms.report.status import arm_states, campaign_state

        env = environment(ctx)
        loaded = _campaigns(campaign, env)
        campaigns = [campaign_state(env, each) for each in loaded]
        states = arm_states(env, arm) if arm or not campaign else []
        ran = set(known_arms(env.output_dir))
        of_campaigns = [
            state
            for each in loaded
            for state in arm_states(env, [name for name in each.arm_names() if name in ran], campaign=each.name)
        ]
        if json_output:
            print_json(
                env,
                {
                    "arms": [state.model_dump(mode="json") for state in states + of_campaigns],
                    "campaigns": [state.model_dump(mode="json") for state in campaigns],
                },
            )
            return
        for state in campaigns:
            _render_campaign(state, env)
        # A campaign's Slurm episodes also as episodes: their job's name, state, pending reason and log files.
        shown = states + [state for state in of_campaigns if state.slurm_job is not None]
        if shown:
            _render(shown, env)
        elif not campaigns:
            env.console.print(f"no arm has run yet in {env.output_dir}")

    @app.command(
        help=STOP_HELP, short_help="Stop a running arm: only processes mcu-arms started; its report marked interrupted."
    )
    @reports_user_errors
    def stop(
        ctx: typer.Context,
        arm: list[str] = typer.Option([], "--arm", help="The arm to stop. Repeatable."),
        campaign: list[Path] = typer.Option([], "--campaign", help="Every arm of this campaign file. Repeatable."),
        grace: float = typer.Option(10.0, "--grace", min=0.0, help="Seconds between SIGTERM and SIGKILL."),
        json_output: bool = typer.Option(False, "--json", help="Print as JSON."),
    ) -> None:
        from mcu_arms.supervise.stop import stop_arms

        env = environment(ctx)
        results = stop_arms(env, arm + campaign_arms(campaign, env), grace)
        if json_output:
            print_json(env, {"arms": [result.model_dump(mode="json") for result in results]})
        else:
            for result in results:
                env.console.print(f"[bold]{escape(result.arm)}[/]: {escape(result.action)}: {escape(result.message)}")
                if result.survivors:
                    env.console.print(f"[bold red]  survived SIGKILL:[/] {result.survivors}")
        if any(result.survivors for result in results):
            raise typer.Exit(1)
