"""A watchdog on one flow's heartbeats: the trigger that watches, and the words the sensor reports with.

A single freshness check per DAG run sees an outage only when the run happens to start, so with a 1-minute
schedule and a 10-minute threshold detection could lag by the schedule on top of the threshold. The sensor
instead *watches* for most of the schedule interval, reading the newest replicated heartbeat every
``mirrorflow.heartbeats.poll.interval``; it finishes as soon as the heartbeat is older than the flow's
threshold (staleness is reported at most threshold + one poll after the last heartbeat was emitted), or,
still fresh (or WAITING: a new flow within ``mirrorflow.heartbeats.grace``), when its watch window ends.
Either way its output (XCom) is the freshness dict: ``verdict``, ``fresh``, ``waiting``, ``age_s``,
``threshold_s``, ``flow``, ``topic``, ``newest_ms``, ``checked_at_ms``, ``first_ms``, ``grace_s``.

A watch that ends without a verdict (the sensor's timeout, a deferral the triggerer never ran, a target
that never answered) fails with what was measured last: the heartbeat's age, when it was read and the
threshold, in the task log and the exception, and in the XCom ``failure`` for the ``alert`` task after it.

Deferred (the default in the heartbeats DAG), the watching happens in the triggerer, which costs no worker
slot for those 50 seconds a minute. The triggerer imports the trigger by its classpath from the installed
``mirrorflow_airflow`` package.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorflow.config import FlowConfig
from mirrorflow_airflow.hooks.config import MirrorflowHook

if TYPE_CHECKING:
    from mirrorflow.heartbeats import Freshness

#: One watcher at a time for the default 1-minute heartbeats schedule, with room for a run's start-up.
DEFAULT_WATCH = timedelta(seconds=50)
POLL_KEY = "mirrorflow.heartbeats.poll.interval"
#: XCom key under which a failed watch leaves its message (what it measured last) for the ``alert`` task.
FAILURE_XCOM = "failure"
#: A measurement taken by the task itself when the watch ended without a verdict: bounded, the task is failing.
LAST_CHECK_TIMEOUT_S = 10.0

_FIELDS = ("flow", "topic", "newest_ms", "age_s", "threshold_s", "checked_at_ms")


def heartbeats_module() -> ModuleType:
    """``mirrorflow.heartbeats``, imported when a check runs, not when a DAG file is parsed: it loads the
    Kafka client, which the DAG's shape does not need (parsing must stay cheap)."""
    from mirrorflow import heartbeats

    return heartbeats


def freshness_dict(fresh: Freshness) -> dict[str, Any]:
    """The sensor's output: the dataclass's fields plus its properties (which asdict leaves out)."""
    return {**asdict(fresh), "fresh": fresh.fresh, "waiting": fresh.waiting, "verdict": fresh.verdict}


def describe(freshness: Mapping[str, Any]) -> str:
    """One log line for a freshness dict (the same words as ``Freshness.describe``)."""
    fields = {k: freshness[k] for k in _FIELDS}
    extra = {k: freshness.get(k) for k in ("first_ms", "grace_s")}
    return heartbeats_module().Freshness(**fields, **extra).describe()


def is_stale(freshness: Mapping[str, Any]) -> bool:
    """The verdict that ends a watch early: neither fresh nor a new flow within its grace period."""
    return freshness.get("verdict", "fresh" if freshness.get("fresh") else "stale") == "stale"


def _clock(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def last_measured(freshness: Mapping[str, Any] | None, *, by: str = "", now_ms: int | None = None) -> str:
    """``last measured [by ...] at <time> (<n> s ago): <describe>``, or that nothing could be measured."""
    if not freshness or "checked_at_ms" not in freshness:
        return "nothing could be measured"
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    ago = max(0, now_ms - int(freshness["checked_at_ms"])) / 1000
    who = f" {by}" if by else ""
    return f"last measured{who} at {_clock(freshness['checked_at_ms'])} ({ago:.0f} s ago): {describe(freshness)}"


def watch_failure(flow: str, cause: str, last: Mapping[str, Any] | None, *, measured_now: bool = False) -> str:
    """The message of a watch that ended without a verdict: why, and what was measured last."""
    by = "by this task, after the watch ended" if measured_now else ""
    return f"freshness watch of {flow} ended without a verdict: {cause}; {last_measured(last, by=by)}"


def live_flow(config_file: str | Path, flow: str) -> FlowConfig:
    """The flow as a task sees it: the file plus the ``kafka_<alias>`` connections."""
    return MirrorflowHook(config_file).flow(flow)


class HeartbeatFreshnessTrigger(BaseTrigger):
    """Polls the flow's freshness in the triggerer until it is stale or the watch window ends.

    The Kafka read is blocking (confluent-kafka), so each check runs in a worker thread
    (``asyncio.to_thread``) and never stalls the triggerer's event loop, which other tasks' triggers share.
    A failed check (say, the target briefly unreachable) is logged and retried at the next poll; only a
    window that ends without any successful check produces an error event.
    """

    def __init__(
        self,
        *,
        config_file: str,
        flow: str,
        threshold_s: float,
        poll_s: float,
        watch_until: float,
    ) -> None:
        super().__init__()
        self.config_file = str(config_file)
        self.flow = flow
        self.threshold_s = float(threshold_s)
        self.poll_s = float(poll_s)
        self.watch_until = float(watch_until)
        self._flow_config: FlowConfig | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "mirrorflow_airflow.triggers.heartbeat_freshness.HeartbeatFreshnessTrigger",
            {
                "config_file": self.config_file,
                "flow": self.flow,
                "threshold_s": self.threshold_s,
                "poll_s": self.poll_s,
                "watch_until": self.watch_until,
            },
        )

    def _check(self) -> dict[str, Any]:
        if self._flow_config is None:  # one load per watch: connections do not change within a minute
            self._flow_config = live_flow(self.config_file, self.flow)
        return freshness_dict(heartbeats_module().check_freshness(self._flow_config, threshold_s=self.threshold_s))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        last_error: str | None = None
        last: dict[str, Any] | None = None  # the last successful measurement, for an error event
        while True:
            result: dict[str, Any] | None = None
            try:
                result = await asyncio.to_thread(self._check)
                last = result
            except Exception as exc:  # noqa: BLE001 - retried at the next poll; reported if the window ends so
                last_error = f"{type(exc).__name__}: {exc}"
                self.log.warning("freshness of %s not measured (retrying in %.0f s): %s", self.flow, self.poll_s, exc)
            now = time.time()
            if result is not None and (is_stale(result) or now >= self.watch_until):
                self.log.info("%s", describe(result))
                yield TriggerEvent(result)
                return
            if result is None and now >= self.watch_until:
                # A verdict from before the last failed checks would be out of date: report it, do not use it.
                yield TriggerEvent({"flow": self.flow, "error": last_error, "last": last})
                return
            # The last check lands exactly at the end of the window, so the verdict is the window's last word.
            await asyncio.sleep(max(0.0, min(self.poll_s, self.watch_until - now)))
