"""README "From Airflow": its block is ``examples/spoolfetch_nightly.py`` verbatim, and the DAG runs."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone

from airflow.utils.state import TaskInstanceState
from readme_blocks import ROOT, python_block

EXAMPLE = ROOT / "clients" / "airflow" / "examples" / "spoolfetch_nightly.py"


def test_readme_block_is_the_example_dag() -> None:
    assert python_block("### From Airflow") == EXAMPLE.read_text()


def test_the_example_dag_runs_against_the_daemon(spool_dir, daemon, server, monkeypatch) -> None:
    server.put("users.csv", b"u")
    server.put("orders.csv", b"o")
    monkeypatch.setenv("SPOOLFETCH_SPOOL", spool_dir)
    monkeypatch.setenv("EXPORTS_URL", server.base)
    spec = importlib.util.spec_from_file_location("spoolfetch_nightly_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(execution_date=datetime(2026, 12, 2, tzinfo=timezone.utc))
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"fetch": TaskInstanceState.SUCCESS, "load": TaskInstanceState.SUCCESS}
