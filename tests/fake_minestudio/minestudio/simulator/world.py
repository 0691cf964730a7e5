"""The fake engine: a deterministic toy world behind the same surface as MineStudio 1.1.6's `sim.env`
(minestudio/simulator/minerl/env/_singleagent.py + _multiagent.py).

What is mimicked from the real Python side (file:line refer to the 1.1.6 wheel):
- env.seed(s) stores the seed for the NEXT env.reset() only; reset() clears it (_multiagent.py:143-159, 501-508).
  No seed -> a random world.
- env.reset() starts a new world (HumanSurvival's DefaultWorldGenerator(force_reset=True)) on the same engine
  process; the first reset launches the engine. Each hard reset also draws from np.random (create_agent_start,
  human_controls.py:76-81), as the real one does.
- env.step(): once the engine is gone (crash, or stepped after close) the step sets done=True and then fails in the
  random-observation fallback with TypeError (_multiagent.py:360-376, spaces.py:497); every later step or command
  raises RuntimeError("Attempted to step an environment server with done=True") (_multiagent.py:406).
  A hard reset after a crash raises ConnectionRefusedError (comms.retry re-raises the socket error at once), and a
  second one AttributeError (_TO_MOVE_handle_frozen_minecraft reads `self.instance`, _multiagent.py:760-768).
- env.reset() waits while MAX_RESETTING_ENV_COUNT envs are resetting (_multiagent.py:29, 459-463; host-wide there
  through diskcache, process-wide here).
- health and food_level are in info only when the engine sends them (_multiagent.py:251-256; `control.send_vitals`).
- Action keys that are not actionables (drop, anything unknown) are ignored silently (_multiagent.py:293-298);
  chat "" is skipped; a non-empty chat is run as a server command.
- Statistics are cumulative per world: they survive /kill and fast resets, and start at zero in a new world.

What is invented (the engine's Java side is not in the wheel): terrain, biomes, what attacking breaks, the exact
behaviour of the engine's /teleportbiome (here: nearest 64-block cell of that biome to (x, z)), and the frames.
All of it is a pure function of (world seed, state), so equal seeds give equal worlds in any process.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
from collections import Counter, OrderedDict, defaultdict
from typing import Any

import numpy as np
import psutil

from minestudio.simulator.control import control
from minestudio.simulator.minerl.env.malmo import InstanceManager

BIOMES = (
    "plains",
    "forest",
    "desert",
    "taiga",
    "savanna",
    "swamp",
    "jungle",
    "mountains",
    "birch_forest",
    "dark_forest",
    "snowy_tundra",
    "beach",
    "river",
    "ocean",
)
BIOME_BLOCKS = {
    "plains": ("grass_block", "dirt", "oak_log"),
    "forest": ("oak_log", "birch_log", "dirt"),
    "desert": ("sand", "sandstone"),
    "taiga": ("spruce_log", "dirt", "stone"),
    "savanna": ("acacia_log", "grass_block", "dirt"),
    "swamp": ("oak_log", "dirt", "clay"),
    "jungle": ("jungle_log", "dirt"),
    "mountains": ("stone", "coal_ore", "iron_ore"),
    "birch_forest": ("birch_log", "dirt"),
    "dark_forest": ("dark_oak_log", "dirt"),
    "snowy_tundra": ("snow_block", "dirt"),
    "beach": ("sand", "gravel"),
    "river": ("sand", "clay", "gravel"),
    "ocean": ("gravel", "sand"),
}
CELL = 64  # blocks per biome cell
SEARCH_CELLS = 40  # /teleportbiome looks this many cells out
ATTACK_STEPS_TO_BREAK = 5
MOVE_PER_STEP = 0.2
KEY_ACTIONS = ("forward", "left", "back", "right", "jump", "inventory", "sneak", "sprint", "attack", "use", "pickItem")
STAT_EVENTS = ("use_item", "pickup", "break_item", "craft_item", "mine_block", "damage_dealt", "custom", "kill_entity")
ITEM_ENTITY = "item"
MAX_RESETTING_ENV_COUNT = max(4, (os.cpu_count() or 1) // 12)
_resetting = threading.Condition()
_resetting_count = 0


def stable_hash(*parts: Any) -> int:
    """A process-independent 64-bit hash (unlike hash())."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


# ---------------------------------------------------------------------------------------------------------------
# Spaces (only what callers touch: no_op(), seed(), sample())


