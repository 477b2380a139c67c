"""A DAG whose downloads run in spoolfetch while the task is deferred (no worker slot held)."""
import os
from datetime import datetime, timezone

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.spoolfetch.operators.spoolfetch import SpoolfetchOperator

SPOOL = os.environ.get("SPOOLFETCH_SPOOL", "/var/spool/spoolfetch")
BASE = os.environ.get("EXPORTS_URL", "https://example.org/exports")


def load(ti):
    fetched = ti.xcom_pull(task_ids="fetch")          # files, markers, group_marker
    for path, marker in zip(fetched["files"], fetched["markers"]):
        print("loading", path, marker["sha256"])


with DAG("nightly_exports", start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
         schedule="15 0 * * *", catchup=False) as dag:
    fetch = SpoolfetchOperator(task_id="fetch", spool=SPOOL, group="exports", deadline="6h",
                               urls=[f"{BASE}/users.csv", f"{BASE}/orders.csv"], retries=2)
    fetch >> PythonOperator(task_id="load", python_callable=load)
