"""Copy verification: prove the target holds exactly the source's committed records, before anyone fails over.

For every partition of the selected topics, the source's committed records are compared with their copies on
the target, record by record and in order (key, value, headers, timestamp), over the range both hold: from the
source's log start (or a requested start) up to the copied position; on the target, from its log start when the
whole source partition is verified from offset 0, so that no record can hide before the first known copy. The
copied runs in the offset syncs say which source offset became which target offset (``mapping``); partitions are
cut into chunks at those points (``plan``). Chunks run as Spark tasks on the copy's executor, a share of them per
task, or in this process (``engine``); each share is read by one consumer per cluster for many chunks at once,
a partition's consecutive chunks on from one into the next (``reader``), which returns counts, an order-sensitive
digest per side and, for a chunk whose digests differ, its first difference (``chunk``, ``compare``); the driver
renders the verdicts (``report``).
"""

from __future__ import annotations

from .flow import verify_flow
from .report import VerifyReport, render_text

__all__ = ["VerifyReport", "render_text", "verify_flow"]
