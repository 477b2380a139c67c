"""Airflow in a throw-away home (sqlite), and the Python client's fixtures (the real daemon, a
loopback HTTP server, a temp spool)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_home = tempfile.mkdtemp(prefix="spoolfetch-airflow-")
atexit.register(shutil.rmtree, _home, True)
os.environ.update({
    "AIRFLOW_HOME": _home,
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_home}/airflow.db",
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(_home, "dags"),
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
})
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))

import pytest  # noqa: E402

from conftest_client import daemon, server, spool_dir  # noqa: E402,F401


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db
    db.initdb()
from conftest_client import pytest_sessionfinish  # noqa: E402,F401
