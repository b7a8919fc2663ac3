"""How far behind is the copy, in records and in seconds, and is anything wrong: one status model.

Computed live from the clusters (stored progress on the target, end offsets and record timestamps on the
source, heartbeats, checkpoints and the failover log on the target), never from a run's memory, so the
CLI, the DAGs and any page show the same numbers whoever computes them and whenever.

Definitions (docs/guides/monitoring.md says the same):

- ``copied_position``: the next source offset to copy: the stored progress (MM2's last copied offset) + 1,
  or the partition's log start when nothing is stored.
- ``end_offset``: the source partition's end: its high watermark, or its last stable offset when the flow
  reads ``read_committed`` (records of open transactions cannot be copied yet).
- ``lag_records``: ``end_offset - max(copied_position, log start)``, never below 0: what can still be copied.
- ``lag_seconds``: the age (now minus its timestamp) of the oldest source record not yet copied, that is
  the first record at or after ``copied_position``; 0 when caught up. It says how long the oldest record
  the target is missing has been waiting: what a consumer that failed over now would lack, in time.
- ``lost_records``: records retention deleted from the source before they were copied (the log start is past
  ``copied_position``); the next run reports them as a loss event and goes on from the log start.
- ``progress_written_ms``: when the copy last moved the partition (the stored progress record's timestamp).
- ``last_copied_timestamp_ms``: the timestamp of the record at ``copied_position - 1``, read in the same fetch
  as the oldest record not copied, so for a partition that lags only (None when caught up: a width of 10,000
  caught-up partitions would cost 10,000 reads for it; ``progress_written_ms`` says when it last moved).

Per family, ``last_run`` and per flow ``runs``: the runs' own summaries, read back from their lock release
records on the target (``replication/history.py``: start, duration, records, result, lag at the end), for the
last :data:`HISTORY_HOURS` hours; per partition, ``loss_events``: the data losses those runs reported.

Per flow, ``groups``: the consumer groups with checkpoints on the target, and how many of their
checkpointed partitions translate exactly (the checkpoint holds the exact translation the copied runs give:
a consumer that fails over re-reads nothing); the others name their re-reads (see ``checkpoints``).

Cheap on purpose, and no dearer per partition as a flow widens: one discovery, one ListOffsets pass each for the
starts and the ends of every partition (``kafka.offsets``: its calls, of many partitions each, sent together),
one consumer reading the progress topic, one consumer fetching, only for the partitions that lag, the last
copied record and the oldest one not copied (for their timestamps), and the flow-level checks in parallel
threads; no request per topic or per partition. A cluster that does not answer is found first, by the same
check the other commands run (``preflight``), so the parts needing it are skipped with an ``error`` naming it:
no hang, no crash.

For a wide flow (thousands of partitions) the model is also summarised per topic (:class:`TopicSummary`:
partitions, how many behind or failed, lag in records, max lag in seconds), worst first, and
:class:`StatusPages` filters and pages both lists for the Replication page.

Three rooms: ``model`` (the dataclasses, their summaries and pages), ``collect`` (measuring it from the clusters)
and ``render`` (text and JSON).
"""

from __future__ import annotations

from ..kafka.timestamps import fetch_timestamps
from .collect import flow_status, groups_status, partition_status, summarize_groups
from .model import (
    BEHIND,
    CAUGHT_UP,
    ERROR,
    LOST,
    NO_PROGRESS,
    FamilyStatus,
    FlowStatus,
    PartitionStatus,
    StatusPages,
    TopicSummary,
    page_of,
    summarize_topics,
    worst_first,
)
from .render import render_json, render_text

__all__ = [
    "BEHIND",
    "CAUGHT_UP",
    "ERROR",
    "LOST",
    "NO_PROGRESS",
    "FamilyStatus",
    "FlowStatus",
    "PartitionStatus",
    "StatusPages",
    "TopicSummary",
    "fetch_timestamps",
    "flow_status",
    "groups_status",
    "page_of",
    "partition_status",
    "render_json",
    "render_text",
    "summarize_groups",
    "summarize_topics",
    "worst_first",
]
