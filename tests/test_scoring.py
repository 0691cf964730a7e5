"""RewardTracker payouts, score_task for each scoring kind, and video evaluation's status paths."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml
from model_service import FakeModelService

from mcu_arms.contracts.tasks import TASKS_ROOT, RewardEntry, TaskSpec, load_task
from mcu_arms.green.scoring import CRITERIA, RewardTracker, VideoEvaluation, score_task
from mcu_arms.green.video_eval import CRITERIA_FILE, evaluate_video

UNSCORED_VIDEO = VideoEvaluation(status="disabled", reason="video evaluation is off")


def _task(*entries: RewardEntry, milestones: bool = False) -> TaskSpec:
    if milestones:
        return TaskSpec(name="long", category="mine_diamond_from_scratch", text="t", milestones=entries)
    return TaskSpec(name="short", category="crafting", text="t", reward_cfg=entries)


def _video(progress: float) -> VideoEvaluation:
    criteria = {name: progress for name in CRITERIA}
    return VideoEvaluation(status="ok", task_progress=progress, criteria=criteria, model="gpt-4o")


def test_partial_and_full_reward_scores() -> None:
    task = _task(
        RewardEntry(event="craft_item", identity="planks", objects=("oak_planks",)),
        RewardEntry(event="craft_item", identity="table", objects=("crafting_table",), reward=3.0),
    )
    tracker = RewardTracker(task)
    assert tracker.update(1, {"craft_item": {"oak_planks": 4}})[0].identity == "planks"
    partial = score_task(task, tracker, UNSCORED_VIDEO)
    assert (partial.normalised_sim_score, partial.score, partial.score_source) == (2.5, 2.5, "sim")
    assert partial.sim_score == 1.0  # upstream's meaning: the raw reward sum
    blended = score_task(task, tracker, _video(6.0))
    assert (blended.score, blended.score_source) == ((2.5 + 6.0) / 2, "sim+video")
    assert blended.criteria["action_control"] == 6.0
    tracker.update(7, {"craft_item": {"oak_planks": 4, "crafting_table": 1}})
    full = score_task(task, tracker, _video(2.0))
    assert (full.normalised_sim_score, full.score, full.score_source) == (10.0, 10.0, "sim")
    assert full.sim_score == 4.0
    assert tracker.reached == {"planks": 1, "table": 7} and tracker.is_perfect()
    assert [(m.identity, m.step) for m in full.milestones] == [("planks", 1), ("table", 7)]


def test_max_reward_times_and_one_payout_per_entry_per_step() -> None:
    task = _task(RewardEntry(event="mine_block", identity="logs", objects=("oak_log", "birch_log"), max_reward_times=3))
    tracker = RewardTracker(task)
    assert len(tracker.update(1, {"mine_block": {"oak_log": 5, "birch_log": 2}})) == 1  # 7 logs, one payout
    assert tracker.update(2, {"mine_block": {"oak_log": 5, "birch_log": 2}}) == []  # no growth, no payout
    assert tracker.update(3, {"mine_block": {"oak_log": 6, "birch_log": 2}})[0].object == "oak_log"
    assert tracker.update(4, {"mine_block": {"oak_log": 6, "birch_log": 3}})[0].object == "birch_log"
    assert tracker.update(5, {"mine_block": {"oak_log": 9, "birch_log": 9}}) == []  # capped at 3
    assert tracker.sim_reward == 3.0 and tracker.max_reward == 3.0
    assert [event.step for event in tracker.events] == [1, 3, 4]


def test_milestones_with_an_unavailable_entry_count_in_the_total() -> None:
    task = _task(
        RewardEntry(event="mine_block", identity="mine_log", objects=("oak_log",)),
        RewardEntry(event="craft_item", identity="crafting_table", objects=("crafting_table",)),
        RewardEntry(event="pickup", identity="iron_ingot", objects=("iron_ingot",)),
        RewardEntry(event="pickup", identity="diamond", objects=("diamond",)),
        milestones=True,
    )
    tracker = RewardTracker(task, unavailable=["iron_ingot"])
    events = tracker.update(3, {"mine_block": {"oak_log": 1}, "pickup": {"iron_ingot": 1}})
    assert [(e.identity, e.kind) for e in events] == [("mine_log", "milestone")]  # unavailable never pays
    plain = score_task(task, tracker, UNSCORED_VIDEO)
    assert (plain.max_score, plain.score, plain.score_source) == (100.0, 25.0, "milestones")
    assert (plain.milestones_available, plain.milestones_total) == (3, 4)
    assert [m.available for m in plain.milestones] == [True, True, False, True]
    with_video = score_task(task, tracker, _video(5.0))
    assert (with_video.score, with_video.score_source) == (100.0 * 1.5 / 4, "milestones+video")
    with pytest.raises(ValueError):
        RewardTracker(task, unavailable=["no_such_entry"])


def test_video_only_task_is_unscored_without_video_never_zero() -> None:
    task = TaskSpec(name="build_a_house", category="building", text="build a house")
    tracker = RewardTracker(task)
    assert tracker.update(1, {"craft_item": {"anything": 3}}) == []
    unscored = score_task(task, tracker, VideoEvaluation(status="no_api_key", reason="no key"))
    assert (unscored.score, unscored.scored, unscored.score_source) == (None, False, "unscored")
    assert unscored.normalised_sim_score is None and unscored.sim_score == 0.0  # upstream: no reward, 0.0
    scored = score_task(task, tracker, _video(7.0))
    assert (scored.score, scored.scored, scored.score_source, scored.max_score) == (7.0, True, "video", 10.0)


def test_packaged_milestone_task_scores_on_packaged_data() -> None:
    task = load_task(TASKS_ROOT / "mine_diamond_from_scratch" / "mine_diamond_from_scratch.yaml")
    tracker = RewardTracker(task)
    tracker.update(10, {"mine_block": {"oak_log": 1}, "craft_item": {"crafting_table": 1, "wooden_pickaxe": 1}})
    assert score_task(task, tracker, UNSCORED_VIDEO).score == pytest.approx(30.0)


def test_criteria_file_names_the_six_criteria() -> None:
    listed = yaml.safe_load(CRITERIA_FILE.read_text())
    assert tuple(item["key"] for item in listed["criteria"]) == CRITERIA


def _frames(tmp_path: Path, count: int) -> Path:
    from PIL import Image

    frames = tmp_path / "frames"
    frames.mkdir()
    for index in range(count):
        Image.new("RGB", (128, 128), (index * 3 % 256, 90, 40)).save(frames / f"{index:05d}.png")
    return frames


def test_status_paths_never_touch_the_network(tmp_path: Path) -> None:
    task = _task(RewardEntry(event="craft_item", identity="a", objects=("x",)))
    frames = _frames(tmp_path, 3)
    skipped = evaluate_video(task, frames, None, enabled=True, env={"OPENAI_API_KEY": "k"}, needed=False)
    assert skipped.status == "skipped_perfect"
    off = evaluate_video(task, frames, None, enabled=False, env={"OPENAI_API_KEY": "k"}, needed=True)
    assert off.status == "disabled" and off.reason
    # An unroutable base URL proves no request is attempted: the key check comes first.
    no_key = evaluate_video(task, frames, None, enabled=True, env={"OPENAI_BASE_URL": "http://0.0.0.0:9"}, needed=True)
    assert no_key.status == "no_api_key" and "OPENAI_API_KEY" in no_key.reason and no_key.task_progress is None
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = evaluate_video(task, empty, None, enabled=True, env={"OPENAI_API_KEY": "k"}, needed=True)
    assert nothing.status == "failed" and "no frames" in nothing.reason


def test_ok_evaluation_over_a_real_http_round_trip(tmp_path: Path, model_service: str) -> None:
    task = _task(RewardEntry(event="craft_item", identity="a", objects=("x",)))
    FakeModelService.answer = json.dumps({"scores": {name: 4 for name in CRITERIA} | {"task_progress": 8}})
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": model_service}
    result = evaluate_video(task, _frames(tmp_path, 40), None, enabled=True, env=env, needed=True, model="gpt-4o")
    assert result.status == "ok", result.reason
    assert result.task_progress == 8.0 and result.criteria["creative_attempts"] == 4.0
    (request,) = FakeModelService.requests
    assert request["temperature"] == 0 and isinstance(request["seed"], int)
    images = [part for part in request["messages"][-1]["content"] if part["type"] == "image_url"]
    assert 1 < len(images) < 40  # sampled, not every frame
    FakeModelService.answer = "not json at all"
    garbled = evaluate_video(task, tmp_path / "frames", None, enabled=True, env=env, needed=True)
    assert garbled.status == "failed" and garbled.task_progress is None


def _auto_eval(tmp_path: Path, *tasks: str) -> Path:
    """A folder in the layout of MCU's auto_eval, with our own small prompt and criteria files."""
    folder = tmp_path / "auto_eval"
    (folder / "prompt").mkdir(parents=True)
    (folder / "prompt" / "single_rating_prompt.txt").write_text("You rate Minecraft videos. Answer '- Key: value'.")
    (folder / "criteria_files").mkdir()
    for task in tasks:
        (folder / "criteria_files" / f"{task}.txt").write_text(f"**Task Progress:** how far {task} got.\n")
    return folder


