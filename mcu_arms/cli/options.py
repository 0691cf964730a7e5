"""Options several commands share, declared once: the arm-file overrides `plan` and `run` both take, and where
their episodes run (`--executor`, `--slurm-*`).

Each override mirrors a flag of the old run-arm.sh and can also come from the environment (MCU_ARMS_STEPS=100 is
--steps 100), so a campaign script can set them once; so can the placement flags (MCU_ARMS_SLURM_PARTITION=gpu).
"""

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from mcu_arms.arms.spec import allowed_for
from mcu_arms.cli.common import ran_arm_names
from mcu_arms.contracts.errors import UserError, user_error
from mcu_arms.contracts.settings import OVERRIDDEN_KEYS, Overrides, flag_for
from mcu_arms.contracts.slurm import EXECUTORS, TIME_ALLOWED, Placement, SlurmSettings

ENV_PREFIX = "MCU_ARMS_"
F = TypeVar("F", bound=Callable[..., Any])

_HELP: dict[str, tuple[type, str]] = {
    "task": (str, "Override the task category."),
    "seeds": (str, "Run these seeds, one episode each: 0-4, or 0,2,5, or 1-3,7."),
    "steps": (int, "Override max steps."),
    "step_timeout": (float, "Override seconds per step."),
    "session_turns": (int, "Override session turns."),
    "compact": (bool, "Override compaction."),
    "green_port": (int, "Override the green port (one arm)."),
    "purple_port": (int, "Override the purple port (one arm)."),
}


def _option(field: str) -> inspect.Parameter:
    kind, help_text = _HELP[field]
    flag = flag_for(field)
    declarations = (f"{flag}/--no-{flag[2:]}",) if kind is bool else (flag,)
    option = typer.Option(*declarations, help=help_text, envvar=f"{ENV_PREFIX}{field.upper()}", show_envvar=True)
    return inspect.Parameter(
        field, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, option]
    )


def parse_seeds(text: str) -> list[int]:
    """`0-4` / `0,2,5` / `1-3,7` as a list of seeds, in order; a bad spelling names the flag."""
    seeds: list[int] = []
    for part in (piece.strip() for piece in text.split(",")):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            raise UserError(f"{text!r} is not a list of seeds", key="--seeds", allowed="0-4, 0,2,5 or 1-3,7")
        seeds += list(range(int(low), int(high) + 1)) if dash else [int(low)]
    return seeds


def overrides_from(values: dict[str, Any]) -> Overrides:
    """The Overrides the flags give; a bad value names its flag and what the arm-file key allows."""
    if values.get("seeds") is not None:
        values = {**values, "seeds": parse_seeds(values["seeds"])}
    try:
        return Overrides(**values)
    except ValidationError as error:
        problem = user_error(error, key_of=flag_for)
        field = next(name for name in OVERRIDDEN_KEYS if flag_for(name) == problem.key)
        raise UserError(problem.message, key=problem.key, allowed=allowed_for(OVERRIDDEN_KEYS[field])) from None


def with_overrides(command: F) -> F:
    """Give a command the override flags; it receives them as one `overrides: Overrides` keyword argument."""
    signature = inspect.signature(command, eval_str=True)
    kept = [parameter for name, parameter in signature.parameters.items() if name != "overrides"]
    added = [_option(field) for field in OVERRIDDEN_KEYS]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {field: kwargs.pop(field) for field in OVERRIDDEN_KEYS}
        return command(*args, overrides=overrides_from(given), **kwargs)

    wrapper.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {parameter.name: parameter.annotation for parameter in kept + added}
    return wrapper  # type: ignore[return-value]


