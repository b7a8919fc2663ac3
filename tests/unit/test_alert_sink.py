"""The demo's alert sink: a real background process that writes each POSTed alert as one JSON line."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mirrorflow.alerts import post_webhook
from mirrorflow.processes import session_members
from mirrorflow_dev.demo.alert_sink import ALERTS_FILE, AlertSink


def test_the_sink_writes_one_line_per_alert_and_stops_through_its_pid(tmp_path: Path) -> None:
    sink = AlertSink(tmp_path)
    endpoint = sink.start()
    try:
        assert endpoint.file == tmp_path / ALERTS_FILE and endpoint.url.startswith("http://127.0.0.1:")
        assert sink.start() == endpoint  # already running: the same endpoint, not a second process
        assert post_webhook(endpoint.url, {"kind": "alert", "message": "a->b: replication is STALE"}) == 204
        assert post_webhook(endpoint.url, {"kind": "recovery", "message": "a->b: recovered"}) == 204
        broken = urllib.request.Request(endpoint.url, data=b"{not json", method="POST")
        with pytest.raises(urllib.error.HTTPError, match="400"):
            urllib.request.urlopen(broken, timeout=5)
        alerts = sink.alerts()
        assert [(a["kind"], a["message"]) for a in alerts] == [
            ("alert", "a->b: replication is STALE"),
            ("recovery", "a->b: recovered"),
        ]
        assert all(a["received_at"].endswith("+00:00") for a in alerts)
        with urllib.request.urlopen(endpoint.url, timeout=5) as answer:
            assert b"2 alert(s)" in answer.read()
        record = sink.process.record()
        assert record is not None
    finally:
        assert sink.stop().startswith("stopped")
    assert sink.endpoint() is None and not session_members(record.pgid)
    assert sink.stop() == "not running"
    again = sink.start()  # the same port again, so a configured URL stays valid
    try:
        assert again.url == endpoint.url and len(sink.alerts()) == 2
    finally:
        sink.stop()
