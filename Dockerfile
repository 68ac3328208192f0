# The Onceover backend image: the control plane, the dashboard, the jobs and the
# spark-submit that launches them (a Spark driver runs here when a job is resumed).
# No secret is baked in: tokens, database URLs and credentials come from the
# environment at run time (see .env.example and docs/guides/production.md).

# -- the dashboard, built once -----------------------------------------------------------
FROM node:20-bookworm-slim AS dashboard
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

# -- the Python environment, from the lock file ----------------------------------------
FROM python:3.11-slim-bookworm AS backend
ARG UV_VERSION=0.13.9
# Java for the Spark driver of launched jobs; procps for Spark's own scripts.
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless procps \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir "uv==${UV_VERSION}" \
    && useradd --create-home --uid 10001 onceover
WORKDIR /app
ENV UV_PYTHON_DOWNLOADS=never UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --extra server --extra local --no-install-project
COPY onceover/ onceover/
COPY jobs/ jobs/
COPY tools/ tools/
COPY pyspark_onceover/ pyspark_onceover/
COPY backend/ backend/
RUN uv sync --frozen --extra server --extra local
COPY --from=dashboard /src/frontend/dist /app/frontend/dist

ENV PATH=/app/.venv/bin:$PATH \
    JAVA_HOME=/usr/lib/jvm/default-java \
    ONCEOVER_FRONTEND_DIST=/app/frontend/dist \
    ONCEOVER_DATA_DIR=/var/lib/onceover \
    ONCEOVER_LOG_FORMAT=json
# /checkpoints and /data are shared with the Spark workers, whose user has the same uid.
RUN mkdir -p /var/lib/onceover /checkpoints /data \
    && chown onceover /var/lib/onceover /checkpoints /data
USER onceover
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/api/health', timeout=4).status != 200)"]
# `onceover serve` applies the database migrations first, then serves the API and the
# dashboard.
CMD ["onceover", "serve", "--host", "0.0.0.0", "--port", "8000"]
