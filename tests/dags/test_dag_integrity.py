"""DAG integrity: the dags/ folder parses, every DAG is documented and owned, and follows the config."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from mirrorflow_dev import CHECKOUT as REPO_ROOT
from mirrorflow_dev import EXAMPLE_CONFIG as DEFAULT_CONFIG

DAGS = REPO_ROOT / "dags"


def dagbag(monkeypatch: pytest.MonkeyPatch, config: Path = DEFAULT_CONFIG):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config))
    return DagBag(dag_folder=str(DAGS))


def test_example_configuration_parses_without_import_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = dagbag(monkeypatch)
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {
        "mirror__primary__backup__orders",
        "mirror__primary__backup__payments",
        "mirror__primary__backup__default",
        "checkpoints__primary__backup",
        "heartbeats__primary__backup",
        "failover__primary__backup",
        "failback__primary__backup",
        "verify__primary__backup",
    }


def test_every_dag_has_tags_docs_retries_and_an_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = dagbag(monkeypatch)
    assert bag.dags
    for dag in bag.dags.values():
        assert "mirrorflow" in dag.tags, dag.dag_id
        assert dag.doc_md and dag.doc_md.startswith("# "), dag.dag_id
        assert dag.max_active_runs == 1 and dag.catchup is False, dag.dag_id
        for task in dag.tasks:
            assert task.owner == "mirrorflow", (dag.dag_id, task.task_id)
            if "failover" not in dag.tags:  # operator-triggered: the operator decides whether to run it again
                assert task.retries >= 1, (dag.dag_id, task.task_id)
        for name in dag.params:
            param = dag.params.get_param(name)
            assert param.schema.get("title") and param.description, (dag.dag_id, name)
            if param.value is None:  # optional: the UI form must not insist on it
                assert "null" in param.schema["type"], (dag.dag_id, name)


def test_mirror_dag_shape_schedule_and_asset(monkeypatch: pytest.MonkeyPatch) -> None:
    dag = dagbag(monkeypatch).dags["mirror__primary__backup__orders"]
    assert {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks} == {
        "check_clusters": ["prepare_target"],
        "prepare_target": ["replicate"],
        "replicate": ["publish_report"],
        "publish_report": [],
    }
    assert set(dag.tags) == {"mirrorflow", "primary->backup", "orders"}
    assert "orders\\..*" in dag.doc_md and "primary.orders" in dag.doc_md
    assert dag.schedule == timedelta(minutes=2)  # the family's schedule
    outlets = dag.get_task("publish_report").outlets
    assert [o.uri for o in outlets] == ["mirrorflow://primary/backup/orders"]


def test_a_new_family_is_a_new_dag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        DEFAULT_CONFIG.read_text()
        + "\nprimary->backup.mirrorflow.families = orders, payments, customers\n"
        + "primary->backup.mirrorflow.family.customers.topics = customers\n"
        + "primary->backup.mirrorflow.family.customers.schedule = */10 * * * *\n"
    )
    bag = dagbag(monkeypatch, config)
    assert bag.import_errors == {}
    assert "mirror__primary__backup__customers" in bag.dag_ids
    assert bag.dags["mirror__primary__backup__customers"].schedule == "*/10 * * * *"


def test_a_broken_flow_is_an_import_error_naming_file_and_line_and_the_others_still_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = primary, backup, dr\n"
        "primary.bootstrap.servers = 127.0.0.1:19092\nbackup.bootstrap.servers = 127.0.0.1:29092\n"
        "dr.bootstrap.servers = 127.0.0.1:39092\n"
        "primary->backup.enabled = true\nprimary->backup.topics = orders.*\n"
        "primary->dr.enabled = true\nprimary->dr.topics = orders.*\n"
        "primary->dr.replication.factor = three\n"
    )
    bag = dagbag(monkeypatch, config)
    assert "mirror__primary__backup__default" in bag.dag_ids
    assert not any(d.startswith("mirror__primary__dr") for d in bag.dag_ids)
    [(file, error)] = bag.import_errors.items()
    assert file.endswith("mirrorflow_config.py")
    assert f"{config}:9" in error and "primary->dr.replication.factor" in error and "not an integer" in error


def test_a_file_level_error_loads_no_mirror_dag_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text("primary.bootstrap.servers = 127.0.0.1:19092\n")  # no 'clusters'
    bag = dagbag(monkeypatch, config)
    assert bag.dag_ids == []
    [error] = bag.import_errors.values()
    assert "clusters" in error and str(config) in error


def test_checkpoints_run_on_a_clock_and_after_every_mirror_run(monkeypatch: pytest.MonkeyPatch) -> None:
    dag = dagbag(monkeypatch).dags["checkpoints__primary__backup"]
    assert [t.task_id for t in dag.topological_sort()] == ["check_clusters", "emit_checkpoints", "sync_group_offsets"]
    assert dag.timetable.timetable.delta == timedelta(seconds=60)  # emit.checkpoints.interval.seconds
    mirror_assets = {
        o.uri
        for d in dagbag(monkeypatch).dags.values()
        if d.dag_id.startswith("mirror__")
        for o in d.get_task("publish_report").outlets
    }
    assert {a.uri for a in dag.timetable.asset_condition.objects} == mirror_assets


def test_verify_dag_shape_params_and_manual_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    dag = dagbag(monkeypatch).dags["verify__primary__backup"]
    assert {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks} == {
        "check_clusters": ["verify"],
        "verify": ["report"],
        "report": [],
    }
    assert set(dag.tags) == {"mirrorflow", "primary->backup", "verify"}
    assert dag.schedule is None  # mirrorflow.verify.schedule defaults to none: triggered by hand
    assert set(dag.params) == {"family", "topics", "since"}
    assert dag.params.get_param("since").schema["pattern"]
    assert "spark_connect" in dag.doc_md and "first differing source and target offsets" in dag.doc_md


def test_verify_schedule_key_is_honoured_and_validated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(DEFAULT_CONFIG.read_text() + "\nprimary->backup.mirrorflow.verify.schedule = @daily\n")
    bag = dagbag(monkeypatch, config)
    assert bag.import_errors == {}
    assert bag.dags["verify__primary__backup"].schedule == "@daily"

    config.write_text(DEFAULT_CONFIG.read_text() + "\nmirrorflow.verify.schedule = 99 * * * *\n")
    bag = dagbag(monkeypatch, config)
    [error] = bag.import_errors.values()
    assert "mirrorflow.verify.schedule" in error and "not a valid cron expression" in error


def test_failover_verifies_the_copy_before_moving_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    dags = dagbag(monkeypatch).dags
    failover, failback = dags["failover__primary__backup"], dags["failback__primary__backup"]
    assert [t.task_id for t in failover.topological_sort()] == [
        "preflight",
        "final_copy",
        "verify_copy",
        "move_groups",
        "stop_mirroring",
        "report",
    ]
    assert [t.task_id for t in failback.topological_sort()][:4] == [
        "preflight",
        "copy_back",
        "verify_copy",
        "move_groups",
    ]
    # on for a planned failover, off for a failback; skipped (not failed) after a skipped copy
    assert failover.params["verify"] is True and failback.params["verify"] is False
    for dag in (failover, failback):
        assert dag.get_task("verify_copy").trigger_rule == "none_failed"
        assert dag.get_task("move_groups").trigger_rule == "none_failed"
