"""``optional_spatial``: the server starts offline.

bqemulator runs ``INSTALL spatial`` at start-up, a download; offline the server does not
start. BigQuery needs nothing downloaded to serve. The patch only ``LOAD``s the extension
when it is already installed and otherwise logs and goes on: GEOGRAPHY is unavailable,
nothing else changes. It also turns off DuckDB's automatic extension download so that
nothing downloads at run time.

Pinned by ``tests/localbq/test_patches.py``: ``test_spatial_extension_is_never_downloaded``,
``test_the_server_starts_without_the_spatial_extension``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from onceover_tools.localbq.patches.wrapping import wrap

logger = logging.getLogger(__name__)


def apply() -> None:
    """Load DuckDB's spatial extension only if installed; never download it."""
    from bqemulator.storage.engine import DuckDBEngine

    def make(_original: Callable[[DuckDBEngine], None]) -> Callable[[DuckDBEngine], None]:
        def _load_spatial(engine: DuckDBEngine) -> None:
            connection = engine.connection
            # Without this DuckDB downloads known extensions on first use.
            connection.execute("SET autoinstall_known_extensions = false")
            try:
                connection.execute("LOAD spatial")
            except Exception as exc:  # duckdb raises IOException when not installed
                logger.info(
                    "DuckDB spatial extension not installed; GEOGRAPHY is off (%s)",
                    str(exc).splitlines()[0],
                )

        return _load_spatial

    wrap(DuckDBEngine, "_load_spatial", make)
