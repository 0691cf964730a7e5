"""`mcu-arms report --html DIR`: the results browser's pages as a static bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mcu_arms.cli.common import environment, print_json, reports_user_errors
from mcu_arms.cli.options import ArmsArgument, BaselineOption, ExperimentOption, RunOption, TagFilterOption
from mcu_arms.contracts.annotations import parse_tags
from mcu_arms.contracts.text import neutralised

HELP = """\
Write the results browser's pages into DIR as a static bundle.

The pages are those `mcu-arms view` serves (the comparison of ARMS and an episode page per task of each arm's run, \
frames included) into DIR as plain files with relative links only: open DIR/index.html from disk, zip it, mail \
it or put it on any web server. Nothing in it is fetched from the network. DIR must be new or empty: a bundle \
never overwrites. ARMS are chosen as `compare` chooses them (default: every arm that has run; --tag KEY=VALUE \
as for `compare`). Needs the optional \
extra 'view' (jinja2, plotly).
"""


def register(app: typer.Typer) -> None:
    @app.command(help=HELP)
    @reports_user_errors
    def report(
        ctx: typer.Context,
        html: Annotated[Path, typer.Option("--html", help="Directory to write the pages into (new or empty).")],
        arms: ArmsArgument = None,
        baseline: BaselineOption = None,
        run: RunOption = None,
        experiment: ExperimentOption = None,
        tag: TagFilterOption = None,
        json_output: Annotated[bool, typer.Option("--json", help="Print what was written as JSON.")] = False,
    ) -> None:
        env = environment(ctx)
        tags = parse_tags(tag or [])
        from mcu_arms.view.extra import require_view_extra

        require_view_extra()
        from mcu_arms.view.site import Site, chosen_arms, experiments_shown, write_bundle

        experiment = experiments_shown(arms or [], experiment, run, env)
        site = Site.build(
            chosen_arms(arms or [], env), env, baseline=baseline, episode=run, experiments=experiment, tags=tags
        )
        summary = write_bundle(site, html if html.is_absolute() else env.cwd / html)
        if json_output:
            print_json(env, summary)
            return
        env.console.print(
            f"wrote {summary.files} files ({summary.bytes / 1e6:.1f} MB; {summary.episodes} episode page(s), "
            f"{summary.frames} frames): open {summary.index}",
            highlight=False,
            soft_wrap=True,
        )
        for reason in summary.excluded:
            env.console.print(f"excluded: {escape(neutralised(reason))}", highlight=False, soft_wrap=True)
