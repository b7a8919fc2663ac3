"""A watchdog on one flow's heartbeats: a sensor (poke, reschedule or deferrable) and its trigger.

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
slot for those 50 seconds a minute. The triggerer imports the trigger by its classpath; the plugins folder
is on ``sys.path`` in every Airflow process, so ``mirrorflow_airflow.freshness`` is importable there.
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

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, TaskDeferralError
from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorflow.config import FlowConfig, load_config
from mirrorflow.config.location import config_path

from .hooks import MirrorflowHook

if TYPE_CHECKING:
    from airflow.sdk import Context

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
    Kafka client, which the DAG's shape does not need (issue 12: parsing must stay cheap)."""
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


def _live_flow(config_file: str | Path, flow: str) -> FlowConfig:
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
            "mirrorflow_airflow.freshness.HeartbeatFreshnessTrigger",
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
            self._flow_config = _live_flow(self.config_file, self.flow)
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


class HeartbeatFreshnessSensor(BaseSensorOperator):
    """Watches one flow's replicated heartbeats for ``watch``; done early, as soon as they are stale.

    ``mode="poke"`` or ``"reschedule"`` (BaseSensorOperator's), or ``deferrable=True`` (the trigger above).
    ``poke_interval`` defaults to the flow's ``mirrorflow.heartbeats.poll.interval``. The result is the same
    freshness dict in every mode, so the task after it does not care how it was watched.

    Every way the watch can end without a verdict (BaseSensorOperator's timeout, the deferral's timeout, an
    error event) raises with the last measurement in the message: the one of the poke loop, the trigger's,
    or, when none reached this process (a trigger that never ran), one taken here.
    """

    ui_color = "#f6e7d2"

    def __init__(
        self,
        *,
        flow: str,
        config_file: str | Path | None = None,
        watch: timedelta = DEFAULT_WATCH,
        poke_interval: timedelta | float | None = None,
        deferrable: bool = False,
        timeout: timedelta | float | None = None,
        **kwargs: Any,
    ) -> None:
        config_file = Path(config_file) if config_file else config_path()
        if poke_interval is None:  # parse time: the file alone is enough for a duration
            source, _, target = flow.partition("->")
            poke_interval = load_config(config_file, partial=True).flow(source, target).get_seconds(POLL_KEY)
        poll_s = poke_interval.total_seconds() if isinstance(poke_interval, timedelta) else float(poke_interval)
        if timeout is None:  # the sensor's own limit only guards against a watcher that never ends
            timeout = watch.total_seconds() + 2 * poll_s + 120
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.flow = flow
        self.config_file = config_file
        self.watch = watch
        self.deferrable = deferrable
        self._watch_until: float | None = None
        self._last: dict[str, Any] | None = None

    # -- a watch without a verdict -------------------------------------------------------------------------------
    def _measure_now(self) -> tuple[dict[str, Any] | None, str]:
        """One measurement by the task itself (bounded), and what failed if it did."""
        try:
            flow = _live_flow(self.config_file, self.flow)
            return freshness_dict(heartbeats_module().check_freshness(flow, timeout=LAST_CHECK_TIMEOUT_S)), ""
        except Exception as exc:  # noqa: BLE001 - the message says it could not be measured, and why
            return None, f"{type(exc).__name__}: {exc}"

    def _fail(
        self, context: Context, cause: str, last: Mapping[str, Any] | None, error: type[AirflowException]
    ) -> AirflowException:
        """The exception to raise: logged, and left as XCom ``failure`` for the alert task (it names no secret)."""
        measured_now = False
        if not last:
            last, problem = self._measure_now()
            measured_now = last is not None
            if problem:
                cause = f"{cause}; a last measurement by this task failed too: {problem}"
        message = watch_failure(self.flow, cause, last, measured_now=measured_now)
        self.log.error("%s", message)
        ti = context.get("ti") if isinstance(context, Mapping) else None
        if ti is not None:
            try:
                ti.xcom_push(key=FAILURE_XCOM, value=message)
            except Exception:
                self.log.warning("could not leave the failure for the alert task", exc_info=True)
        return error(message)

    # -- poke / reschedule -------------------------------------------------------------------------------------
    def _window_end(self, context: Context) -> float:
        """Epoch seconds when watching ends; in reschedule mode counted from the first poke of this try."""
        if self._watch_until is None:
            start = time.time()
            if self.reschedule:
                first = context["ti"].get_first_reschedule_date(context)
                start = first.timestamp() if first else start
            self._watch_until = start + self.watch.total_seconds()
        return self._watch_until

    def poke(self, context: Context) -> bool | PokeReturnValue:
        until = self._window_end(context)
        try:
            result = freshness_dict(heartbeats_module().check_freshness(_live_flow(self.config_file, self.flow)))
        except Exception as exc:
            if time.time() >= until:
                raise self._fail(
                    context,
                    f"the watch window ended and the check failed: {type(exc).__name__}: {exc}",
                    self._last,
                    AirflowException,
                ) from exc
            self.log.warning("freshness of %s not measured (retrying at the next poke): %s", self.flow, exc)
            return False
        self._last = result
        if is_stale(result) or time.time() >= until:
            self.log.info("%s", describe(result))
            return PokeReturnValue(is_done=True, xcom_value=result)
        self.log.info("%s", describe(result))
        return False

    # -- deferrable ----------------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                cause = f"the sensor timed out after {self.timeout:.0f} s ({exc})"
                raise self._fail(context, cause, self._last, AirflowSensorTimeout) from None
        threshold = heartbeats_module().threshold_seconds(_live_flow(self.config_file, self.flow))
        trigger = HeartbeatFreshnessTrigger(
            config_file=str(self.config_file),
            flow=self.flow,
            threshold_s=threshold,
            poll_s=self.poke_interval,
            watch_until=time.time() + self.watch.total_seconds(),
        )
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timedelta(seconds=self.timeout))

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """As BaseSensorOperator's, but a deferral that failed or timed out says what was measured last."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except AirflowSensorTimeout as exc:
            cause = (
                f"the triggerer sent no verdict within the deferral's timeout of {self.timeout:.0f} s ({exc}): "
                "is the triggerer running and keeping up? see its log"
            )
            raise self._fail(context, cause, None, AirflowSensorTimeout) from None
        except TaskDeferralError as exc:
            raise self._fail(
                context, f"the trigger failed ({exc}); see the triggerer's log", None, AirflowException
            ) from None

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event or event.get("error") or "fresh" not in event:
            detail = (event or {}).get("error") or "no event"
            cause = f"no check succeeded at the end of the watch window ({detail})"
            raise self._fail(context, cause, (event or {}).get("last"), AirflowException)
        return event


__all__ = [
    "DEFAULT_WATCH",
    "FAILURE_XCOM",
    "HeartbeatFreshnessSensor",
    "HeartbeatFreshnessTrigger",
    "describe",
    "freshness_dict",
    "is_stale",
    "last_measured",
    "watch_failure",
]
