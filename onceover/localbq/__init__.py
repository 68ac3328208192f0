"""The local BigQuery: bqemulator, started by Onceover's own launcher.

The only code in the project that imports bqemulator. Run it in this process
(:class:`LocalBigQuery`) or as a child process (:class:`LocalBigQueryProcess`,
what ``onceover up`` and ``onceover demo`` use); both listen on chosen ports
(0 = a free port) and keep data in memory or in a data directory. What is
patched, and why, is in :mod:`onceover.localbq.patches`.
"""

from onceover.localbq.patches import PINNED_VERSION
from onceover.localbq.process import LocalBigQueryProcess
from onceover.localbq.server import LocalBigQuery, LocalBigQueryOptions

__all__ = ["PINNED_VERSION", "LocalBigQuery", "LocalBigQueryOptions", "LocalBigQueryProcess"]
