"""The mineflayer backend: MCU tasks on a Minecraft server the user brings, through a Mineflayer bot.

Real time, one bot, no frames. The agent reads structured state (green/sims/mineflayer/state.py) and acts either
with skills (one request runs to its end: collect, craft, go to, ...), or with env keys held for one game tick (what
agents that send no skills, the baselines, use). The server is pinged when the backend is made: one that does not
answer, or runs another version than the arm names, stops the evaluation before any task. The sidecar is started at
the first reset and restarted (recorded) at a later reset when it or its connection was lost.

Scoring counts come from the sidecar (contracts/mineflayer.py says which), from the last reset on, each with the
game tick it happened on: a skill spans many ticks, and the scorer pays per tick as MCU does (sims/base.py SimStep).
The world's seed is asked of the server once per connection (`/seed`, as an operator would).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import groupby
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from mcu_arms.contracts.evaluation import SimulatorRestart
from mcu_arms.contracts.mineflayer import (
    FUELS,
    PLACEABLE,
    REFUSAL_MARKERS,
    RESET_COMMANDS,
    RESET_MODE,
    RULEBOOK_CRAFTS,
    RULEBOOK_SOURCES,
    SIDECAR_PACKAGES,
    SMELTING,
    MineflayerServer,
)
from mcu_arms.contracts.preflight import HostCheck, failures
from mcu_arms.contracts.skills import SKILL_KINDS, GameEvent, SkillOutcome, SkillRequest
from mcu_arms.contracts.support import TaskSupport, mineflayer_support
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.green.sims.base import SimStep, Simulator, SimulatorUnavailable
from mcu_arms.green.sims.mineflayer.ping import ServerStatus, server_status
from mcu_arms.green.sims.mineflayer.runtime import ensure_runtime, runtime_checks
from mcu_arms.green.sims.mineflayer.sidecar import Sidecar, SidecarFailed
from mcu_arms.green.sims.mineflayer.state import capabilities_from, game_state, whole_counts
from mcu_arms.process.procs import log_line

if TYPE_CHECKING:
    from mcu_arms.contracts.game_state import Capabilities, GameState
    from mcu_arms.contracts.simulators import BackendRequest
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import EnvAction

CONNECT_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
ACT_MARGIN_S = 15.0  # beyond the act's own time limit, for its wind-down and the answer
RESET_WAIT_MS = 400  # per command: the server's reply arrives within it
TICK_MS = 50  # an env action holds its keys for one game tick
HELD_KEYS = ("forward", "back", "left", "right", "jump", "sneak", "sprint")
NO_EFFECT_KEYS = ("attack", "use", "drop", "inventory")  # need a skill here (dig, place, eat, craft)

AGENT_INSTRUCTIONS = f"""This simulator is a Minecraft server reached through Mineflayer: real time, no frames.
Besides env actions (held for one game tick: forward, back, left, right, jump, sneak, sprint, camera, hotbar.N;
{", ".join(NO_EFFECT_KEYS)} have no effect here), it takes skills, each run to its end:
{{"type": "action", "action_type": "skill", "skill": {{"kind": KIND, "args": {{...}}}}}} with KIND one of
{", ".join(SKILL_KINDS)}. Arguments: move {{direction, duration_ms}}; go_to {{x, y, z, range}} or {{block}} or
{{entity}}; collect {{block, count}}; dig {{x, y, z}} or {{block}}; craft {{item, count}}; smelt {{item, count}};
place {{item}}; equip {{item, destination}} (hand, off-hand, head, torso, legs, feet); eat {{item}}; attack
{{entity}}; retreat {{from, distance}}; wait {{duration_ms}}; deposit {{item, count}} and withdraw {{item, count}}
(the nearest chest). The next observation's "last_skill" says what came of it, "events" what you felt meanwhile; a
skill is stopped when you take damage (not attack, retreat or eat), and a shield in the off-hand is raised."""


def check_server(server: MineflayerServer) -> ServerStatus:
    """The server's status; SimulatorUnavailable when nothing answers there or it runs another version."""
    try:
        status = server_status(server.host, server.port)
    except (OSError, ValueError) as error:
        raise SimulatorUnavailable(
            f"no Minecraft server answers at {server.address} ({type(error).__name__}: {error}); start yours there "
            f"(Java Edition {server.version}, online-mode=false, {server.username} op'd) or set [mineflayer] host/port"
        ) from None
    if not status.runs(server.version):
        raise SimulatorUnavailable(
            f"the server at {server.address} runs {status.version_name!r} (protocol {status.protocol}), not "
            f"{server.version}: set [mineflayer] version = the server's, or run a {server.version} server"
        )
    return status