class FakeActionSpace:
    """HumanSurvival's actionables: keys (no `drop`), hotbar.1-9, camera, chat, voxels, mobs."""

    def __init__(self) -> None:
        self.keys = (*KEY_ACTIONS, *(f"hotbar.{i}" for i in range(1, 10)), "camera", "chat", "voxels", "mobs")

    def no_op(self, batch_shape: tuple = ()) -> OrderedDict[str, Any]:
        action: OrderedDict[str, Any] = OrderedDict()
        for key in self.keys:
            if key == "camera":
                action[key] = np.zeros(2, dtype=np.float32)
            elif key == "chat":
                action[key] = ""
            elif key in ("voxels", "mobs"):
                action[key] = np.zeros(6, dtype=np.int32)
            else:
                action[key] = 0
        return action

    def seed(self, seed: int | None) -> None:
        self._seed = seed


class FakeObservationSpace:
    """sample() fails exactly like the real space does under numpy 1: its inventory slots are minerl Text spaces whose
    sample() builds np.array(..., np.dtype), which numpy rejects with TypeError. (Under numpy 2 the real spaces cannot
    even be built: see herobraine/hero/spaces.py here.)"""

    def __init__(self) -> None:
        from minestudio.simulator.minerl.herobraine.hero.spaces import Text

        self.text = Text([1])

    def seed(self, seed: int | None) -> None:
        self._seed = seed

    def sample(self) -> Any:
        return np.array(np.reshape(["x"], ()), np.dtype)  # raises TypeError, on numpy 1.x and 2.x


# ---------------------------------------------------------------------------------------------------------------
# The world


def biome_at(world_seed: int, x: float, z: float) -> str:
    cx, cz = int(np.floor(x / CELL)), int(np.floor(z / CELL))
    return BIOMES[stable_hash(world_seed, "biome", cx, cz) % len(BIOMES)]


def ground_height(world_seed: int, x: float, z: float) -> int:
    return 62 + stable_hash(world_seed, "height", int(np.floor(x / 16)), int(np.floor(z / 16))) % 12


def world_spawn(world_seed: int) -> tuple[float, float, float]:
    x = stable_hash(world_seed, "spawn-x") % 512 - 256 + 0.5
    z = stable_hash(world_seed, "spawn-z") % 512 - 256 + 0.5
    return x, float(ground_height(world_seed, x, z) + 1), z


def find_biome(world_seed: int, biome: str, x: float, z: float) -> tuple[float, float] | None:
    """Centre of the nearest cell of `biome` to (x, z), searching outwards ring by ring in a fixed order."""
    cx0, cz0 = int(np.floor(x / CELL)), int(np.floor(z / CELL))
    for radius in range(SEARCH_CELLS + 1):
        ring = [
            (cx0 + dx, cz0 + dz)
            for dx in range(-radius, radius + 1)
            for dz in range(-radius, radius + 1)
            if max(abs(dx), abs(dz)) == radius
        ]
        for cx, cz in ring:
            if BIOMES[stable_hash(world_seed, "biome", cx, cz) % len(BIOMES)] == biome:
                return cx * CELL + CELL / 2, cz * CELL + CELL / 2
    return None


class Player:
    def __init__(self, position: tuple[float, float, float]) -> None:
        self.x, self.y, self.z = position
        self.pitch = 0.0
        self.yaw = 0.0
        self.health = 20.0
        self.food = 20
        self.inventory: list[dict[str, Any]] = [{"type": "air", "quantity": 0} for _ in range(36)]
        self.selected = 0
        self.gui_open = False

    def give(self, item: str, count: int) -> None:
        for slot in self.inventory:
            if slot["type"] == item and slot["quantity"] < 64:
                slot["quantity"] += count
                return
        for slot in self.inventory:
            if slot["type"] == "air":
                slot["type"], slot["quantity"] = item, count
                return

    def clear_inventory(self) -> None:
        for slot in self.inventory:
            slot["type"], slot["quantity"] = "air", 0


