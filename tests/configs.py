"""mm2.properties for integration tests: one flow primary->backup with one family of a test's own topics.

Why one writer: the mirror, verify, end-to-end and Spark-cluster tests all need the same file (a family of the
topics under the test's prefix, replication factor 1 for single-broker clusters, syncs on the target) and differ
only in a line or two; four copies of it drifted apart once already.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_family_config(
    path: Path, clusters: Any, prefix: str, extra: str = "", *, family: str = "main", primary: str | None = None
) -> Path:
    """Write the file to ``path``: topics ``<prefix>.*`` in family ``family``, ``extra`` lines appended.

    ``primary`` replaces the primary cluster's bootstrap (a dead address, say).
    """
    path.write_text(
        "clusters = primary, backup\n"
        f"primary.bootstrap.servers = {primary or clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\n"
        "primary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}\\\\..*\n"
        f"primary->backup.mirrorflow.families = {family}\n"
        f"primary->backup.mirrorflow.family.{family}.topics = {prefix}\\\\..*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n" + extra
    )
    return path