def server_check(server: MineflayerServer) -> HostCheck:
    name = f"Minecraft server {server.address}"
    try:
        status = check_server(server)
    except SimulatorUnavailable as error:
        return HostCheck(name=name, status="fail", detail=str(error))
    players = f", {status.players_online} player(s) online" if status.players_online is not None else ""
    detail = f"answers: {status.version_name} (protocol {status.protocol}){players}"
    return HostCheck(name=name, status="ok", detail=detail)


def host_checks(env: Mapping[str, str], server: MineflayerServer) -> list[HostCheck]:
    """What the backend needs from this host and its server, as `doctor` shows it and a run requires it."""
    return [*runtime_checks(env), server_check(server)]


def preflight(env: Mapping[str, str], arms: Mapping[str, BaseModel | None]) -> list[tuple[HostCheck, list[str]]]:
    """The sidecar's runtime (node, the npm libraries: what is there, what the first run installs) for every arm,
    and per server named, whether it answers and runs the version the arms name."""
    rows: list[tuple[HostCheck, list[str]]] = [(check, list(arms)) for check in runtime_checks(env)]
    servers: dict[tuple[str, int, str], tuple[MineflayerServer, list[str]]] = {}
    for arm, table in arms.items():
        server = table if isinstance(table, MineflayerServer) else MineflayerServer()
        servers.setdefault((server.host, server.port, server.version), (server, []))[1].append(arm)
    rows += [(server_check(server), names) for server, names in servers.values()]
    return rows


def counter_ticks(
    before: dict[str, dict[str, int]], counted: list[dict[str, Any]], after: dict[str, dict[str, int]]
) -> list[dict[str, dict[str, int]]]:
    """The cumulative counters after each tick on which the sidecar counted something, from `before` on; the last
    is `after` (a count the tick list missed still lands there, never lost)."""
    running = {event: dict(objects) for event, objects in before.items()}
    snapshots: list[dict[str, dict[str, int]]] = []
    for _, group in groupby(sorted(counted, key=lambda entry: entry["tick"]), key=lambda entry: entry["tick"]):
        for entry in group:
            per_event = running.setdefault(entry["event"], {})
            per_event[entry["object"]] = per_event.get(entry["object"], 0) + int(entry["n"])
        snapshots.append({event: dict(objects) for event, objects in running.items()})
    if snapshots and snapshots[-1] != after:
        snapshots.append({event: dict(objects) for event, objects in after.items()})
    return snapshots


def _refused(replies: list[str]) -> bool:
    return any(marker in reply for reply in replies for marker in REFUSAL_MARKERS)


