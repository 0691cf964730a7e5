"""The state vocabularies every part agrees on, one Literal each (the way supervisor's states.py keeps its own).

Nothing here imports anything: any module may use these names.
"""

from __future__ import annotations

from typing import Literal, get_args

# The processes of an arm. The supervisor itself is recorded in a report under SUPERVISOR_ROLE.
ProcessRole = Literal["green", "purple", "client"]
PROCESS_ROLES: tuple[ProcessRole, ...] = get_args(ProcessRole)
SERVER_ROLES: tuple[ProcessRole, ...] = ("green", "purple")
# Stop order: the green first, else it steps on without its purple and logs every remaining step as a
# transport-error noop.
STOP_ORDER: tuple[ProcessRole, ...] = ("green", "purple", "client")
SUPERVISOR_ROLE = "mcu-arms"

# A run report's status: written `started` (or `queued`, by the host that submits it as a Slurm job), finalised once.
RunStatus = Literal["queued", "started", "finished", "failed", "interrupted"]
# Not final: the episode has yet to start, or runs now.
OPEN_STATUSES: frozenset[str] = frozenset({"queued", "started"})
FINAL_STATUSES: frozenset[str] = frozenset({"finished", "failed", "interrupted"})

# What `run` says of each arm it was given (queued: submitted as a Slurm job by `run --detach`, left to run).
ArmOutcomeStatus = Literal["finished", "failed", "interrupted", "skipped", "queued"]

# An arm's place in its lifecycle, as the live view shows it.
ArmPhase = Literal["planning", "queued", "starting", "ready", "running", "finished", "failed", "interrupted"]

# Why an arm's episode failed: infrastructure (retried by a campaign), the agent under test, mcu-arms itself, a
# stop asked for, or the time limit of the Slurm job it ran as (a rerun runs it again with the same fingerprint).
FailureKind = Literal["infrastructure", "agent", "supervisor", "stopped", "time_limit"]

# Why a step's action was the noop. Infrastructure causes: the agent could not be reached or could not answer
# (response_too_large: its answer passed the cap on answers, and was abandoned unread).
# Behaviour causes: it answered, with something that cannot be applied.
InfrastructureCause = Literal["timeout", "transport_error", "response_too_large", "failed_turn"]
BehaviourCause = Literal["unparseable", "invalid_action"]
NoopCause = Literal["timeout", "transport_error", "response_too_large", "failed_turn", "unparseable", "invalid_action"]
INFRASTRUCTURE_CAUSES: frozenset[str] = frozenset(get_args(InfrastructureCause))

# How the agent answered the init message, when it did not ack it.
InitFailure = Literal["timeout", "transport_error", "response_too_large", "unparseable", "refused"]

# How a task's episode ended.
EndedBy = Literal["max_steps", "simulator_done", "canceled", "error"]

# One codex model turn.
# Inputs a simulator could not carry out (a key with no analogue there): counted by key as "no_effect.<key>", shown
# under one name everywhere (live view, compare), apart from both the noops and the simulator's other fallbacks.
NO_EFFECT_PREFIX = "no_effect."
NO_EFFECT_LABEL = "inputs without effect"

TurnOutcome = Literal["ok", "failed", "timeout", "overflow"]

# What a status line of an arm's latest episode says (the report's status, or why there is none to read).
ArmStatusText = Literal[
    "queued",
    "started",
    "finished",
    "failed",
    "failed (time limit)",
    "interrupted",
    "interrupted (cancelled)",
    "stale (supervisor gone)",
    "stale (job ended)",
    "no report",
    "unreadable report",
]
