"""A planned failover's last copy: replicate every family of the flow until nothing is left, then checkpoint.

Runs in the calling process (no Spark: what is left is small when producers have stopped). If lag does
not reach zero in time, the failover stops with a message saying how much is left, because moving the
groups now would leave their newest records behind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..checkpoints.emit import emit_checkpoints
from ..config.model import MirrorConfig
from ..replication.executor import LocalExecutor
from ..replication.run import replicate
from .plan import FailoverError


@dataclass
class Drained:
    rounds: int
    records: int
    lag: int
    checkpoints: int
    seconds: float


def drain(config: MirrorConfig, flow_name: str, *, timeout: float = 300.0) -> Drained:
    """Copy until lag is 0 for every family (each family's lock held in turn), then emit checkpoints."""
    source, _, target = flow_name.partition("->")
    flow = config.flow(source, target)
    started = time.monotonic()
    rounds = records = 0
    while True:
        rounds += 1
        lag = 0
        for family in flow.families:
            report = replicate(config, flow_name, family.name, LocalExecutor())
            if not report.ok:
                raise FailoverError(f"the final copy of {flow_name} family {family.name} failed: {report.errors}")
            records += report.records
            lag += report.lag
        if lag == 0:
            break
        if time.monotonic() - started > timeout:
            raise FailoverError(
                f"{flow_name} still lags by {lag} record(s) after {timeout:.0f} s: stop the producers on {source} "
                "(a planned failover moves consumers after the last record), or use mode 'disaster'"
            )
    emitted = emit_checkpoints(flow).emitted
    return Drained(rounds, records, 0, emitted, round(time.monotonic() - started, 3))


__all__ = ["Drained", "drain"]
