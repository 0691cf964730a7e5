"""The scripted Crafter player: frame reading checked against Crafter's privileged semantic map, and play.

Only tests read the semantic map; the agent sees nothing but the frame.
"""

from __future__ import annotations

import asyncio
import base64
import io

import numpy as np
import pytest
from PIL import Image

crafter = pytest.importorskip("crafter")

from mcu_arms.contracts.tasks import TASKS_ROOT, load_task  # noqa: E402 - after the importorskip above
from mcu_arms.contracts.wire import BUTTON_KEYS, InitPayload, ObservationPayload  # noqa: E402 - after the importorskip above
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator  # noqa: E402 - after the importorskip above
from mcu_arms.purple.crafter_vision import (  # noqa: E402 - after the importorskip above
    INVENTORY_ITEMS,
    MATERIALS,
    OBJECTS,
    FrameReader,
    decode_observation,
)
from mcu_arms.purple.scripted import REPORT_NAME, ScriptedPolicy, ScriptedReport  # noqa: E402 - after the importorskip above

SEMANTIC_OBJECTS = {13: "player", 14: "cow", 15: "zombie", 16: "skeleton", 17: "arrow", 18: "plant"}
WALKABLE = ("grass", "sand", "path")
DIAMOND_TASK = TASKS_ROOT / "mine_diamond_from_scratch" / "mine_diamond_from_scratch.yaml"


@pytest.fixture(scope="module")
def reader() -> FrameReader:
    return FrameReader()


def _truth(semantic: np.ndarray, player: np.ndarray, column: int, row: int) -> str:
    x, y = int(player[0]) + column - 4, int(player[1]) + row - 3
    if not (0 <= x < semantic.shape[0] and 0 <= y < semantic.shape[1]):
        return "void"
    code = int(semantic[x, y])
    return SEMANTIC_OBJECTS.get(code, MATERIALS[code] if code < len(MATERIALS) else "?")


def _read_kind(reading, column: int, row: int) -> str:
    obj = OBJECTS[reading.objects[row, column]]
    return obj.split("-")[0] if obj != "none" else MATERIALS[reading.materials[row, column]]


def _views(seed: int, daylights: tuple[float, ...], count: int):
    """Frames of one world seen from random walkable places (many at the world's edge), at given daylights."""
    env = crafter.Env(size=(128, 128), seed=seed)
    env.reset()
    for _ in range(20):
        env.step(0)  # let creatures move and spawn
    world, rng = env._world, np.random.RandomState(seed)
    for index in range(count):
        while True:
            x, y = rng.randint(0, 64), rng.randint(0, 64)
            if rng.rand() < 0.3:
                x = rng.choice([0, 1, 62, 63])
            material, obj = world[x, y]
            if material in WALKABLE and (obj is None or obj is env._player):
                break
        world.move(env._player, (x, y))
        env._player.facing = [(0, 1), (0, -1), (1, 0), (-1, 0)][index % 4]
        world.daylight = daylights[index % len(daylights)]
        yield env.render(), env._sem_view(), env._player.pos.copy(), env._player.facing


def _accuracy(reader: FrameReader, seed: int, daylights: tuple[float, ...]) -> tuple[float, float, int]:
    right = total = reliable_total = facing_right = frames = 0
    for frame, semantic, player, facing in _views(seed, daylights, 40):
        reading = reader.read(frame)
        frames += 1
        facing_right += reading.facing == tuple(facing)
        for row in range(7):
            for column in range(9):
                total += 1
                if not reading.reliable[row, column]:
                    continue
                reliable_total += 1
                right += _read_kind(reading, column, row) == _truth(semantic, player, column, row)
    assert facing_right == frames, "the player's facing must be read in every frame"
    return right / reliable_total, reliable_total / total, frames


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.slow
def test_tiles_by_day_match_the_semantic_map_exactly(reader: FrameReader, seed: int) -> None:
    accuracy, coverage, _ = _accuracy(reader, seed, (1.0, 0.8, 0.6))
    assert coverage == 1.0
    assert accuracy == 1.0


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow
def test_tiles_at_night_are_read_or_flagged_unreliable(reader: FrameReader, seed: int) -> None:
    accuracy, coverage, _ = _accuracy(reader, seed, (0.0, 0.1, 0.25, 0.4))
    assert accuracy >= 0.995
    assert coverage >= 0.75  # only the noisiest corners of the darkest frames are given up


