# A Spark worker for Onceover jobs: the official Apache Spark image, plus the Python the
# jobs' driver uses (3.11: PySpark refuses a worker whose minor version differs) and the
# third-party packages the sink's writer imports on executors (the base install: pyarrow,
# the Google clients; no extra), pinned by the project's uv.lock. The project's own code is not baked in: each
# job ships it with `spark-submit --py-files` (see docs/guides/production.md).
ARG SPARK_IMAGE=apache/spark:4.3.0-scala2.13-java17-python3-ubuntu
FROM ${SPARK_IMAGE}
ARG UV_VERSION=0.13.9
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends software-properties-common \
    && add-apt-repository -y universe \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml uv.lock /tmp/onceover/
RUN python3.11 -m venv /opt/uv && /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}" \
    && cd /tmp/onceover \
    && /opt/uv/bin/uv export --frozen --no-emit-project --no-hashes -o requirements.txt \
    && python3.11 -m venv /opt/onceover \
    && /opt/onceover/bin/pip install --no-cache-dir -r requirements.txt \
    && rm -rf /tmp/onceover /opt/uv
# The same uid as the backend image's user: a checkpoint is written by the driver (in
# the backend) and, in committed mode, by the tasks (here), so both must own it.
RUN useradd --uid 10001 --create-home onceover \
    && mkdir -p /opt/spark/work /checkpoints /data \
    && chown onceover /opt/spark/work /checkpoints /data
ENV PYSPARK_PYTHON=/opt/onceover/bin/python
USER onceover
