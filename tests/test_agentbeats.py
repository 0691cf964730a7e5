"""AgentBeats: `compare --to agentbeats=DIR` writes a leaderboard submission, the green runs a category in shards, and
`merge-shards` puts the shards together as the leaderboard's summary does.

The leaderboard's shapes are tests/fixtures/agentbeats (an existing submission's three files, written from the
project's notes on the leaderboard repository's published files). The campaign is tests/fixtures/agentbeats_campaign:
the real reports, scenarios and evaluations of `mcu-arms run` of a one-arm campaign (the scripted agent, seeds 0, 1
and 2, 40 steps on the embedded simulator, an API key in the arm's env).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import statistics
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cli_support import FIXED_NOW, invoke
from purples import SCRIPT, ScriptedPurple, build_test_purple
from server_procs import running_app

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.evaluation import evaluation_from_artifact, read_evaluation
from mcu_arms.contracts.run_report import read_report
from mcu_arms.contracts.shards import shard_of
from mcu_arms.contracts.wire import EvalConfig
from mcu_arms.report.agentbeats import ShardSubmission, export_arms, merge_shards

FIXTURES = Path(__file__).parent / "fixtures"
SHAPES = FIXTURES / "agentbeats"
CAMPAIGN_FIXTURE = FIXTURES / "agentbeats_campaign"
ARM = "scripted_arm"
SEEDS = [0, 1, 2]
SECRET = "sk-agentbeatstestsecret0123456789"  # the arm's AGENTBEATS_TEST_API_KEY
IDS = ("--agentbeats-id", "agent=019bf2a1-agent", "--agentbeats-id", "green=019bf29c-green")
# The video criteria: upstream's green always grades them; ours leaves them null when video evaluation is off.
VIDEO_FIELDS = {
    "action_control",
    "error_recognition_and_correction",
    "creative_attempts",
    "task_completion_efficiency",
    "material_selection_and_usage",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(CAMPAIGN_FIXTURE, copy)
    return copy


def export(project: Path, *extra: str):
    return invoke(project, {}, "compare", "campaigns/three.toml", "--to", "agentbeats=submission", *IDS, *extra)


# Tables keyed by their own names (a task, an environment variable, a component run from an image): each of our
# entries has the shape of theirs.
KEYED_BY_NAME = ("task_metrics", "env", "image_digests")


def _same_shape(ours: Any, theirs: Any, where: str) -> None:
    """Every key of the leaderboard's file is in ours, at the same place, with a value of the same JSON type (the
    video criteria may be null: graded by no one here)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        if where.endswith(KEYED_BY_NAME):
            (model, *_) = theirs.values()
            for name, entry in ours.items():
                _same_shape(entry, model, f"{where}.{name}")
            return
        for key, value in theirs.items():
            assert key in ours, f"{where}.{key} is missing"
            _same_shape(ours[key], value, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and ours, where
        for index, entry in enumerate(ours):
            _same_shape(entry, theirs[0], f"{where}[{index}]")
    elif isinstance(theirs, float | int) and not isinstance(theirs, bool):
        leaf = where.rsplit(".", 1)[-1].removeprefix("avg_")
        allowed_null = leaf in VIDEO_FIELDS
        assert (ours is None and allowed_null) or (isinstance(ours, float | int) and not isinstance(ours, bool)), (
            f"{where}: {ours!r}"
        )
    else:
        assert type(ours) is type(theirs), f"{where}: {ours!r} is not a {type(theirs).__name__}"


def test_the_export_has_the_leaderboards_shapes_field_for_field(project: Path) -> None:
    outcome = export(project)
    assert outcome.exit_code in (0, 1), outcome.out + outcome.err  # one arm: nothing to compare it with
    submission = project / "submission"
    results = json.loads((submission / "results" / f"{ARM}.json").read_text())
    scenario = tomllib.loads((submission / "submissions" / f"{ARM}.toml").read_text())
    provenance = json.loads((submission / "submissions" / f"{ARM}.provenance.json").read_text())

    _same_shape(results, json.loads((SHAPES / "results" / "example.json").read_text()), "results")
    _same_shape(scenario, tomllib.loads((SHAPES / "submissions" / "example.toml").read_text()), "scenario")
    _same_shape(provenance, json.loads((SHAPES / "submissions" / "example.provenance.json").read_text()), "provenance")

    assert results["participants"] == {"agent": "019bf2a1-agent"}
    assert [entry["mcu_arms"]["seed"] for entry in results["results"]] == SEEDS  # one upstream result per seed
    assert scenario["green_agent"]["agentbeats_id"] == "019bf29c-green"
    (participant,) = scenario["participants"]
    assert participant["name"] == "agent" and participant["agentbeats_id"] == "019bf2a1-agent"
    assert participant["env"] == {"AGENTBEATS_TEST_API_KEY": "${AGENTBEATS_TEST_API_KEY}"}
    assert scenario["config"]["task_category"] == "mine_diamond_from_scratch"
    assert scenario["config"]["max_steps"] == 40 and "output_dir" not in scenario["config"]
    assert provenance["timestamp"] == FIXED_NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", provenance["timestamp"])
    assert provenance["image_digests"] == {}  # nothing ran from an image: the code is named under mcu_arms
    ours = provenance["mcu_arms"]
    report = read_report(project / "output" / ARM / "episode_001" / "result.json")
    assert ours["fingerprint"] == report.fingerprint and ours["arm"] == ARM
    assert ours["tool"]["version"] == report.provenance.mcu_arms_version
    assert ours["tool"]["git_sha"] == report.provenance.git_sha
    assert ours["simulator"]["name"] == "embedded" and ours["simulator"]["version"]
    assert [episode["seed"] for episode in ours["episodes"]] == SEEDS
    written = "".join(path.read_text() for path in submission.rglob("*") if path.is_file())
    assert SECRET not in written
    assert "submissions/scripted_arm.toml" in outcome.err


def test_upstreams_fields_hold_upstreams_meanings(project: Path) -> None:
    assert export(project).exit_code in (0, 1)
    results = json.loads((project / "submission" / "results" / f"{ARM}.json").read_text())
    evaluations = {}
    for number in (1, 2, 3):
        evaluation = read_evaluation(project / "output" / ARM / f"episode_{number:03d}" / "green" / "evaluation.json")
        evaluations[evaluation.seed] = evaluation
    totals = []
    for entry in results["results"]:
        seed = entry["mcu_arms"]["seed"]
        (category,) = evaluations[seed].results
        # exactly what the green returned for that seed, not a copy shaped by hand
        assert entry == evaluations[seed].artifact_data()
        metrics = entry["task_metrics"]
        assert entry["num_tasks"] == len(metrics)
        assert entry["total_max_score"] == pytest.approx(sum(m["max_score"] for m in metrics.values()))
        assert entry["total_score"] == pytest.approx(sum(m["score"] for m in metrics.values()))
        for name, task in metrics.items():
            assert task["sim_score"] == category.task_metrics[name].sim_reward  # the raw reward sum, upstream's
            assert task["score"] <= task["max_score"]
        totals.append(entry["total_score"])
    replicates = results["mcu_arms"]["replicates"]["mine_diamond_from_scratch"]
    assert replicates["n"] == 3 and replicates["seeds"] == SEEDS
    assert replicates["total_score"]["mean"] == pytest.approx(statistics.fmean(totals))
    assert replicates["total_score"]["values"] == totals
    assert "ci" in replicates["total_score"]


def test_a_submission_is_never_written_over(project: Path) -> None:
    assert export(project).exit_code in (0, 1)
    results = project / "submission" / "results" / f"{ARM}.json"
    before = results.read_bytes()
    again = export(project)
    assert again.exit_code == 2 and "never written over" in again.err
    assert results.read_bytes() == before


def _tampered_copy(project: Path, number: int, **changes: Any) -> Path:
    """Episode `number` copied as a new episode of the arm, its report changed."""
    source = project / "output" / ARM / f"episode_{number:03d}"
    target = project / "output" / ARM / "episode_009"
    shutil.copytree(source, target)
    data = json.loads((target / "result.json").read_text())
    data.update(changes, episode=9)
    (target / "result.json").write_text(json.dumps(data))
    return target


def test_episodes_of_two_fingerprints_are_refused(project: Path) -> None:
    arm_dir = project / "output" / ARM
    other = _tampered_copy(project, 3, fingerprint="v2:0000000000000000")
    with pytest.raises(UserError, match="same fingerprint") as refused:
        export_arms({ARM: [arm_dir / "episode_001", other]}, project / "submission", {}, FIXED_NOW)
    assert "v2:0000000000000000" in refused.value.message
    assert not (project / "submission").exists()


def test_an_unfinished_episode_is_refused(project: Path) -> None:
    arm_dir = project / "output" / ARM
    failed = _tampered_copy(project, 2, status="failed")
    with pytest.raises(UserError, match="failed, not finished"):
        export_arms({ARM: [arm_dir / "episode_001", failed]}, project / "submission", {}, FIXED_NOW)
    assert not (project / "submission").exists()


def test_agentbeats_ids_need_the_agentbeats_destination(project: Path) -> None:
    outcome = invoke(project, {}, "compare", "campaigns/three.toml", "--agentbeats-id", "agent=x")
    assert outcome.exit_code == 2 and "--to agentbeats=DIR" in outcome.err
    bad = invoke(project, {}, "compare", "campaigns/three.toml", "--to", "agentbeats=out", "--agentbeats-id", "judge=x")
    assert bad.exit_code == 2 and "green=ID, agent=ID" in bad.err


# Shards.


def test_the_partition_deals_every_instance_to_exactly_one_shard() -> None:
    names = [f"task_{index}" for index in range(7)]
    shards = [shard_of(names, index, 4, None) for index in range(4)]
    assert sorted(name for shard in shards for name in shard.instances) == sorted(names)
    assert shards[1].instances == ["task_1", "task_5"] and shards[1].all_instances == names
    assert shard_of(names, 0, 1, 3).instances == names[:3]
    assert shard_of(names, 3, 4, 3).instances == []


def test_a_shard_index_beyond_the_shards_is_a_bad_request() -> None:
    with pytest.raises(ValueError, match="shard_index 4 is not below num_shards 4"):
        EvalConfig.model_validate({"task_category": "crafting", "shard_index": 4, "num_shards": 4})
    assert EvalConfig.model_validate({"task_category": "crafting", "num_shards": 4}).ignored_keys() == []


# What differs between two runs of one instance however it is run: when and how fast, and where its files are.
VOLATILE = {
    "agent_latency",
    "sim_step_ms_mean",
    "duration_s",
    "started_at",
    "finished_at",
    "steps_log",
    "frames_dir",
    "init",
}


def _stable(data: dict[str, Any]) -> str:
    """A result's task metrics as our model reads them (the wire carries integers as doubles, in any key order),
    without what differs between two runs of one instance: the text compared bit for bit."""
    evaluation = evaluation_from_artifact(data)
    assert evaluation is not None
    (category,) = evaluation.results
    return json.dumps(
        {name: metrics.model_dump(mode="json", exclude=VOLATILE) for name, metrics in category.task_metrics.items()},
        sort_keys=True,
    )


async def _evaluate(green_url: str, request: dict[str, Any]) -> dict[str, Any]:
    from a2a.helpers import get_data_parts
    from a2a.types import Message, Part, Role, SendMessageRequest

    from mcu_arms.a2a_client import open_client

    message = Message(role=Role.ROLE_USER, parts=[Part(text=json.dumps(request))], message_id="m1")
    found: list[dict[str, Any]] = []
    async with open_client(green_url, None, streaming=True) as client:
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.WhichOneof("payload") == "artifact_update":
                found += get_data_parts(event.artifact_update.artifact.parts)
    (data,) = found
    return data


CATEGORY = "mining_and_collecting"  # 4 tasks run on the embedded simulator
INSTANCES = 3  # of them: the fourth shard runs none


@pytest.mark.slow
def test_four_shards_merge_to_the_one_shard_result_bit_for_bit(tmp_path: Path) -> None:
    from mcu_arms.green import server as green_server

    purple = ScriptedPurple(SCRIPT)

    def request(purple_url: str, name: str, **shard: int) -> dict[str, Any]:
        config = {
            "task_category": CATEGORY,
            "simulator": "embedded",
            "max_steps": 3,
            "step_timeout": 5.0,
            "save_frames": False,
            "num_instances": INSTANCES,
            "output_dir": str(tmp_path / name),
            **shard,
        }
        return {"participants": {"agent": purple_url}, "config": config}

    async def run_all(green_url: str, purple_url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        whole = await _evaluate(green_url, request(purple_url, "whole"))
        shards = [
            await _evaluate(green_url, request(purple_url, f"shard_{index}", shard_index=index, num_shards=4))
            for index in range(4)
        ]
        return whole, shards

    with (
        running_app(lambda url: build_test_purple(purple, url)) as purple_url,
        running_app(lambda url: green_server.build_green_app(url, output_root=tmp_path)) as green_url,
    ):
        whole, shards = asyncio.run(asyncio.wait_for(run_all(green_url, purple_url), timeout=300))

    assert whole["num_tasks"] == INSTANCES
    stated = [shard["mcu_arms"]["shard"] for shard in shards]
    assert [s["shard_index"] for s in stated] == [0, 1, 2, 3]
    assert sum(len(s["instances"]) for s in stated) == INSTANCES
    # the wire's data part keeps no key order; the green's file does
    (on_disk,) = read_evaluation(tmp_path / "whole" / "evaluation.json").results
    assert all(s["all_instances"] == list(on_disk.task_metrics) for s in stated)

    participants = {"agent": "019bf2a1-agent"}
    submissions = [
        ShardSubmission(source=f"shard_{index}", results={"participants": participants, "results": [shard]})
        for index, shard in enumerate(shards)
    ]
    merged = merge_shards(list(reversed(submissions)))
    assert merged.status == "completed" and merged.participants == participants
    (result,) = merged.results
    assert list(result["task_metrics"]) == list(on_disk.task_metrics)  # the one-shard order
    assert _stable(result) == _stable(whole)
    for key in ("num_tasks", "total_score", "total_max_score", "scored_tasks", "upstream_total_score"):
        assert result[key] == whole[key], key

    assert merge_shards(submissions[:3]).status == "partial"
    differing = submissions[1].model_copy(update={"provenance": {"image_digests": {"agent": "sha256:other"}}})
    with pytest.raises(UserError, match="provenance differs"):
        merge_shards([submissions[0], differing])

    # the same through the command line, from shard files as `mcu-arms evaluate` saves them
    files = []
    for index, shard in enumerate(shards):
        path = tmp_path / f"shard_{index}.json"
        path.write_text(json.dumps(shard))
        files.append(str(path))
    outcome = invoke(tmp_path, {}, "merge-shards", *files, "--agentbeats-id", "agent=019bf2a1-agent")
    assert outcome.exit_code == 0, outcome.err
    printed = json.loads(outcome.out)
    assert printed["status"] == "completed" and printed["participants"] == participants
    assert _stable(printed["results"][0]) == _stable(whole)
    partial = invoke(tmp_path, {}, "merge-shards", *files[:2])
    assert partial.exit_code == 1 and json.loads(partial.out)["status"] == "partial"


def _shard_dir(root: Path, name: str, evaluation_file: Path | None, digest: str = "sha256:aa") -> Path:
    """A shard as the leaderboard template's workflow leaves it; without an evaluation, a shard whose job failed."""
    directory = root / name
    directory.mkdir()
    if evaluation_file is not None:
        data = read_evaluation(evaluation_file).artifact_data()
        results = {"participants": {"agent": "019bf2a1-agent"}, "results": [data]}
        (directory / "results.json").write_text(json.dumps(results))
        provenance = {"image_digests": {"agent": digest}, "timestamp": f"2026-01-28T08:30:5{len(name) % 10}Z"}
        (directory / "provenance.json").write_text(json.dumps(provenance))
    return directory


def test_merge_reads_shard_directories_and_a_failed_shard_makes_it_partial(project: Path, tmp_path: Path) -> None:
    evaluation = project / "output" / ARM / "episode_001" / "green" / "evaluation.json"
    done = _shard_dir(tmp_path, "shard_0", evaluation)
    failed = _shard_dir(tmp_path, "shard_1", None)
    alone = invoke(tmp_path, {}, "merge-shards", str(done), "--output", "merged.json")
    assert alone.exit_code == 0, alone.err
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["status"] == "completed" and merged["participants"] == {"agent": "019bf2a1-agent"}
    (category,) = read_evaluation(evaluation).results
    assert merged["results"][0]["task_metrics"].keys() == category.task_metrics.keys()
    assert merged["results"][0]["total_score"] == category.total_score

    with_failed = invoke(tmp_path, {}, "merge-shards", str(done), str(failed))
    assert with_failed.exit_code == 1 and json.loads(with_failed.out)["status"] == "partial"
    nothing = invoke(tmp_path, {}, "merge-shards", str(failed))
    assert nothing.exit_code == 1 and json.loads(nothing.out)["status"] == "failed"

    other = _shard_dir(tmp_path, "shard_2", evaluation, digest="sha256:bb")
    refused = invoke(tmp_path, {}, "merge-shards", str(done), str(other))
    assert refused.exit_code == 2 and "provenance differs" in refused.err
    again = invoke(tmp_path, {}, "merge-shards", str(done), "--output", "merged.json")
    assert again.exit_code == 2 and "never written over" in again.err


def test_an_unscored_task_is_said_since_total_score_then_means_less_than_upstreams(project: Path) -> None:
    arm_dir = project / "output" / ARM
    path = arm_dir / "episode_002" / "green" / "evaluation.json"
    data = json.loads(path.read_text())
    category = data["results"][0]
    task = next(iter(category["task_metrics"]))
    category["task_metrics"][task].update(score=None, scored=False)
    category["unscored_tasks"] = [task]
    path.write_text(json.dumps(data))
    dirs = [arm_dir / f"episode_{number:03d}" for number in (1, 2, 3)]
    (submission,) = export_arms({ARM: dirs}, project / "submission", {"agent": "a", "green": "g"}, FIXED_NOW)
    assert submission.warnings == [
        f"seed 1: mine_diamond_from_scratch has unscored tasks ({task}): its total_score leaves them out, where "
        "upstream's green counts them as 0 (that total is its upstream_total_score)"
    ]