def _sized_frames(folder: Path, count: int) -> Path:
    from PIL import Image

    folder.mkdir()
    for index in range(count):
        Image.new("RGB", (16, 16), (200, index % 256, 10)).save(folder / f"{index:06d}.png")
    return folder


def test_mcu_rubric_request_uses_the_checkout_and_upstreams_sampling(tmp_path: Path, model_service: str) -> None:
    from PIL import Image

    from mcu_arms.contracts.rubric import auto_eval_problem

    task = _task(RewardEntry(event="craft_item", identity="a", objects=("x",)))
    folder = _auto_eval(tmp_path, task.name)
    assert auto_eval_problem(folder) is None
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": model_service}
    FakeModelService.answer = (
        "Task Progress:\n- evidence: it tried\n- Task Progress: 7\n- Action Control: 12\nCreative Attempts: 2.5\n"
        "- Material Selection and Usage: not applicable\n"
    )
    result = evaluate_video(
        task, _sized_frames(tmp_path / "short", 45), None, enabled=True, env=env, needed=True, auto_eval_dir=folder
    )
    assert (result.status, result.rubric) == ("ok", "mcu"), result.reason
    assert result.task_progress == 7.0
    assert result.criteria == {"task_progress": 7.0, "action_control": 10.0, "creative_attempts": 2.5}  # clipped
    (request,) = FakeModelService.requests
    assert (request["model"], request["temperature"], request["top_p"], request["seed"]) == ("gpt-4o", 0, 1, 42)
    system, text, images = request["messages"]
    assert system == {"role": "system", "content": "You rate Minecraft videos. Answer '- Key: value'."}
    assert text["content"].startswith(f"Task: {task.name}") and f"how far {task.name} got" in text["content"]
    urls = [part["image_url"]["url"] for part in images["content"]]
    assert len(urls) == 3  # frames 0, 20, 40
    assert all(url.startswith("data:image/jpeg;base64,") for url in urls)
    first = Image.open(io.BytesIO(base64.b64decode(urls[0].split(",", 1)[1])))
    assert first.format == "JPEG" and first.getpixel((8, 8))[0] > 150  # RGB kept: red stays red

    FakeModelService.requests.clear()
    evaluate_video(
        task, _sized_frames(tmp_path / "long", 1300), None, enabled=True, env=env, needed=True, auto_eval_dir=folder
    )
    (request,) = FakeModelService.requests
    assert len(request["messages"][2]["content"]) == 22  # from 1,200 frames on, every 60th: 0..1260


