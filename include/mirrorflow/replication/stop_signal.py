"""Continuous replication (``--duration``) stops between batches on SIGTERM or Ctrl-C, instead of mid-batch.

Why: a run of ``mirrorflow replicate --duration 1h`` lives under something that stops it with SIGTERM (systemd,
Kubernetes, a benchmark, an operator's Ctrl-C). Killed mid-batch, nothing is lost (exactly-once aborts what it had
not committed; the next run resumes from the stored progress), but the family's lock stays claimed until it
expires, and the run's report and summary are never written. So the first SIGTERM or SIGINT lets the batch in
progress finish, then the run releases its lock, writes its report and exits as after its ``--duration``; a second
signal stops it at once (the handlers before are back by then).

Only the process's own entry points (the CLI, the spark-submit app) install the handlers, in the main thread: an
Airflow task keeps Airflow's handlers (its ``on_kill`` stops the run's Spark jobs).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

log = logging.getLogger("mirrorflow.replicate")

_REQUESTED = threading.Event()
_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received: list[str] = []


def requested() -> str | None:
    """The name of the signal that asked the run to stop (``SIGTERM``), or None."""
    return _received[0] if _received else None


def pause(seconds: float) -> bool:
    """Sleep ``seconds`` (the pause after an idle batch), ending early if a stop is asked for; True if it was."""
    return _REQUESTED.wait(seconds)


@contextlib.contextmanager
def stop_between_batches(continuous: bool = True) -> Iterator[None]:
    """Within the block, the first SIGTERM or SIGINT asks continuous replication to stop after its batch.

    ``continuous`` False (a single run, no ``--duration``): nothing changes, a signal stops the run at once."""
    if not continuous or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def asked(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        _received.append(name)
        _REQUESTED.set()
        restore()  # a second signal acts as it did before: at once
        log.warning("%s: stopping after the batch in progress (send it again to stop at once)", name)

    _REQUESTED.clear()
    _received.clear()
    for sig in _SIGNALS:
        signal.signal(sig, asked)
    try:
        yield
    finally:
        restore()
        _REQUESTED.clear()
        _received.clear()


__all__ = ["pause", "requested", "stop_between_batches"]
