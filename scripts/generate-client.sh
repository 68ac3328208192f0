#!/usr/bin/env bash
# Regenerate the dashboard's API types from the backend's OpenAPI schema.
# Run after changing an API model or route; tests fail while the two disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m onceover_backend.openapi > frontend/openapi.json
cd frontend
npx --no-install openapi-typescript openapi.json -o src/api/schema.d.ts
