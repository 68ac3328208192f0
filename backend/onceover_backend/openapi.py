"""Print the control plane's OpenAPI schema: the contract the dashboard's client is generated from.

python -m onceover_backend.openapi > frontend/openapi.json
"""

from __future__ import annotations

import json
from typing import Any

from onceover.bigquery import BigQueryConfig
from onceover_backend.core.config import Settings
from onceover_backend.main import create_app


def openapi_schema() -> dict[str, Any]:
    # An in-memory database and unused BigQuery settings: building the schema touches neither.
    app = create_app(Settings(database_url="sqlite://"), bigquery=BigQueryConfig())
    return app.openapi()


if __name__ == "__main__":
    print(json.dumps(openapi_schema(), indent=2, sort_keys=True))
