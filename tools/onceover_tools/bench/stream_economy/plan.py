"""What the stream-economy bench runs: the user's query, the run's defaults, its targets."""

from __future__ import annotations

from onceover import modes as sink_modes
from onceover.modes import TRAITS

MODES = sink_modes.MODES
"""The sink's modes, each run as a query of its own, in the order the docs list them."""
BASELINE = next(mode for mode, traits in TRAITS.items() if not traits.exactly_once)
"""The at-least-once mode (``default``), which the others' times per batch are set against."""
FLOOR = "floor"
"""The query into Spark's hand-off (onceover_tools.bench.handoff): nothing written."""
SINK = "onceover"
KEEPING = tuple(mode for mode, traits in TRAITS.items() if traits.slotted)
"""The modes that keep a stream per partition from batch to batch: a streams target each."""
PARTITIONS = 8
TRIGGER = "1 second"
TRIGGER_S = 1.0
MASTER = "local[2]"
DATASET = "bench_stream_economy"
KEY = "event_id"
SOURCE_SCHEMA = (
    "event_id BIGINT, order_id STRING, customer_id BIGINT, amount DOUBLE, currency STRING, "
    "event_time TIMESTAMP"
)
ROWS_PER_BATCH = 200
BATCHES = 60
SEGMENT = 5
"""Micro-batches each mode runs in turn in a round."""
SOAK_MINUTES = 20.0
SAMPLE_S = 30.0
WARMUP_BATCHES = 2
STREAMS_PER_PARTITION_HOUR = 2.0
STREAMS_PER_HOUR_TARGET = STREAMS_PER_PARTITION_HOUR * PARTITIONS
RATIO_TARGET = 1.2
BACKLOG = 2
"""The soak puts a file in whenever fewer than this many wait: a batch every trigger."""
FIRST_BATCH_S = 180.0  # a cold JVM and the workers' imports come first
BATCH_S = 30.0
POLL_S = 0.2
JSON_NAME = "stream-economy.json"
MARKDOWN_NAME = "stream-economy.md"
HOUR_S = 3600.0
