"""The fixtures live in ``conftest_client`` so that the Airflow provider's tests share them."""

from conftest_client import cli, daemon, server, spool_dir, spoolfetch_bin  # noqa: F401
from conftest_client import pytest_sessionfinish  # noqa: F401,E402