class World:
    """One Minecraft world: generated from its seed, then changed by what happens in it (it persists across
    fast resets, exactly as the real one does)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.spawn = world_spawn(seed)
        self.player = Player(self.spawn)
        self.stats: dict[str, Counter] = {event: Counter() for event in STAT_EVENTS}
        self.entities: list[dict[str, Any]] = []
        self.changed_blocks: dict[tuple[int, int, int], str] = {}
        self.time = 0
        self.weather = "clear"
        self.attack_streak = 0
        self.pending_pickup: str | None = None
        self.prev_keys: dict[str, int] = {}

    # --- commands -------------------------------------------------------------------------------------------
    def run_command(self, command: str) -> None:
        words = command.strip().lstrip("/").split()
        if not words:
            return
        name, args = words[0], words[1:]
        player = self.player
        if name == "kill":
            if not args or args[0] in ("@s", "@p", "@a"):
                self._die()
            elif args[0] == "@e[type=!player]":
                self.entities = []
            elif args[0].startswith("@e[type="):
                kind = args[0][len("@e[type=") : -1].removeprefix("minecraft:")
                self.entities = [e for e in self.entities if e["type"] != kind]
            elif args[0] == "@e":
                self.entities = []
                self._die()
        elif name == "time" and len(args) >= 2 and args[0] == "set":
            self.time = {"day": 1000, "night": 13000, "noon": 6000, "midnight": 18000}.get(args[1], None) or int(
                args[1]
            )
        elif name == "weather" and args:
            self.weather = args[0]
        elif name == "teleportbiome" and len(args) >= 5:
            biome = args[1].removeprefix("minecraft:")
            x, z = self._coordinate(args[2], player.x), self._coordinate(args[4], player.z)
            found = find_biome(self.seed, biome, x, z)
            if found is not None:
                x, z = found
            player.x, player.z = x, z
            player.y = float(ground_height(self.seed, x, z) + 1)
        elif name in ("tp", "teleport") and len(args) >= 4:
            player.x = self._coordinate(args[1], player.x)
            player.y = self._coordinate(args[2], player.y)
            player.z = self._coordinate(args[3], player.z)
        elif name == "give" and len(args) >= 2:
            count = int(args[2]) if len(args) >= 3 and args[2].isdigit() else 1
            player.give(re.sub(r"\{.*$", "", args[1]).removeprefix("minecraft:"), count)
        elif name == "summon" and args:
            self.entities.append({"type": args[0].removeprefix("minecraft:"), "pos": (player.x, player.y, player.z)})
        elif name == "setblock" and len(args) >= 4:
            pos = tuple(
                int(np.floor(self._coordinate(a, c)))
                for a, c in zip(args[:3], (player.x, player.y, player.z), strict=True)
            )
            self.changed_blocks[pos] = args[3].removeprefix("minecraft:")
        elif name == "clear":
            player.clear_inventory()
        # everything else (gamerule, effect, enchant, spawnpoint, ...) is accepted and has no modelled effect

    @staticmethod
    def _coordinate(text: str, current: float) -> float:
        if text.startswith("~"):
            return current + (float(text[1:]) if len(text) > 1 else 0.0)
        return float(text)

    def _die(self) -> None:
        """Death drops the inventory as items and respawns at the world spawn; the episode goes on (FastResetCallback
        issues /kill and keeps stepping, so the 1.16 engine must not end the episode on death)."""
        player = self.player
        for slot in player.inventory:
            if slot["type"] != "air":
                self.entities.append({"type": ITEM_ENTITY, "item": slot["type"], "pos": (player.x, player.y, player.z)})
        player.clear_inventory()
        player.x, player.y, player.z = self.spawn
        player.pitch = player.yaw = 0.0
        player.health, player.food = 20.0, 20
        self.stats["custom"]["deaths"] += 1

    # --- one tick --------------------------------------------------------------------------------------------
    def tick(self, action: dict[str, Any]) -> None:
        player = self.player
        pressed = {key: _as_int(action.get(key, 0)) for key in KEY_ACTIONS}
        for i in range(1, 10):
            if _as_int(action.get(f"hotbar.{i}", 0)):
                player.selected = i - 1
        if pressed["inventory"] and not self.prev_keys.get("inventory"):
            player.gui_open = not player.gui_open
        self.prev_keys = pressed
        camera = np.asarray(action.get("camera", (0.0, 0.0)), dtype=np.float64).reshape(-1)
        player.pitch = float(np.clip(player.pitch + camera[0], -90.0, 90.0))
        player.yaw = float((player.yaw + camera[1] + 180.0) % 360.0 - 180.0)
        if not player.gui_open:
            self._move(pressed)
            self._attack(pressed["attack"])
            if pressed["use"]:
                self._use()
        if self.pending_pickup:
            self.stats["pickup"][self.pending_pickup] += 1
            player.give(self.pending_pickup, 1)
            self.pending_pickup = None
        self.time += 1
        self.stats["custom"]["play_one_minute"] += 1
        self.stats["custom"]["time_since_death"] += 1

    def _move(self, pressed: dict[str, int]) -> None:
        forward = pressed["forward"] - pressed["back"]
        strafe = pressed["right"] - pressed["left"]
        if not forward and not strafe:
            return
        speed = MOVE_PER_STEP * (1.3 if pressed["sprint"] else 0.3 if pressed["sneak"] else 1.0)
        yaw = np.radians(self.player.yaw)
        dx = (-np.sin(yaw) * forward - np.cos(yaw) * strafe) * speed
        dz = (np.cos(yaw) * forward - np.sin(yaw) * strafe) * speed
        self.player.x += float(dx)
        self.player.z += float(dz)
        self.player.y = float(ground_height(self.seed, self.player.x, self.player.z) + 1)
        self.stats["custom"]["walk_one_cm"] += int(round(speed * 100))

    def _attack(self, attacking: int) -> None:
        self.attack_streak = self.attack_streak + 1 if attacking else 0
        if self.attack_streak < ATTACK_STEPS_TO_BREAK:
            return
        self.attack_streak = 0
        mobs = [e for e in self.entities if e["type"] != ITEM_ENTITY]
        if mobs:
            victim = mobs[0]
            self.entities.remove(victim)
            self.stats["kill_entity"][victim["type"]] += 1
            self.stats["custom"]["mob_kills"] += 1
            return
        block = self._block_in_front()
        self.stats["mine_block"][block] += 1
        self.pending_pickup = "cobblestone" if block == "stone" else block  # picked up at the end of this tick

    def _block_in_front(self) -> str:
        player = self.player
        yaw = np.radians(player.yaw)
        bx, bz = int(np.floor(player.x - np.sin(yaw))), int(np.floor(player.z + np.cos(yaw)))
        by = int(np.floor(player.y - (1 if player.pitch > 30 else 0)))
        if (bx, by, bz) in self.changed_blocks:
            return self.changed_blocks.pop((bx, by, bz))
        choices = BIOME_BLOCKS[biome_at(self.seed, player.x, player.z)]
        return choices[stable_hash(self.seed, "block", bx, by, bz) % len(choices)]

    def _use(self) -> None:
        slot = self.player.inventory[self.player.selected]
        if slot["type"] == "air":
            return
        self.stats["use_item"][slot["type"]] += 1
        slot["quantity"] -= 1
        if slot["quantity"] <= 0:
            slot["type"], slot["quantity"] = "air", 0

    # --- what the engine reports ------------------------------------------------------------------------------
    def observe(self, render_size: tuple[int, int]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(obs_dict, monitor_dict) in the shapes _MultiAgentEnv._process_observation returns."""
        player = self.player
        obs: dict[str, Any] = {"pov": self.render(render_size)}
        obs["inventory"] = {i: dict(slot) for i, slot in enumerate(player.inventory)}
        held = player.inventory[player.selected]["type"]
        obs["equipped_items"] = {
            "mainhand": {"type": held, "damage": 0, "maxDamage": 0},
            **{
                part: {"type": "air", "damage": 0, "maxDamage": 0}
                for part in ("offhand", "head", "chest", "legs", "feet")
            },
        }
        for event in STAT_EVENTS:
            counts = {name: int(value) for name, value in self.stats[event].items() if value}
            obs[event] = defaultdict(lambda: np.zeros((), dtype=float), counts)
        obs["player_pos"] = {"x": player.x, "y": player.y, "z": player.z, "pitch": player.pitch, "yaw": player.yaw}
        obs["is_gui_open"] = player.gui_open
        monitor = {
            "is_gui_open": player.gui_open,
            "location_stats": {
                "xpos": np.array(player.x),
                "ypos": np.array(player.y),
                "zpos": np.array(player.z),
                "pitch": np.array(player.pitch),
                "yaw": np.array(player.yaw),
                "biome_id": np.array(BIOMES.index(biome_at(self.seed, player.x, player.z))),
                "is_raining": np.array(self.weather != "clear"),
                "sea_level": np.array(62),
                "sun_brightness": np.array(0.94),
                "sky_light_level": np.array(1.0),
                "light_level": np.array(15),
                "can_see_sky": np.array(True),
                "rainfall": np.array(0.4),
                "temperature": np.array(0.8),
            },
        }
        if control.send_vitals:
            monitor |= {"health": np.float32(player.health), "food_level": np.int32(player.food)}
        return obs, monitor

    def render(self, render_size: tuple[int, int]) -> np.ndarray:
        """A frame that is a pure function of what the player sees: a 9x16 tile grid from (world, pose, gui)."""
        width, height = render_size
        player = self.player
        key = (
            self.seed,
            round(player.x, 2),
            round(player.y, 2),
            round(player.z, 2),
            round(player.pitch, 2),
            round(player.yaw, 2),
            player.gui_open,
            len(self.entities),
        )
        tiles = np.random.default_rng(stable_hash(*key)).integers(0, 256, size=(9, 16, 3), dtype=np.uint8)
        rows = np.arange(height) * 9 // height
        cols = np.arange(width) * 16 // width
        return tiles[rows][:, cols]


