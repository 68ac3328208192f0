"""Onceover: exactly-once Spark to BigQuery loads that their owners can watch,
reconcile and resume.

This package holds what both planes share: the one place that builds BigQuery
clients (:mod:`onceover.bigquery`), the local BigQuery launcher
(:mod:`onceover_tools.localbq`) and the ``onceover`` command line (:mod:`onceover_tools.cli`).
The data plane lives in :mod:`jobs`, the control plane in :mod:`backend`.
"""

from onceover.forking import keep_grpc_out_of_forks

keep_grpc_out_of_forks()  # before anything imports grpc: see onceover/forking.py

__version__ = "0.1.0"
