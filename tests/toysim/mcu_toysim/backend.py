"""The toy simulator's backend: the green imports it only when an episode on it runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from mcu_arms.api import BackendRequest, SimStep, Simulator, TaskSpec, TaskSupport
from mcu_toysim import COUNTED_EVENT, NAME, TOYWORLD, ToyWorldTable

FRAME_SIDE = 64


class ToySimulator(Simulator):
    name = NAME

    @classmethod
    def open(cls, request: BackendRequest) -> ToySimulator:
        return cls(request.table if isinstance(request.table, ToyWorldTable) else ToyWorldTable())

    def __init__(self, table: ToyWorldTable) -> None:
        self._table = table
        self._counters: dict[str, dict[str, int]] = {}
        self._objects: list[str] = []
        self._attacks = 0
        self._colour = np.zeros(3, dtype=np.uint8)

    def version(self) -> str:
        return "0.1"

    def label(self) -> str:
        return f"{TOYWORLD.label} {self.version()}, {self._table.attacks_per_pickup} attacks a pickup"

    def supports(self, task: TaskSpec) -> TaskSupport:
        return TOYWORLD.supports(task)

    def reset_mode(self) -> str:
        return "hard"

    def reset(self, task: TaskSpec, seed: int) -> SimStep:
        entries = (*task.reward_cfg, *task.milestones)
        self._objects = [entry.objects[0] for entry in entries if entry.event == COUNTED_EVENT]
        self._counters = {}
        self._attacks = 0
        self._colour = np.random.default_rng(seed).integers(0, 256, size=3, dtype=np.uint8)
        return SimStep(frame=self._frame(), counters={})

    def step(self, action: Any) -> SimStep:
        if action.get("attack"):
            self._attacks += 1
        if action.get("attack") and self._attacks % self._table.attacks_per_pickup == 0:
            picked = self._counters.setdefault(COUNTED_EVENT, {})
            for obj in self._objects:
                picked[obj] = picked.get(obj, 0) + 1
        return SimStep(frame=self._frame(), counters={event: dict(o) for event, o in self._counters.items()})

    def world_seed(self, seed: int) -> tuple[int | None, str]:
        return seed, ""

    def fallback_counts(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        self._objects = []

    def _frame(self) -> np.ndarray:
        return np.broadcast_to(self._colour, (FRAME_SIDE, FRAME_SIDE, 3)).copy()
