"""The local BigQuery: bqemulator, started by Onceover's own launcher.

The only code in the project that imports bqemulator. Run it in this process
(:class:`LocalBigQuery`) or as a child process (:class:`LocalBigQueryProcess`,
what ``onceover up`` and ``onceover demo`` use); both listen on chosen ports
(0 = a free port) and keep data in memory or in a data directory. What is
patched, and why, is in :mod:`onceover_tools.localbq.patches`.
"""

from onceover_tools.localbq.patches import PINNED_VERSION
from onceover_tools.localbq.process import LocalBigQueryProcess
from onceover_tools.localbq.server import LocalBigQuery, LocalBigQueryOptions

__all__ = ["PINNED_VERSION", "LocalBigQuery", "LocalBigQueryOptions", "LocalBigQueryProcess"]
