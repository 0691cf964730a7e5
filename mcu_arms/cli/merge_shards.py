"""`mcu-arms merge-shards SHARD... [--output FILE]`: the shards of one AgentBeats assessment as one results file.

Exit 0: completed (every shard of every category there); 1: partial or failed; 2: bad input, or shards whose
provenance or participants differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mcu_arms.cli.common import environment, reports_user_errors
from mcu_arms.contracts.errors import UserError

HELP = """\
Merge the shards of one sharded AgentBeats assessment into one results file, as the leaderboard's summary does.

Each SHARD is a directory holding results.json (and provenance.json), as the leaderboard template's workflow leaves \
a shard, or one JSON file: a results file, or the result `mcu-arms evaluate` saved of a request with shard_index, \
num_shards (and num_instances) in its config. A directory without results.json is a shard that failed. Shards whose \
provenance (timestamp aside) or participants differ are refused. Each category's task metrics are put together in \
the order the green partitioned them and totalled as the green totals one request: the merge equals the one-shard \
result. Results of different requests (another seed or category) are merged each on its own.

Prints {status, participants, results} (status completed, partial or failed), or writes it to --output FILE \
(never over an existing file). Exit code: 0 completed; 1 partial or failed; 2 user error.
"""


def register(app: typer.Typer) -> None:
    @app.command("merge-shards", help=HELP)
    @reports_user_errors
    def merge_shards_command(
        ctx: typer.Context,
        shards: Annotated[
            list[Path],
            typer.Argument(help="Shard directories or results files.", show_default=False, metavar="SHARD"),
        ],
        output: Annotated[
            Path | None, typer.Option("--output", help="Write the merged results here (must not exist yet).")
        ] = None,
        agentbeats_id: Annotated[
            str | None,
            typer.Option("--agentbeats-id", help="agent=ID: the participant's id, where the shards name none."),
        ] = None,
    ) -> None:
        from mcu_arms.atomic import write_text_atomic
        from mcu_arms.report.agentbeats import AGENT_ROLE, merge_shards, merged_json, parse_ids, read_shard

        env = environment(ctx)
        ids = parse_ids([agentbeats_id]) if agentbeats_id is not None else {}
        if set(ids) - {AGENT_ROLE}:
            raise UserError("names the participant only", key="--agentbeats-id", allowed="agent=ID")
        if output is not None:
            output = output if output.is_absolute() else env.cwd / output
            if output.exists() or output.is_symlink():
                raise UserError("exists already; a merged result is never written over", path=output, key="--output")
        merged = merge_shards([read_shard(path if path.is_absolute() else env.cwd / path) for path in shards])
        if ids and not merged.participants:
            merged = merged.model_copy(update={"participants": {AGENT_ROLE: ids[AGENT_ROLE]}})
        if output is None:
            env.console.out(merged_json(merged), highlight=False, end="")
        else:
            try:
                write_text_atomic(output, merged_json(merged))
            except OSError as error:
                raise UserError(f"cannot write: {error.strerror or error}", path=output, key="--output") from None
            env.err_console.print(f"merge-shards: {merged.status}, written to {output}", highlight=False)
        raise typer.Exit(0 if merged.status == "completed" else 1)
