"""Failback: once the source is back, copy what was produced on the target meanwhile, and move the groups home.

For flow ``primary->backup`` after a failover, consumers ran on ``backup``: on the remote topics
(``primary.orders``) and on topics producers wrote to ``backup`` during the outage (``orders``). A failback

1. copies ``backup``'s own topics to ``primary`` along the reverse pair ``backup->primary`` (even if the file
   does not enable it for everyday mirroring): ``orders`` on backup becomes ``backup.orders`` on primary;
2. translates every group's offsets on ``backup`` back to ``primary``: an offset on ``primary.orders`` maps to
   ``orders`` through the inverse of the forward copy's runs (exact; in a range MM2 copied, one past the
   closest offset sync before it), an offset on ``orders`` maps to
   ``backup.orders`` through the reverse copy, taking the best valid answer with the reverse pair's
   checkpoints on ``primary`` (``checkpoints.best.choose``; exact where contiguous);
3. commits them on ``primary`` (never backwards; groups active on primary refused unless force).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from .. import preflight
from ..checkpoints.emit import committed_offsets, list_groups, read_best, read_translator
from ..config.model import FlowConfig, MirrorConfig
from ..kafka import clients
from ..replication.executor import LocalExecutor
from ..replication.run import replicate
from .plan import FailoverError, FailoverPlan, Wanted, group_moves


def reverse_flow(config: MirrorConfig, flow: FlowConfig) -> FlowConfig:
    try:
        return config.flow(flow.target, flow.source)
    except KeyError:
        raise FailoverError(f"no pair {flow.target}->{flow.source} in {config.path}: failback needs it") from None


def copy_back(config: MirrorConfig, flow: FlowConfig, *, timeout: float = 300.0) -> int:
    """Replicate the target's own topics to the source until no lag is left; the records copied."""
    back = reverse_flow(config, flow)
    started = time.monotonic()
    copied = 0
    while True:
        report = replicate(config, back.name, None, LocalExecutor(), require_enabled=False)
        if not report.ok:
            raise FailoverError(f"copying {back.name} failed: {report.errors}")
        copied += report.records
        if report.lag == 0:
            return copied
        if time.monotonic() - started > timeout:
            raise FailoverError(f"{back.name} still lags by {report.lag} record(s) after {timeout:.0f} s")


def plan_failback(
    config: MirrorConfig,
    flow: FlowConfig,
    *,
    groups: str | None = None,
    force: bool = False,
    dry_run: bool = True,
    timeout: float = 30.0,
) -> FailoverPlan:
    """Where each group of the target resumes on the source (see the module docstring); writes nothing."""
    started = time.monotonic()
    back = reverse_flow(config, flow)
    try:
        preflight.check_clusters(flow, timeout=min(timeout, 15.0))
    except preflight.ClusterUnreachableError as exc:
        raise FailoverError(f"failback needs both clusters: {exc}") from None
    plan = FailoverPlan(flow.name, "failback", dry_run, datetime.now(UTC).isoformat(timespec="seconds"), True, None)
    forward_runs, reverse = read_translator(flow, timeout), read_best(back, timeout)
    only = re.compile(groups) if groups else None
    target_admin = clients.admin(flow, "target")
    names = [
        g
        for g in list_groups(target_admin, timeout)
        if flow.group_filter.should_replicate_group(g) and (only is None or only.fullmatch(g))
    ]
    offsets = committed_offsets(target_admin, names, timeout)
    home: Wanted = {}
    for group, tps in offsets.items():
        for (topic, partition), (offset, _meta) in tps.items():
            if flow.policy.topic_source(topic) == flow.source:  # primary.orders -> orders
                original = flow.policy.upstream_topic(topic) or topic
                # Its upstream field holds the offset here; exact through the copied runs, else from the syncs.
                home.setdefault(group, {})[(original, partition)] = forward_runs.translate_back(
                    original, partition, offset
                )
            elif back.should_replicate_topic(topic):  # orders on backup -> backup.orders on primary
                remote = back.policy.format_remote_topic(back.source, topic)
                home.setdefault(group, {})[(remote, partition)] = reverse.translate(
                    group, topic, remote, partition, offset
                )
    if not home:
        plan.notes.append(f"no group on {flow.target} has offsets to move back")
    plan.groups = group_moves(back, home, force=force, timeout=timeout)
    plan.seconds = round(time.monotonic() - started, 3)
    return plan


__all__ = ["copy_back", "plan_failback", "reverse_flow"]
