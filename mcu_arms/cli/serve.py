"""`mcu-arms serve green|purple`: run one A2A server in the foreground (the `run` supervisor starts these).

Thin: options are parsed and validated here, the servers live in mcu_arms.green.server and mcu_arms.purple.server,
imported only when a server actually starts. A server started by `run` requires its arm's per-run token (given in
its environment); one started by hand has none and is open, on loopback only unless --expose, and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from mcu_arms.cli.common import App, reports_user_errors
from mcu_arms.contracts.access import SERVE_TOKEN_ENV
from mcu_arms.contracts.catalog import AGENT_KINDS
from mcu_arms.contracts.errors import UserError, did_you_mean, user_error
from mcu_arms.contracts.planned import (
    DEFAULT_PLANNER_TIMEOUT_S,
    DEFAULT_POLICY_BACKEND,
    DEFAULT_POLICY_TIMEOUT_S,
    POLICY_BACKENDS,
)
from mcu_arms.contracts.settings import OPTIONS_FROM_ENVIRONMENT, PurpleOptions, flag_for
from mcu_arms.contracts.wire import DEFAULT_STEP_TIMEOUT_S
from mcu_arms.process_exit import skip_teardown

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
def serve_green(
    ctx: typer.Context,
    host: HostOption = "127.0.0.1",
    port: PortOption = 9009,
    card_url: CardUrlOption = None,
    expose: ExposeOption = False,
    output_root: Annotated[
        Path | None,
        typer.Option("--output-root", help="Every request's output_dir must lie under this directory [./output]."),
    ] = None,
) -> None:
    """Serve the green agent: runs MCU tasks in a simulator against a purple agent and scores them."""
    from mcu_arms.green.server import serve

    skip_teardown()
    serve(host, port, card_url, output_root=output_root, expose=expose)


@serve_app.command("purple")
@reports_user_errors
def serve_purple(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", help=f"Agent kind: {', '.join(AGENT_KINDS)}.")],
    host: HostOption = "127.0.0.1",
    port: PortOption = 9019,
    card_url: CardUrlOption = None,
    expose: ExposeOption = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for the policy's own randomness [0].")] = None,
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where the policy writes its reports.")
    ] = None,
    step_timeout: Annotated[
        float | None,
        typer.Option("--step-timeout", help=f"Seconds the green waits for each action [{DEFAULT_STEP_TIMEOUT_S:g}]."),
    ] = None,
    session_turns: Annotated[
        int | None, typer.Option("--session-turns", help="Codex agents: turns per session before a new one.")
    ] = None,
    compact_limit: Annotated[
        int | None, typer.Option("--compact-limit", help="Codex agents: auto-compaction token limit.")
    ] = None,
    context_window: Annotated[
        int | None,
        typer.Option(
            "--context-window",
            help="Codex agents: the model's context window in tokens; a limit below it "
            "compacts, one above it never does.",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Codex agents: model name.")] = None,
    provider_base_url: Annotated[
        str | None,
        typer.Option(
            "--provider-base-url",
            envvar=OPTIONS_FROM_ENVIRONMENT["provider_base_url"],
            help="Codex agents: model provider base URL (a URL that carries a credential belongs in the variable, "
            "not on a command line every local user can read).",
        ),
    ] = None,
    provider_wire_api: Annotated[
        str | None, typer.Option("--provider-wire-api", help="Codex agents: provider wire API (e.g. responses).")
    ] = None,
    provider_env_key: Annotated[
        str | None,
        typer.Option(
            "--provider-env-key",
            help="Codex agents: name of the environment variable holding the provider's API key (the key itself is "
            "never passed on a command line).",
        ),
    ] = None,
    cuda_device: Annotated[
        str | None, typer.Option("--cuda-device", help="STEVE-1: CUDA device index to run on.")
    ] = None,
    steve1_condition: Annotated[
        str | None,
        typer.Option("--steve1-condition", help="STEVE-1: the text it is conditioned on [each task's own text]."),
    ] = None,
    planner_base_url: Annotated[
        str | None,
        typer.Option(
            "--planner-base-url",
            envvar=OPTIONS_FROM_ENVIRONMENT["planner_base_url"],
            help="Planned agent: the planner's OpenAI-compatible /v1 URL (one with a credential: in the variable).",
        ),
    ] = None,
    planner_model: Annotated[str | None, typer.Option("--planner-model", help="Planned agent: planner model.")] = None,
    planner_revision: Annotated[
        str | None, typer.Option("--planner-revision", help="Planned agent: planner model revision, as recorded.")
    ] = None,
    planner_env_key: Annotated[
        str | None,
        typer.Option("--planner-env-key", help="Planned agent: name of the variable holding the planner's API key."),
    ] = None,
    planner_timeout: Annotated[
        float | None,
        typer.Option(
            "--planner-timeout", help=f"Planned agent: seconds per planner call [{DEFAULT_PLANNER_TIMEOUT_S:g}]."
        ),
    ] = None,
    planner_thinking: Annotated[
        str | None,
        typer.Option(
            "--planner-thinking",
            metavar="true|false",
            help="Planned agent: chat_template_kwargs.enable_thinking in every planner request (unset: not sent).",
        ),
    ] = None,
    policy_backend: Annotated[
        str | None,
        typer.Option(
            "--policy-backend", help=f"Planned agent: {', '.join(POLICY_BACKENDS)} [{DEFAULT_POLICY_BACKEND}]."
        ),
    ] = None,
    policy_base_url: Annotated[
        str | None,
        typer.Option(
            "--policy-base-url",
            envvar=OPTIONS_FROM_ENVIRONMENT["policy_base_url"],
            help="Planned agent: the decision service root or chat /v1 URL (one with a credential: in the variable).",
        ),
    ] = None,
    policy_model: Annotated[str | None, typer.Option("--policy-model", help="Planned agent: policy model.")] = None,
    policy_revision: Annotated[
        str | None, typer.Option("--policy-revision", help="Planned agent: the policy revision (checked by Kev).")
    ] = None,
    policy_env_key: Annotated[
        str | None,
        typer.Option("--policy-env-key", help="Planned agent: name of the variable holding the policy's API key."),
    ] = None,
    policy_timeout: Annotated[
        float | None,
        typer.Option("--policy-timeout", help=f"Planned agent: seconds per decision [{DEFAULT_POLICY_TIMEOUT_S:g}]."),
    ] = None,
    policy_thinking: Annotated[
        str | None,
        typer.Option(
            "--policy-thinking",
            metavar="true|false",
            help="Planned agent, chat policy: as --planner-thinking, in every decision request.",
        ),
    ] = None,
) -> None:
    """Serve a purple agent: answers the green's init with an ack and each observation with an action."""
    given = {
        "seed": seed,
        "output_dir": output_dir,
        "step_timeout": step_timeout,
        "session_turns": session_turns,
        "compact_limit": compact_limit,
        "context_window": context_window,
        "model": model,
        "provider_base_url": provider_base_url,
        "provider_wire_api": provider_wire_api,
        "provider_env_key": provider_env_key,
        "cuda_device": cuda_device,
        "steve1_condition": steve1_condition,
        "planner_base_url": planner_base_url,
        "planner_model": planner_model,
        "planner_revision": planner_revision,
        "planner_env_key": planner_env_key,
        "planner_timeout": planner_timeout,
        "planner_thinking": planner_thinking,
        "policy_backend": policy_backend,
        "policy_base_url": policy_base_url,
        "policy_model": policy_model,
        "policy_revision": policy_revision,
        "policy_env_key": policy_env_key,
        "policy_timeout": policy_timeout,
        "policy_thinking": policy_thinking,
    }
    try:  # options not given take PurpleOptions' own defaults
        options = PurpleOptions(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as error:
        raise user_error(error, key_of=flag_for) from None
    if agent not in AGENT_KINDS:
        raise UserError(
            f"unknown agent kind '{agent}'{did_you_mean(agent, AGENT_KINDS)}",
            key="--agent",
            allowed=", ".join(AGENT_KINDS),
        )

    from mcu_arms.purple.server import serve_purple as run_purple_server

    skip_teardown()
    run_purple_server(agent, options, host, port, card_url, expose=expose)


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