def _as_int(value: Any) -> int:
    if isinstance(value, str):
        return 0
    return int(np.asarray(value).reshape(-1)[0]) if np.size(value) else 0


# ---------------------------------------------------------------------------------------------------------------
# The engine process and the env


class FakeInstance:
    """One 'Minecraft instance', in MineStudio's process-local pool from creation until killed; optionally a real
    process group (a leader in its own session with one child, like launchClient.sh -> xvfb-run -> java), so that
    stopping it by pid can be tested."""

    def __init__(self) -> None:
        self.running = False
        self.crashed = False
        self.minecraft_process: psutil.Popen | None = None
        InstanceManager._instance_pool.append(self)

    def launch(self) -> None:
        control.launches += 1
        if control.spawn_engine_process:
            child = "import time; time.sleep(10**6)"
            leader = (
                f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); "
                "print('up', flush=True); time.sleep(10**6)"
            )
            self.minecraft_process = psutil.Popen(
                [sys.executable, "-c", leader],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            # As a real launch returns once the engine is up: its launcher and the process it started both exist.
            self.minecraft_process.stdout.readline()
            self.minecraft_process.stdout.close()
        if control.spawn_daemon_process and (control.daemon is None or control.daemon.poll() is not None):
            control.daemon = subprocess.Popen(  # database_manager.check_daemon: one per host, own session
                [sys.executable, "-c", "import time; time.sleep(10**6)"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        if control.launch_hangs and self.minecraft_process is not None:
            control.launch_hangs = False
            self.minecraft_process.wait()  # the real launch loop reads the engine's stdout until it closes
            raise EOFError("\n\nMinecraft process finished unexpectedly. There was an error with Malmo.")
        if control.launch_fails:
            raise EOFError("\n\nMinecraft process finished unexpectedly. There was an error with Malmo.")
        self.running = True

    @property
    def engine_gone(self) -> bool:
        return self.crashed or (self.minecraft_process is not None and self.minecraft_process.poll() is not None)

    def crash(self) -> None:
        """Java dies: the socket breaks and the process group is gone."""
        self.crashed = True
        self._kill_group()

    def kill(self) -> None:
        """Like MinecraftInstance._destruct: sleep, send <Exit>, sleep (control.destruct_sleeps_s), SIGKILL the
        whole process group; leaves the pool."""
        before_exit, after_exit = control.destruct_sleeps_s
        threading.Event().wait(before_exit)
        threading.Event().wait(after_exit)
        self._kill_group()
        self.running = False
        if self in InstanceManager._instance_pool:
            InstanceManager._instance_pool.remove(self)

    def _kill_group(self) -> None:
        if self.minecraft_process is not None:
            try:
                os.killpg(self.minecraft_process.pid, signal.SIGKILL)
            except OSError:
                pass
            self.minecraft_process.wait()


class FakeEnv:
    """The surface of `sim.env` (a minerl _SingleAgentEnv) that callers and callbacks use."""

    def __init__(
        self, render_size: tuple[int, int], inventory: dict | None = None, preferred_spawn_biome: str | None = None
    ) -> None:
        self.render_size = render_size
        self.inventory = dict(inventory or {})
        self.preferred_spawn_biome = preferred_spawn_biome
        self.failed_reconnects = 0
        self.action_space = FakeActionSpace()
        self.observation_space = FakeObservationSpace()
        self.instances: list[FakeInstance] = []
        self.world: World | None = None
        self.done = False
        self._seed: int | None = None
        self._already_closed = False
        self.steps_taken = 0  # env steps on this instance (commands and empty frames included)
        self.hard_resets = 0
        self.commands: list[str] = []
        self.command_steps: list[int] = []  # the env step (steps_taken) each command ran as
        self.ignored_keys: Counter = Counter()
        self._hang = threading.Event()
        self._hang.set()
        self._natural_done_pending = False
        control.envs.append(self)

    # --- gym surface ------------------------------------------------------------------------------------------
    def seed(self, seed: int | None = None, seed_spaces: bool = True) -> None:
        assert isinstance(seed, int) or seed is None, "Seed must be an int!"
        self._seed = seed
        if seed_spaces:
            self.observation_space.seed(seed)
            self.action_space.seed(seed)

    def noop_action(self) -> OrderedDict[str, Any]:
        return self.action_space.no_op()

    def reset(self) -> dict[str, Any]:
        global _resetting_count
        with _resetting:
            _resetting.wait_for(lambda: _resetting_count < MAX_RESETTING_ENV_COUNT)
            _resetting_count += 1
        try:
            return self._reset()
        finally:
            with _resetting:
                _resetting_count -= 1
                _resetting.notify_all()

    def _reset(self) -> dict[str, Any]:
        try:
            if not self.instances:
                instance = FakeInstance()
                instance.launch()
                self.instances.append(instance)  # as _setup_instances does, once the launch returned
            if self.instances[0].engine_gone or self._already_closed:
                self.failed_reconnects += 1
                if self.failed_reconnects > 1:
                    raise AttributeError("'_SingleAgentEnv' object has no attribute 'instance'")
                raise ConnectionRefusedError(111, "Connection refused")
            # HumanControlEnvSpec.create_agent_start draws from np.random on every hard reset
            np.random.uniform(1, 1), np.random.uniform(2, 2), np.random.uniform(70, 70), np.random.randint(16, 17)
            world_seed = self._seed if self._seed is not None else random.SystemRandom().randrange(2**31)
            self.world = World(world_seed)
            self.done = False
            self._natural_done_pending = False
            self.hard_resets += 1
            obs, _ = self.world.observe(self.render_size)
            return obs
        finally:
            self._seed = None  # "We don't force the same seed every episode"

    def step(self, single_agent_action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        action = single_agent_action
        if self.done:
            raise RuntimeError("Attempted to step an environment server with done=True")
        instance = self.instances[0] if self.instances else None
        while not self._hang.wait(0.05):  # a hung socket read ends when its engine is stopped
            if instance is not None and instance.engine_gone:
                break
        self.steps_taken += 1
        if control.crash_at_env_step is not None and self.steps_taken >= control.crash_at_env_step and instance:
            control.crash_at_env_step = None
            instance.crash()
        if instance is None or instance.engine_gone or self._already_closed or self.world is None:
            self.done = True
            # the real fallback: {agent: self.observation_space.sample()} -> TypeError from the Text space
            return {"agent_0": self.observation_space.sample()}, 0, self.done, {"error": "Connection timed out!"}
        for key in action:
            if key not in self.action_space.keys:
                self.ignored_keys[key] += 1
        chat = action.get("chat", "")
        if isinstance(chat, str) and chat:
            self.commands.append(chat)
            self.command_steps.append(self.steps_taken)
            self.world.run_command(chat)
        self.world.tick(action)
        done = self._natural_done_pending
        self.done = done
        obs, monitor = self.world.observe(self.render_size)
        return obs, 0.0, done, monitor

    def execute_cmd(self, command: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        action = self.noop_action()
        action["chat"] = command
        return self.step(action)

    def close(self) -> None:
        if self._already_closed:
            return
        for instance in self.instances:
            if instance.running:
                instance.kill()
        self._already_closed = True

    def is_closed(self) -> bool:
        return self._already_closed

    # --- test handles -----------------------------------------------------------------------------------------
    def crash(self) -> None:
        """The Java process dies now; the next step fails as the real one does."""
        if self.instances:
            self.instances[0].crash()

    def finish_episode(self) -> None:
        """The engine reports done=True on the next step (e.g. the server quit)."""
        self._natural_done_pending = True

    def hang_steps(self) -> None:
        """Steps block (as when Java stops answering) until release()."""
        self._hang.clear()

    def release(self) -> None:
        self._hang.set()

    def position(self) -> tuple[float, float, float]:
        player = self.world.player
        return player.x, player.y, player.z

    @property
    def world_seed(self) -> int | None:
        return self.world.seed if self.world else None
