"""`mcu-arms view`: the results browser, served on loopback until Ctrl-C."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.cli.options import ArmsArgument, BaselineOption, ExperimentOption, RunOption, TagFilterOption
from mcu_arms.contracts.annotations import parse_tags

HELP = """\
Browse results: the comparison of ARMS (settings that differ, the verdict, results, milestones) and, per task of \
each arm's run, an episode page with per-step timelines, the frame player, the step's reply and the agent's turn \
at that step.

With no arm named it opens on an index of every run in output/ (each arm's experiments and each campaign, \
latest first, with n, status and score; each row links to its comparison) over a comparison of each arm's latest \
experiment. ARMS are chosen as \
`compare` chooses them (--tag KEY=VALUE, repeatable, keeps the episodes run with those tags). \
The server listens on 127.0.0.1 on a free port (--port to choose one; a busy port \
is an error) and prints its URL; it reads the output files as they grow, so a running arm can be watched: an arm \
whose latest episode runs shows it first, marked running with its step, and its pages reload every few seconds \
until it ends. --host serves on another interface, and then every request needs the \
token in $MCU_ARMS_VIEW_TOKEN (open the URL with ?token=...). `mcu-arms report --html DIR` writes the same pages \
as files. Needs the optional extra 'view' (jinja2, plotly).
"""


class Stopped(BaseException):
    """SIGINT or SIGTERM while serving."""


def _stop(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def register(app: typer.Typer) -> None:
    @app.command(help=HELP, short_help="Browse results in a web browser: the comparison and a page per episode.")
    @reports_user_errors
    def view(
        ctx: typer.Context,
        arms: ArmsArgument = None,
        baseline: BaselineOption = None,
        run: RunOption = None,
        experiment: ExperimentOption = None,
        tag: TagFilterOption = None,
        port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: a free one).")] = 0,
        host: Annotated[
            str,
            typer.Option("--host", help="Interface to listen on; anything but loopback needs $MCU_ARMS_VIEW_TOKEN."),
        ] = "127.0.0.1",
    ) -> None:
        env = environment(ctx)
        from mcu_arms.view.extra import require_view_extra

        require_view_extra()
        from mcu_arms.view.server import TOKEN_ENV, SiteHolder, open_server, url_of, view_token
        from mcu_arms.view.site import RUNS, Site, chosen_arms, experiments_shown

        tags = parse_tags(tag or [])
        token = view_token(host, env.variables)
        items = chosen_arms(arms or [], env)
        everything = not arms and not experiment and run is None
        experiment = experiments_shown(arms or [], experiment, run, env)

        def named() -> Site:
            return Site.build(items, env, baseline=baseline, episode=run, experiments=experiment, tags=tags, live=True)

        # a row of the index opens what its command shows
        holder = SiteHolder(named, build_row=lambda row: Site.of_row(row, env))
        site = holder.current(rebuild=True)  # a bad arm name fails here, before anything listens
        server = open_server(holder, host, port, token)
        url = url_of(server, host) + (RUNS if everything else "")
        env.console.print(
            f"mcu-arms view: {len(site.comparison.arms)} arm(s), {len(site.sources)} episode page(s) at {url}"
            + (f"?token=<the value of ${TOKEN_ENV}>" if token else "")
            + " (Ctrl-C stops)",
            highlight=False,
            soft_wrap=True,
        )
        # Ctrl-C and `kill PID` are how a viewer is meant to end: a clean stop and exit 0, not an interruption
        previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            server.serve_forever()
        except Stopped as stopped:
            env.console.print(f"mcu-arms view: stopped ({stopped})", highlight=False)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            server.server_close()
