"""SIGTERM asks continuous replication to stop after its batch; a second signal acts as it did before."""

from __future__ import annotations

import os
import signal
import time

from mirrorflow.replication import stop_signal


def test_the_first_sigterm_is_a_request_and_puts_the_handler_before_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_signal.stop_between_batches():
        assert stop_signal.requested() is None and not stop_signal.pause(0.01)
        assert signal.getsignal(signal.SIGTERM) is not before  # installed: the signal below cannot end the tests
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while stop_signal.requested() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the handler runs in the main thread between bytecodes
        assert stop_signal.requested() == "SIGTERM"
        started = time.monotonic()
        assert stop_signal.pause(30) and time.monotonic() - started < 1  # the pause after an idle batch ends at once
        assert signal.getsignal(signal.SIGTERM) is before  # a second SIGTERM would act at once
    assert stop_signal.requested() is None and signal.getsignal(signal.SIGTERM) is before


def test_without_a_signal_the_handlers_are_restored_and_nothing_is_requested() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with stop_signal.stop_between_batches():
        assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert stop_signal.requested() is None


def test_a_single_run_keeps_the_handlers_it_had() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_signal.stop_between_batches(continuous=False):
        assert signal.getsignal(signal.SIGTERM) is before
