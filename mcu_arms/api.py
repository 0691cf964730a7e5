"""The public names a plug-in uses: an agent (a Policy served by mcu-arms' purple server, registered under the entry
point group `mcu_arms.agents` by its AgentDescriptor, or a bare factory) or a simulator (a SimulatorDescriptor under
`mcu_arms.simulators`).

Import from here only: these names stay; the modules they live in may move. docs/how-to/own-agent.md shows an agent
written against them; tests/toysim holds a simulator and an agent that import nothing else of mcu-arms.
"""

from __future__ import annotations

from mcu_arms.contracts.agents import AgentDescriptor
from mcu_arms.contracts.preflight import HostCheck
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.simulators import GB, BackendRequest, SimulatorCost, SimulatorDescriptor
from mcu_arms.contracts.support import TaskSupport
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.contracts.wire import AckPayload, ActionPayload, AgentFailure, InitPayload, ObservationPayload
from mcu_arms.green.sims.base import SimStep, Simulator
from mcu_arms.purple.base import Policy, failure_noop
from mcu_arms.purple.baselines import env_action

__all__ = [
    "GB",
    "AckPayload",
    "ActionPayload",
    "AgentDescriptor",
    "AgentFailure",
    "BackendRequest",
    "HostCheck",
    "InitPayload",
    "ObservationPayload",
    "Policy",
    "PurpleOptions",
    "SimStep",
    "Simulator",
    "SimulatorCost",
    "SimulatorDescriptor",
    "TaskSpec",
    "TaskSupport",
    "env_action",
    "failure_noop",
]
