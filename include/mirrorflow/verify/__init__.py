"""Copy verification: prove the target holds exactly the source's committed records, before anyone fails over.

For every partition of the selected topics, the source's committed records are compared with their copies on
the target, record by record and in order (key, value, headers, timestamp), over the range both hold: from the
source's log start (or a requested start) up to the copied position. The copied runs in the offset syncs say
which source offset became which target offset (``mapping``); partitions are cut into chunks at those points
(``plan``) and each chunk is one task on the copy's executor (``engine``) that reads both sides with
confluent-kafka and returns counts, an order-sensitive digest per side and the first difference it saw
(``chunk``, ``compare``); the driver compares the digests and renders the verdicts (``report``).
"""

from __future__ import annotations

from .flow import verify_flow
from .report import VerifyReport, render_text

__all__ = ["VerifyReport", "render_text", "verify_flow"]