def test_daylight_is_estimated_from_the_frame(reader: FrameReader) -> None:
    for daylight in (0.0, 0.3, 0.7, 1.0):
        frame, *_ = next(_views(5, (daylight,), 1))
        assert abs(reader.read(frame).daylight - daylight) < 0.05


def test_inventory_counts_and_digits_are_read_exactly(reader: FrameReader) -> None:
    env = crafter.Env(size=(128, 128), seed=0)
    env.reset()
    rng = np.random.RandomState(0)
    for _ in range(12):
        counts = {item: int(rng.randint(0, 10)) for item in INVENTORY_ITEMS}
        counts["health"] = max(1, counts["health"])
        env._player.inventory = dict(counts)
        assert reader.read(env.render()).inventory == counts


def test_sleep_is_recognised_and_a_dark_night_is_not_mistaken_for_it(reader: FrameReader) -> None:
    env = crafter.Env(size=(128, 128), seed=0)
    env.reset()
    env._world.daylight = 0.0
    assert not reader.read(env.render()).sleeping
    env._player.sleeping = True
    reading = reader.read(env.render())
    assert reading.sleeping
    assert not reading.reliable.any()


def test_png_round_trip_decodes_the_same_frame() -> None:
    env = crafter.Env(size=(128, 128), seed=0)
    frame = env.reset()
    assert np.array_equal(decode_observation(_png(frame)), frame)


def _png(frame: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _play(seed: int, steps: int, until=None, output_dir=None) -> tuple[list[dict], list[dict]]:
    """The scripted policy on the real embedded simulator through PNG observations, as a served agent plays.

    Stops early once `until(counters)` holds; the policy is closed at the end, as the server does.
    """

    async def episode() -> tuple[list[dict], list[dict]]:
        task = load_task(DIAMOND_TASK)
        simulator = EmbeddedSimulator()
        policy = ScriptedPolicy(seed=seed, output_dir=output_dir)
        await policy.init(InitPayload(prompt=task.text, text=task.text))
        sim_step = simulator.reset(task, seed)
        actions, counters = [], []
        for step in range(1, steps + 1):
            answer = await policy.act(ObservationPayload(step=step, obs=_png(sim_step.frame)))
            assert answer.action_type == "env"
            actions.append(answer.action)
            sim_step = simulator.step(answer.action)
            counters.append(sim_step.counters)
            if until is not None and until(sim_step.counters):
                break
        simulator.close()
        await policy.close()
        return actions, counters

    return asyncio.run(episode())


def _has_wood_and_table(counters: dict) -> bool:
    wood = counters.get("mine_block", {}).get("oak_log", 0)
    return wood >= 1 and counters.get("craft_item", {}).get("crafting_table", 0) >= 1


def test_scripted_player_gets_wood_and_places_a_table_within_500_steps(tmp_path, capsys) -> None:
    actions, counters = _play(seed=0, steps=500, until=_has_wood_and_table, output_dir=tmp_path)
    assert _has_wood_and_table(counters[-1]), f"not reached in {len(counters)} steps"
    assert all(set(action) <= set(BUTTON_KEYS) | {"camera"} for action in actions)
    report = ScriptedReport.model_validate_json((tmp_path / REPORT_NAME).read_text())
    (episode,) = report.episodes
    assert episode.observations == len(actions) and report.seed == 0
    assert f"{len(actions)} observations; self-observations:" in capsys.readouterr().out


def test_self_observations_of_every_episode_are_reported_and_summed(tmp_path) -> None:
    async def episode(task: str, respawns: int) -> None:
        policy = ScriptedPolicy(seed=4, output_dir=tmp_path)
        await policy.init(InitPayload(prompt=task, text=task))
        policy.player.stats["respawns_detected"] += respawns  # what a death mid-episode would make it count
        await policy.close()

    asyncio.run(episode("first", 1))
    asyncio.run(episode("second", 2))
    report = ScriptedReport.model_validate_json((tmp_path / REPORT_NAME).read_text())
    assert [e.task for e in report.episodes] == ["first", "second"]
    assert report.stats == {"respawns_detected": 3}


@pytest.mark.slow
def test_same_seed_gives_identical_actions_and_rewards() -> None:
    first_actions, first_counters = _play(seed=1, steps=150)
    second_actions, second_counters = _play(seed=1, steps=150)
    assert first_actions == second_actions
    assert first_counters == second_counters
    assert len({str(action) for action in first_actions}) > 3  # it really plays, not a constant answer
