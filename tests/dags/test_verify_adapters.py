"""The verify DAG's Airflow side without clusters: the engine the ``spark_default`` connection chooses, and the
report rebuilt from its XCom dict renders as the library renders it."""

from __future__ import annotations

import json

import airflow.settings  # noqa: F401 - Airflow puts plugins/ (mirrorflow_airflow) on sys.path
import pytest

from mirrorflow.replication.connect import SparkConnectExecutor
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.verify.report import PartitionVerdict, VerifyReport, render_text


def test_a_spark_connect_connection_sends_chunks_to_its_server_any_other_keeps_them_in_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirrorflow_airflow.dags.verify import verify_executor

    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark_connect", "host": "sc://10.1.2.3", "port": 15002})
    )
    executor, where = verify_executor("primary->backup/verify")
    assert isinstance(executor, SparkConnectExecutor) and executor.url.startswith("sc://10.1.2.3:15002")
    assert "sc://10.1.2.3:15002" in where
    executor.close()  # never connected: nothing to stop

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"}))
    executor, where = verify_executor("primary->backup/verify")
    assert isinstance(executor, LocalExecutor) and "this task's process" in where


def test_the_report_from_xcom_renders_like_the_library_and_names_the_first_difference() -> None:
    from mirrorflow_airflow.dags.verify import difference_lines, error_lines, report_from_dict

    verdict = PartitionVerdict("orders", "primary.orders", 1, 0, 9, 0, 10, 10, 11)
    verdict.chunks.append({"source_offsets": [0, 9], "identical": False})
    verdict.differences.append(
        {"kind": "extra", "source_offset": None, "target_offset": 10, "count": 1, "target_last": 10}
    )
    report = VerifyReport("primary->backup", None, "2026-11-23T00:00:00+00:00", 1.5, [verdict])
    data = json.loads(json.dumps(report.to_dict()))  # as XCom carries it
    assert render_text(report_from_dict(data)) == render_text(report)
    first = (
        "orders[1] -> primary.orders[1]: extra on the target: target offset(s) 10 (1 record(s)) with no source "
        "record, after the last source record"
    )
    assert difference_lines(data) == [first]
    assert error_lines(data) == []
    report.errors.append("cluster 'primary' does not answer")
    assert error_lines(report.to_dict()) == ["cluster 'primary' does not answer"]
