"""Airflow provider for spoolfetch (``SpoolfetchOperator``, ``SpoolfetchTrigger``)."""

__version__ = "0.1.0"