def test_mcu_rubric_failures_are_loud(tmp_path: Path, model_service: str) -> None:
    from mcu_arms.contracts.rubric import auto_eval_problem

    task = _task(RewardEntry(event="craft_item", identity="a", objects=("x",)))
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": model_service}
    frames = _sized_frames(tmp_path / "frames", 5)
    no_criteria = evaluate_video(
        task, frames, None, enabled=True, env=env, needed=True, auto_eval_dir=_auto_eval(tmp_path, "another_task")
    )
    assert (no_criteria.status, no_criteria.rubric) == ("failed", "mcu") and "no criteria file" in no_criteria.reason
    assert FakeModelService.requests == []
    folder = _auto_eval(tmp_path / "second", task.name)
    FakeModelService.answer = "The agent did well. Score: 8"
    unparsed = evaluate_video(task, frames, None, enabled=True, env=env, needed=True, auto_eval_dir=folder)
    assert unparsed.status == "failed" and "Task Progress" in unparsed.reason and unparsed.task_progress is None
    off = evaluate_video(task, frames, None, enabled=False, env=env, needed=True, auto_eval_dir=folder)
    assert (off.status, off.rubric) == ("disabled", "mcu")
    assert "is not a directory" in auto_eval_problem(tmp_path / "missing")
    assert "prompt/single_rating_prompt.txt" in auto_eval_problem(folder / "criteria_files")


