"""`mcu-arms evaluate SCENARIO.toml [OUT.json]`: ask a running green agent for one evaluation and keep the result.

Exit 0: the evaluation completed (and the result was saved when OUT is given); 1: it failed, was rejected, or the
green could not be reached, with the reason on stderr; 2: bad input (scenario file, existing OUT).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.client.evaluate import DEFAULT_CARD_DEADLINE_S, evaluate
from mcu_arms.contracts.text import MAX_LOG_LINE_CHARS, shown_text
from mcu_arms.process.process_exit import skip_teardown

EXIT_EVALUATION_FAILED = 1


@reports_user_errors
def evaluate_command(
    ctx: typer.Context,
    scenario: Annotated[
        Path, typer.Argument(help="AgentBeats scenario TOML: green_agent, participants and config tables.")
    ],
    out: Annotated[
        Path | None, typer.Argument(help="Where to write the green's JSON result (must not exist yet).")
    ] = None,
    card_timeout: Annotated[
        float, typer.Option("--card-timeout", min=0.0, help="Seconds to wait for the green agent's card.")
    ] = DEFAULT_CARD_DEADLINE_S,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=1.0, help="Overall limit in seconds (default: none).")
    ] = None,
    events: Annotated[
        Path | None,
        typer.Option("--events", help="Append the green's typed progress events to this file, one JSON line each."),
    ] = None,
) -> None:
    """Run one evaluation on a green agent, streaming its status lines, and save its JSON result."""
    skip_teardown()
    env = environment(ctx)
    outcome = evaluate(scenario, out, env, card_deadline_s=card_timeout, overall_timeout_s=timeout, events_path=events)
    if outcome.summary:
        env.console.out(shown_text(outcome.summary, MAX_LOG_LINE_CHARS, one_line=False), highlight=False)
    if outcome.out_path is not None:
        env.console.out(f"result written to {outcome.out_path}", highlight=False)
    if not outcome.completed:
        reason = shown_text(outcome.reason or "no reason given", MAX_LOG_LINE_CHARS, one_line=False)
        env.err_console.out(f"evaluation {outcome.state}: {reason}", highlight=False)
        raise typer.Exit(EXIT_EVALUATION_FAILED)


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate_command)
