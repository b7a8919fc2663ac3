"""The heartbeat freshness sensor: watches one flow's replicated heartbeats (poke, reschedule or deferrable).

The watching and the words it reports with live in ``mirrorflow_airflow.triggers.heartbeat_freshness``, which
the triggerer imports by classpath when the sensor defers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, TaskDeferralError

from mirrorflow.config import load_config
from mirrorflow.config.location import config_path
from mirrorflow_airflow.triggers.heartbeat_freshness import (
    DEFAULT_WATCH,
    FAILURE_XCOM,
    LAST_CHECK_TIMEOUT_S,
    POLL_KEY,
    HeartbeatFreshnessTrigger,
    describe,
    freshness_dict,
    heartbeats_module,
    is_stale,
    last_measured,
    live_flow,
    watch_failure,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


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
            flow = live_flow(self.config_file, self.flow)
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
            result = freshness_dict(heartbeats_module().check_freshness(live_flow(self.config_file, self.flow)))
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
        threshold = heartbeats_module().threshold_seconds(live_flow(self.config_file, self.flow))
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