class MineflayerSimulator(Simulator):
    name = "mineflayer"
    accepts_skills = True

    @classmethod
    def open(cls, request: BackendRequest) -> MineflayerSimulator:
        return cls(request.table if isinstance(request.table, MineflayerServer) else None)

    def __init__(
        self,
        server: MineflayerServer | None = None,
        env: Mapping[str, str] | None = None,
        log: Callable[[str], None] = log_line,
    ) -> None:
        self._server = server or MineflayerServer()
        self._env = dict(env if env is not None else os.environ)
        self._log = log
        problems = failures([check for check in runtime_checks(self._env) if check.failed])
        if problems:
            raise SimulatorUnavailable("the mineflayer sidecar cannot run on this host:\n- " + "\n- ".join(problems))
        self._status = check_server(self._server)
        self._runtime = ensure_runtime(self._env, log)
        self._sidecar: Sidecar | None = None
        self._capabilities: Capabilities | None = None
        self._minecraft_version = self._server.version
        self._lost: str | None = None  # why the connection or the sidecar went away
        self._fallbacks: Counter[str] = Counter()
        self._restarts: list[SimulatorRestart] = []
        self._counters: dict[str, dict[str, int]] = {}
        self._standing: dict[str, Any] = {}
        self._task_name = ""
        self._steps = 0
        self._timeouts_ms: dict[str, int] = {}
        self._ticks: list[dict[str, dict[str, int]]] = []
        self._world_seed: int | None = None
        self._seed_unknown = "not connected yet"

    # --- what it is ------------------------------------------------------------------------------------------------
    def version(self) -> str:
        return self._minecraft_version

    def label(self) -> str:
        return (
            f"mineflayer (Minecraft {self._status.version_name} at {self._server.address}, Mineflayer "
            f"{SIDECAR_PACKAGES['mineflayer']}): MCU on a user-provided server, structured state; the world is the "
            "server's (seed not applied)"
        )

    def supports(self, task: TaskSpec) -> TaskSupport:
        return mineflayer_support(task)

    def reset_mode(self) -> str:
        return RESET_MODE

    def agent_instructions(self) -> str:
        return AGENT_INSTRUCTIONS

    def restarts(self) -> list[SimulatorRestart]:
        return list(self._restarts)

    @property
    def sidecar(self) -> Sidecar | None:
        return self._sidecar

    # --- the sidecar ---------------------------------------------------------------------------------------------
    def _connect(self) -> None:
        sidecar = Sidecar(self._runtime, self._env, self._log)
        try:
            server = self._server
            joined = sidecar.request(
                "connect",
                CONNECT_TIMEOUT_S,
                host=server.host,
                port=server.port,
                version=server.version,
                username=server.username,
                timeout_ms=int(CONNECT_TIMEOUT_S * 1000) - 5000,
            )
            rules = sidecar.request(
                "capabilities",
                REQUEST_TIMEOUT_S,
                crafts=list(RULEBOOK_CRAFTS),
                sources=list(RULEBOOK_SOURCES),
                smelting=SMELTING,
                fuels=list(FUELS),
                placeable=list(PLACEABLE),
            )
        except SidecarFailed:
            sidecar.stop()
            raise
        self._sidecar, self._lost = sidecar, None
        self._read_seed(sidecar)
        self._capabilities = capabilities_from(rules)
        self._timeouts_ms = dict(rules["timeouts_ms"])
        self._minecraft_version = str(joined["version"])
        self._log(
            f"mineflayer: {joined['username']} joined {server.address} (Minecraft {joined['version']}, "
            f"{joined['game_mode']}) in {joined['connect_ms']:.0f} ms; sidecar pid {sidecar.pid}, node "
            f"v{self._runtime.node_version}"
        )

    def _read_seed(self, sidecar: Sidecar) -> None:
        try:
            answer = sidecar.request("seed", REQUEST_TIMEOUT_S)
        except SidecarFailed as error:
            self._world_seed, self._seed_unknown = None, f"/seed could not be asked: {error}"
            return
        seed = answer.get("seed")
        if seed is not None:
            self._world_seed, self._seed_unknown = int(seed), ""
            return
        said = "; ".join(answer.get("replies") or []) or "nothing"
        self._world_seed = None
        self._seed_unknown = f"the server did not say its seed to /seed (op the bot; it said: {said[:200]})"

    def world_seed(self, seed: int) -> tuple[int | None, str]:
        return self._world_seed, self._seed_unknown

    def say(self, lines: list[str]) -> None:
        if self._server.chat and lines:
            self._request("say", REQUEST_TIMEOUT_S, lines=lines)

    def _ensure_connected(self) -> None:
        if self._sidecar is not None and self._sidecar.alive() and self._lost is None:
            return
        if self._sidecar is not None:
            detail = self._lost or self._sidecar.closed_reason or "the sidecar exited"
            self._sidecar.stop()
            self._sidecar = None
            self._restarts.append(
                SimulatorRestart(
                    cause="crash",
                    detail=detail,
                    failed_task=self._task_name,
                    failed_during="step",
                    failed_step=self._steps,
                    at=iso_seconds(),
                )
            )
            self._log(f"mineflayer: reconnecting before the next task ({detail})")
        self._connect()

    def _request(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        if self._sidecar is None:
            raise SidecarFailed("reset() first: no sidecar is running")
        return self._sidecar.request(op, timeout_s, **fields)

    def _events(self) -> list[GameEvent]:
        """The events since the last call; a lost connection is remembered for the next reset."""
        events = []
        for raw in self._sidecar.take_events() if self._sidecar is not None else []:
            event = GameEvent.model_validate({**raw, "kind": raw["event"]})
            if event.kind in ("kicked", "disconnected"):
                self._lost = f"{event.kind}: {event.detail}"
            if event.kind == "death":
                self._fallbacks["deaths"] += 1
            events.append(event)
        return events

    # --- the episode ---------------------------------------------------------------------------------------------
    def reset(self, task: TaskSpec, seed: int) -> SimStep:
        self._task_name, self._steps = task.name, 0
        self._restarts = []
        self._fallbacks.clear()
        self._ensure_connected()
        commands = [*RESET_COMMANDS, *task.init_commands]
        answer = self._request(
            "reset", REQUEST_TIMEOUT_S + len(commands) * RESET_WAIT_MS / 1000, commands=commands, wait_ms=RESET_WAIT_MS
        )
        applied = []
        for number, entry in enumerate(answer["applied"]):
            refused = _refused(entry["replies"])
            if refused:
                ours = number < len(RESET_COMMANDS)
                self._fallbacks["reset_command_refused" if ours else "init_command_refused"] += 1
            applied.append({**entry, "refused": refused})
        self._events()  # what happened before the task started is not the agent's
        self._counters, self._ticks = {}, []
        self._standing = {"health": answer["health"], "inventory": answer["inventory"], "deaths": 0}
        info = self._info()
        info["init_commands"] = applied
        return SimStep(frame=None, counters={}, info=info)

    def act(self, skill: SkillRequest) -> SimStep:
        limit_ms = skill.timeout_ms or self._timeouts_ms.get(skill.kind, int(REQUEST_TIMEOUT_S * 1000))
        answer = self._request(
            "act", limit_ms / 1000 + ACT_MARGIN_S, kind=skill.kind, args=skill.args, timeout_ms=limit_ms
        )
        self._steps += 1
        outcome = SkillOutcome.model_validate(answer)
        self._absorb(answer)
        if outcome.status != "success":
            self._fallbacks[f"skill_{outcome.status}"] += 1
        return SimStep(
            frame=None,
            counters=self._copy_counters(),
            info=self._info(skill.label(), outcome.status),
            no_effect=[] if outcome.status == "success" else [skill.label()],
            skill=outcome,
            events=self._events(),
            counter_ticks=self._ticks,
        )

    def step(self, action: EnvAction) -> SimStep:
        held = [key for key in HELD_KEYS if action.get(key)]
        hotbar = next((index for index in range(9) if action.get(f"hotbar.{index + 1}")), None)
        no_effect = [key for key in NO_EFFECT_KEYS if action.get(key)]
        for key in no_effect:
            self._fallbacks[f"no_effect.{key}"] += 1
        pitch, yaw = action.get("camera", (0.0, 0.0))
        answer = self._request(
            "keys", REQUEST_TIMEOUT_S, controls=held, look=[pitch, yaw], hotbar=hotbar, duration_ms=TICK_MS
        )
        self._steps += 1
        self._absorb(answer)
        return SimStep(
            frame=None,
            counters=self._copy_counters(),
            info=self._info("keys", answer["status"]),
            no_effect=no_effect,
            events=self._events(),
            counter_ticks=self._ticks,
        )

    def state(self) -> GameState:
        answer = self._request("observe", REQUEST_TIMEOUT_S)
        assert self._capabilities is not None  # read when the bot joined, before any state is asked for
        return game_state(answer["state"], self._capabilities, self._fallbacks)

    def _absorb(self, answer: dict[str, Any]) -> None:
        before = self._counters
        self._counters = {event: dict(objects) for event, objects in (answer.get("counters") or {}).items()}
        self._ticks = counter_ticks(before, answer.get("counted") or [], self._counters)
        inventory = whole_counts(answer.get("inventory") or {}, self._fallbacks)
        self._standing = {key: answer.get(key) for key in ("health", "food", "deaths")} | {"inventory": inventory}
        for quirk, times in (answer.get("quirks") or {}).items():
            self._fallbacks[f"server_quirk.{quirk}"] = int(times)

    def _copy_counters(self) -> dict[str, dict[str, int]]:
        return {event: dict(objects) for event, objects in self._counters.items()}

    def _info(self, skill: str | None = None, status: str | None = None) -> dict[str, Any]:
        """What a player sees on screen (the HUD and the inventory), for the step log."""
        info = {key: value for key, value in self._standing.items() if value is not None}
        info["life"] = int(self._standing.get("deaths") or 0) + 1
        if skill is not None:
            info["skill"], info["skill_status"] = skill, status
        return info

    def fallback_counts(self) -> dict[str, int]:
        return dict(sorted(self._fallbacks.items()))

    def close(self) -> None:
        sidecar, self._sidecar = self._sidecar, None
        if sidecar is None:
            return
        if sidecar.alive():
            try:
                sidecar.request("close", REQUEST_TIMEOUT_S)
            except SidecarFailed as error:
                self._log(f"mineflayer: close: {error}; stopping the sidecar by pid")
        sidecar.stop()