def test_a_skill_spanning_many_ticks_is_paid_per_tick_as_mcu_would() -> None:
    """Three pickups on three ticks pay three times whether one skill or three carried them; two on one tick pay once
    (MCU pays an entry at most once per tick)."""
    from mcu_arms.green.sims.mineflayer.backend import counter_ticks

    task = load_task(TASKS_ROOT / "mining_and_collecting" / "collect_wood.yaml")

    def score(steps: list[list[dict[str, dict[str, int]]]]) -> float:
        tracker = RewardTracker(task)
        for number, ticks in enumerate(steps):
            for counters in ticks:
                tracker.update(number, counters)
        return tracker.sim_reward

    pickups = [{"event": "pickup", "object": "oak_log", "n": 1, "tick": tick} for tick in (10, 31, 57)]
    three = {"pickup": {"oak_log": 3}}
    one_skill = [counter_ticks({}, pickups, three)]
    many_skills, before = [], {}
    for number, pickup in enumerate(pickups, start=1):
        after = {"pickup": {"oak_log": number}}
        many_skills.append(counter_ticks(before, [pickup], after))
        before = after
    assert score(one_skill) == score(many_skills) == 3.0
    assert score([[three]]) == 1.0, "what one step without ticks would have paid"
    same_tick = [{**pickup, "tick": 10} for pickup in pickups[:2]]
    assert score([counter_ticks({}, same_tick, {"pickup": {"oak_log": 2}})]) == 1.0
    missed = counter_ticks({}, pickups[:1], {"pickup": {"oak_log": 2}})
    assert missed[-1] == {"pickup": {"oak_log": 2}}, "a count the tick list missed still lands"


def test_inventory_counts_from_a_server_are_integers_and_odd_ones_are_counted() -> None:
    from collections import Counter

    from mcu_arms.green.sims.mineflayer.state import whole_counts

    quirks: Counter[str] = Counter()
    held = whole_counts({"oak_log": "10", "stick": 4.0, "dirt": "1.5", "sand": 3, "gravel": True, "clay": -2}, quirks)
    assert held == {"oak_log": 10, "stick": 4, "sand": 3}
    assert held["oak_log"] + 1 == 11, "never summed as text ('10' + '1')"
    assert quirks == {"server_quirk.count_converted": 2, "server_quirk.count_unreadable": 3}