# --slurm-NAME -> (type, help): the SlurmSettings field NAME (dashes for underscores).
_SLURM_HELP: dict[str, tuple[type, str]] = {
    "partition": (str, "Slurm partition [the arm's or campaign's [slurm] partition, else the site's default]."),
    "account": (str, "Slurm account to charge."),
    "time": (str, f"Each episode's job time limit, {TIME_ALLOWED}."),
    "mem": (str, "Memory per episode, as sbatch --mem takes it (8G)."),
    "gres": (str, "GRES per episode, as sbatch --gres takes it (mcslot:1, gpu:1)."),
    "cpus": (int, "CPUs per episode (sbatch --cpus-per-task)."),
    "qos": (str, "Slurm QOS (sbatch --qos)."),
    "constraint": (str, "Node features the jobs need (sbatch --constraint: avx2, avx2&ib)."),
    "exclude": (str, "Nodes the jobs must not use (sbatch --exclude: node[01-03],gpu7)."),
    "array_throttle": (int, "At most this many episodes of one job array at once."),
    "log_dir": (str, "Put each job's stdout and stderr here instead of in its episode directory."),
    "sbatch": (list[str], "An extra sbatch option, --name=value or --flag. Repeatable."),
}


def _placement_options() -> list[inspect.Parameter]:
    executor = typer.Option(
        "--executor",
        help=f"Where episodes run: {' or '.join(EXECUTORS)} (a job per episode).",
        envvar=f"{ENV_PREFIX}EXECUTOR",
        show_envvar=True,
    )
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("executor", keyword, default="local", annotation=Annotated[str, executor])]
    for field, (kind, help_text) in _SLURM_HELP.items():
        flag = f"--slurm-{field.replace('_', '-')}"
        option = typer.Option(flag, help=help_text, envvar=f"{ENV_PREFIX}SLURM_{field.upper()}", show_envvar=True)
        repeatable = kind is list[str]
        annotation = Annotated[kind if repeatable else kind | None, option]  # type: ignore[valid-type]
        default: Any = [] if repeatable else None
        parameters.append(
            inspect.Parameter(f"slurm_{field}", inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    return parameters


def placement_from(executor: str, slurm: dict[str, Any]) -> Placement:
    """The Placement the flags give; a bad value names its flag."""
    if executor not in EXECUTORS:
        raise UserError(f"{executor!r} is not an executor", key="--executor", allowed=", ".join(EXECUTORS))
    try:
        overrides = SlurmSettings(**{key: value for key, value in slurm.items() if value is not None})
    except ValidationError as error:
        raise user_error(error, key_of=lambda key: f"--slurm-{key.replace('_', '-')}") from None
    if executor == "local" and overrides.given():
        flags = ", ".join(f"--slurm-{key.replace('_', '-')}" for key in overrides.given())
        raise UserError(f"{flags} apply to Slurm runs only", key="--executor", allowed="slurm, with --slurm-* flags")
    return Placement(executor=executor, slurm=overrides)


def with_placement(command: F) -> F:
    """Give a command --executor and the --slurm-* flags; it receives them as one `placement: Placement` keyword
    argument."""
    signature = inspect.signature(command, eval_str=True)
    kept = [parameter for name, parameter in signature.parameters.items() if name != "placement"]
    added = _placement_options()

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        executor = kwargs.pop("executor")
        slurm = {field: kwargs.pop(f"slurm_{field}") for field in _SLURM_HELP}
        return command(*args, placement=placement_from(executor, slurm), **kwargs)

    wrapper.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {parameter.name: parameter.annotation for parameter in kept + added}
    return wrapper  # type: ignore[return-value]


# Which runs the results browser shows (`view`, `report --html`): the same choice as `compare` makes.
ArmsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        help="Arm files, names or output dirs (default: every arm that has run).",
        show_default=False,
        autocompletion=ran_arm_names,
    ),
]
RunOption = Annotated[
    int | None, typer.Option("--run", help="Show episode N of each arm (default: its latest finished per seed).")
]
ExperimentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--experiment", help="Use the experiment whose fingerprint starts with PREFIX. Repeatable (one per arm)."
    ),
]
BaselineOption = Annotated[str | None, typer.Option("--baseline", help="Arm the deltas are against (default: first).")]
TagFilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        help="Only episodes run with this tag (`run --tag KEY=VALUE`); the others are listed as excluded. Repeatable: "
        "all must match.",
    ),
]
