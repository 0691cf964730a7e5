"""`mcu-arms serve green|purple`: run one A2A server in the foreground (the `run` supervisor starts these).

Thin: options are parsed and validated here, the servers live in mcu_arms.green.server and mcu_arms.purple.server,
imported only when a server actually starts. A server started by `run` requires its arm's per-run token (given in
its environment); one started by hand has none and is open, on loopback only unless --expose, and says so.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import typer
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from mcu_arms.cli.common import App, reports_user_errors
from mcu_arms.contracts.access import SERVE_TOKEN_ENV
from mcu_arms.contracts.agents import check_agent_kind
from mcu_arms.contracts.catalog import AGENT_KINDS
from mcu_arms.contracts.errors import user_error
from mcu_arms.contracts.settings import OPTIONS_FROM_ENVIRONMENT, PurpleOptions, flag_for
from mcu_arms.process.collector import imports_without_gc
from mcu_arms.process.process_exit import skip_teardown

serve_app = App(help="Run an A2A server (green evaluator or purple agent) in the foreground.", no_args_is_help=True)

HostOption = Annotated[str, typer.Option("--host", help="Address to listen on.")]
PortOption = Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on; a busy port aborts.")]
CardUrlOption = Annotated[
    str | None,
    typer.Option("--card-url", help="URL advertised on the agent card (default: http://HOST:PORT/)."),
]
ExposeOption = Annotated[
    bool,
    typer.Option(
        "--expose",
        help=f"Allow a --host beyond loopback for a server without a token ({SERVE_TOKEN_ENV}): anyone who can reach "
        "it may call it.",
    ),
]


@serve_app.command("green")
@reports_user_errors
def green_command(
    ctx: typer.Context,
    host: HostOption = "127.0.0.1",
    port: PortOption = 9009,
    card_url: CardUrlOption = None,
    expose: ExposeOption = False,
    output_root: Annotated[
        Path | None,
        typer.Option("--output-root", help="Every request's output_dir must lie under this directory [./output]."),
    ] = None,
    warm_up: Annotated[
        str | None,
        typer.Option(
            "--warm-up",
            metavar="SIMULATOR",
            help="Warm this simulator's backend up (imports, first calls) while waiting for the first request; a "
            "request for another simulator is served as ever.",
        ),
    ] = None,
) -> None:
    """Serve the green agent: runs MCU tasks in a simulator against a purple agent and scores them."""
    with imports_without_gc():
        from mcu_arms.green.server import serve

    skip_teardown()
    serve(host, port, card_url, output_root=output_root, expose=expose, warm_up=warm_up)


def _cli_type(annotation: Any) -> type:
    """The type a `serve purple` flag parses: the field's own, a Literal as text (PurpleOptions checks it), and a
    bool as the text true|false (a value, not an on/off flag, as the command lines `plan` writes give it)."""
    kinds = [kind for kind in get_args(annotation) or (annotation,) if kind is not type(None)]
    kind = kinds[0]
    return str if kind is bool or get_origin(kind) is Literal else kind


def _purple_option(field: str, info: FieldInfo) -> inspect.Parameter:
    """A `serve purple` flag from a PurpleOptions field: its name, type and help are the field's (one declaration)."""
    kind = _cli_type(info.annotation)
    option = typer.Option(
        flag_for(field),
        help=info.description,
        envvar=OPTIONS_FROM_ENVIRONMENT.get(field),
        metavar="true|false" if _cli_type(info.annotation) is str and bool in get_args(info.annotation) else None,
    )
    return inspect.Parameter(
        field, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, option]
    )


def _with_purple_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command`'s own parameters, then one flag per PurpleOptions field (gathered into its **options)."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
    generated = [_purple_option(field, info) for field, info in PurpleOptions.model_fields.items()]
    signature = inspect.Signature([*own, *generated])
    command.__signature__ = signature  # type: ignore[attr-defined] # typer reads the parameters from it
    command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return command


@serve_app.command("purple")
@reports_user_errors
@_with_purple_options
def purple_command(
    ctx: typer.Context,
    agent: Annotated[
        str, typer.Option("--agent", help=f"Agent kind: {', '.join(AGENT_KINDS)}, or one registered (mcu_arms.agents).")
    ],
    host: HostOption = "127.0.0.1",
    port: PortOption = 9019,
    card_url: CardUrlOption = None,
    expose: ExposeOption = False,
    **given: Any,
) -> None:
    """Serve a purple agent: answers the green's init with an ack and each observation with an action."""
    try:  # options not given take PurpleOptions' own defaults
        options = PurpleOptions(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as error:
        raise user_error(error, key_of=flag_for) from None
    check_agent_kind(agent, key="--agent")

    with imports_without_gc():
        from mcu_arms.purple.server import serve_purple

    skip_teardown()
    serve_purple(agent, options, host, port, card_url, expose=expose)


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
