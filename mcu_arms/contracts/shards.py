"""AgentBeats' sharded assessments: one category split over up to `num_shards` requests that together run it once.

The category's instances are its runnable tasks at the request's seed, in the category's order, cut to the first
`num_instances` when asked; instance i belongs to shard i mod num_shards. The partition depends on nothing but the
request, so every shard of one assessment computes the same one, and the shards' results together are the one-shard
result (report/agentbeats.py merges them). Only pydantic here: light to import.
"""

from __future__ import annotations

from pydantic import BaseModel


class ShardInfo(BaseModel):
    """Which part of the category a result holds, as the request asked (stated in every sharded result)."""

    shard_index: int
    num_shards: int
    num_instances: int | None = None  # as requested; None: every instance
    instances: list[str]  # this shard's tasks, in the order they ran
    all_instances: list[str]  # every shard's, in the order partitioned: what the merged result holds


def shard_of(instances: list[str], shard_index: int, num_shards: int, num_instances: int | None) -> ShardInfo:
    """The instances of shard `shard_index`: the first `num_instances` dealt round-robin over `num_shards`."""
    chosen = instances[:num_instances] if num_instances is not None else list(instances)
    return ShardInfo(
        shard_index=shard_index,
        num_shards=num_shards,
        num_instances=num_instances,
        instances=chosen[shard_index::num_shards],
        all_instances=chosen,
    )
