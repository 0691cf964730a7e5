"""What the episode timelines draw instead of one point per step per series, so a 12,000-step episode stays fast.

Three encodings, chosen by the kind of series (the page draws each as its encoding says):

* `change_points`, for step-valued series (vitals, item counts, cumulative reward): the first step, every step where
  the value changes, and the last step, drawn as a step line. Lossless: the value at any step is the value of the
  last kept point at or before it. Past MAX_CHANGE_POINTS changes it falls back to min/max buckets.
* `minmax_buckets`, for noisy series (agent and simulator latency): the steps split into LATENCY_BUCKETS equal
  ranges, and per range the (step, value) of its minimum and of its maximum, in step order. Every spike survives (a
  600 s timeout on one step is still drawn), which averaging or every-k-th sampling would hide; at ~1,000 buckets a
  bucket is about a pixel of the chart. A series of at most 2 * LATENCY_BUCKETS steps is kept whole (`raw`): one
  point per step.
* `events` for sparse steps (noops by cause, deaths): the steps themselves, up to MAX_EVENTS; past that per-bucket
  counts (`bucket_counts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

LATENCY_BUCKETS = 1000
MAX_CHANGE_POINTS = 4000
MAX_EVENTS = 5000
EVENT_BUCKETS = 1000

SeriesEncoding = Literal["raw", "change_points", "minmax_buckets"]
EventEncoding = Literal["events", "bucket_counts"]


class Series(BaseModel):
    encoding: SeriesEncoding
    x: list[int]
    y: list[float]
    steps: int  # how many steps the series covers


class Events(BaseModel):
    encoding: EventEncoding
    x: list[int]  # the steps (events), or each bucket's first step (bucket_counts)
    counts: list[int] | None = None  # bucket_counts only
    total: int


def change_points(steps: Sequence[int], values: Sequence[float]) -> Series:
    xs: list[int] = []
    ys: list[float] = []
    for index, (step, value) in enumerate(zip(steps, values, strict=True)):
        if index == 0 or value != ys[-1]:
            xs.append(step)
            ys.append(value)
    if steps and xs[-1] != steps[-1]:
        xs.append(steps[-1])
        ys.append(values[-1])
    if len(xs) > MAX_CHANGE_POINTS:
        return minmax_buckets(steps, values, MAX_CHANGE_POINTS // 2)
    return Series(encoding="change_points", x=xs, y=ys, steps=len(steps))


def minmax_buckets(steps: Sequence[int], values: Sequence[float], buckets: int = LATENCY_BUCKETS) -> Series:
    count = len(steps)
    if count <= 2 * buckets:
        return Series(encoding="raw", x=list(steps), y=list(values), steps=count)
    xs: list[int] = []
    ys: list[float] = []
    for bucket in range(buckets):
        low, high = bucket * count // buckets, (bucket + 1) * count // buckets
        lowest = min(range(low, high), key=values.__getitem__)
        highest = max(range(low, high), key=values.__getitem__)
        for index in sorted({lowest, highest}):
            xs.append(steps[index])
            ys.append(values[index])
    return Series(encoding="minmax_buckets", x=xs, y=ys, steps=count)


def events(steps: Sequence[int], total_steps: int) -> Events:
    if len(steps) <= MAX_EVENTS:
        return Events(encoding="events", x=list(steps), total=len(steps))
    counts = [0] * EVENT_BUCKETS
    for step in steps:
        counts[min(EVENT_BUCKETS - 1, step * EVENT_BUCKETS // max(total_steps, 1))] += 1
    width = total_steps / EVENT_BUCKETS
    return Events(
        encoding="bucket_counts", x=[round(b * width) for b in range(EVENT_BUCKETS)], counts=counts, total=len(steps)
    )
