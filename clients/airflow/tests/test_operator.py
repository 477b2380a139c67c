"""A DAG run with ``dag.test()`` (which runs triggers inline) against the real daemon: one group
published, one failing with its items' code; a task run again finds its own request."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone

import pytest
from airflow import DAG
from airflow.utils.state import TaskInstanceState

from airflow.providers.spoolfetch.operators.spoolfetch import SpoolfetchOperator, request_name_for

RUN_DATE = datetime(2026, 12, 1, tzinfo=timezone.utc)


def make_dag(spool: str, base: str) -> DAG:
    with DAG("spoolfetch_nightly", start_date=RUN_DATE, schedule=None, catchup=False) as dag:
        SpoolfetchOperator(task_id="fetch_reports", spool=spool, group="reports", deadline="10m",
                           urls=[f"{base}/a.csv", f"{base}/b.csv"])
        SpoolfetchOperator(task_id="fetch_missing", spool=spool, group="missing", deadline="10m",
                           urls=[f"{base}/c.csv", f"{base}/gone.csv"])
    return dag


def states(run) -> dict:
    return {ti.task_id: ti for ti in run.get_task_instances()}


def test_dag_run_defers_publishes_and_fails_with_the_code(spool_dir, daemon, server) -> None:
    server.put("a.csv", b"a,b\n1,2\n")
    server.put("b.csv", b"c\n3\n" * 1000)
    server.put("c.csv", b"c")
    server.slow["b.csv"] = 1.0  # a download that takes a while: the task waits for it deferred
    dag = make_dag(spool_dir, server.base)
    started = time.monotonic()
    run = dag.test(execution_date=RUN_DATE)
    dag_test_seconds = time.monotonic() - started
    tis = states(run)
    ok, bad = tis["fetch_reports"], tis["fetch_missing"]
    assert ok.state == TaskInstanceState.SUCCESS
    assert bad.state == TaskInstanceState.FAILED
    value = ok.xcom_pull(task_ids="fetch_reports")
    assert value["request"] == request_name_for("spoolfetch_nightly", "fetch_reports", run.run_id)
    assert [open(f, "rb").read() for f in value["files"]] == [b"a,b\n1,2\n", b"c\n3\n" * 1000]
    assert [m["name"] for m in value["markers"]] == ["a.csv", "b.csv"]
    assert json.load(open(value["group_marker"]))["group"] == "reports"
    failures = bad.xcom_pull(task_ids="fetch_missing", key="failures")
    assert [(f["index"], f["code"], f["http_status"]) for f in failures] == [(1, "http-status", 404)]
    # The worker slot was held only to file the request; the wait ran deferred.
    print(f"\nworker slot held {value['worker_seconds'] * 1000:.1f} ms, deferred {value['deferred_seconds'] * 1000:.1f} ms")
    assert value["deferred_seconds"] >= 1.0 and value["worker_seconds"] < value["deferred_seconds"]
    timing = os.environ.get("SPOOLFETCH_AIRFLOW_TIMING")
    if timing:
        with open(timing, "w") as f:
            json.dump({"worker_seconds": value["worker_seconds"], "deferred_seconds": value["deferred_seconds"],
                       "dag_test_seconds": dag_test_seconds}, f)

    # The same run again (dag.test replaces the run under the same run_id: a retry of each task).
    requests_before = sorted(os.listdir(os.path.join(spool_dir, "done")))
    again = states(make_dag(spool_dir, server.base).test(execution_date=RUN_DATE))
    assert again["fetch_reports"].state == TaskInstanceState.SUCCESS
    assert again["fetch_reports"].xcom_pull(task_ids="fetch_reports")["files"] == value["files"]
    # Found its published request: no second request, nothing fetched again.
    assert sorted(os.listdir(os.path.join(spool_dir, "done"))) == requests_before
    assert sorted(n for n in os.listdir(os.path.join(spool_dir, "final")) if n.startswith(("a", "b"))) == [
        "a.csv", "a.csv.done", "b.csv", "b.csv.done"]
    # The failed one is filed again (what a retry is for), named NAME~1 by the daemon, and fails again.
    assert again["fetch_missing"].state == TaskInstanceState.FAILED
    name = request_name_for("spoolfetch_nightly", "fetch_missing", run.run_id)
    assert sorted(n for n in os.listdir(os.path.join(spool_dir, "failed")) if not n.endswith(".error")) == [name, name + "~1"]


def test_retry_while_running_adopts_the_queued_request(spool_dir, server) -> None:
    """A task that filed its request and died before deferring: its retry adopts that request."""
    from airflow.providers.spoolfetch.triggers.spoolfetch import SpoolfetchTrigger
    from spoolfetch import Spool
    from conftest_client import Daemon
    server.put("late.csv", b"late")
    dag = make_dag(spool_dir, server.base)
    name = request_name_for("spoolfetch_nightly", "fetch_reports", "manual__2026-12-01T00:00:00+00:00")
    Spool(spool_dir).add([f"{server.base}/late.csv"], group="reports", request_name=name)
    daemon = Daemon(spool_dir, [])
    try:
        run = dag.test(execution_date=RUN_DATE)
    finally:
        daemon.stop()
    ti = states(run)["fetch_reports"]
    assert ti.state == TaskInstanceState.SUCCESS
    assert [os.path.basename(f) for f in ti.xcom_pull(task_ids="fetch_reports")["files"]] == ["late.csv"]
    assert os.listdir(os.path.join(spool_dir, "incoming")) == []
    assert SpoolfetchTrigger(spool_dir, name).serialize()[0] == "airflow.providers.spoolfetch.triggers.spoolfetch.SpoolfetchTrigger"
