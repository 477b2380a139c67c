"""What Airflow's provider manager lists about this package."""

from typing import Any, Dict


def get_provider_info() -> Dict[str, Any]:
    return {
        "package-name": "apache-airflow-providers-spoolfetch",
        "name": "spoolfetch",
        "description": "Downloads through a spoolfetch spool, waited for by a deferrable operator.",
        "versions": ["0.1.0"],
        "operators": [{"integration-name": "spoolfetch",
                       "python-modules": ["airflow.providers.spoolfetch.operators.spoolfetch"]}],
        "triggers": [{"integration-name": "spoolfetch",
                      "python-modules": ["airflow.providers.spoolfetch.triggers.spoolfetch"]}],
    }
