"""Every way of writing the same rows into the same local BigQuery, timed side by side.

One Spark session (``local[2]``), one local BigQuery, three backends for the monitored
writes: a running one, a slow one (:mod:`onceover_tools.bench.slow_backend`) and one that
is down (a port nothing listens on). For each size (N, then 4N) the same generated order
events are read from Parquet and cached in two partitions; each contender writes them
into a fresh table, whose ``COUNT(*)`` and ``COUNT(DISTINCT event_id)`` must both equal
the rows written, else the figure is dropped and the bench fails. Contenders run in a
rotating order per repeat so none always goes first; each figure is the median of its
repeats.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from onceover.modes import MODES
from onceover.waiting import poll_until
from onceover_tools.bench import baselines
from onceover_tools.bench.handoff import hand_off
from onceover_tools.bench.sink_modes import KEY, PARTITIONS, Bench, arrow_bytes, count, create_table
from onceover_tools.bench.sink_modes import prepare as prepare_bench
from onceover_tools.bench.sink_modes import write as sink_write
from onceover_tools.bench.slow_backend import SlowBackend

if TYPE_CHECKING:
    from google.cloud import bigquery
    from pyspark.sql import SparkSession

    from onceover.bigquery import BigQueryConfig

MASTER = "local[2]"
FILES = 4
WARMUP_ROWS = 2_000
MONITOR_WAIT_S = 60.0
SINK_IDLE_S = 45.0
"""Spark stops a Python worker idle for 60 s. The data source's planning and commit
workers are then started afresh and import the BigQuery client libraries (seconds of
CPU; docs/journal/profiling.md has the import times), which the slow baselines between two sink
writes would leave to the next one. Past this idle time a sink write is preceded by a
small untimed one, so its figure is throughput, not start-up."""
SPOOL_WAIT_S = 10.0
"""The spool is written before a write returns (a flush that cannot deliver spools);
this only covers a file being renamed as it is read."""
MONITORED = {"pending_monitored": "healthy", "pending_slow": "slow", "pending_down": "down"}
"""The monitored writers, by the backend each reports to."""
MONITORING_ROUND = frozenset({"pending", *MONITORED})
"""The writes of a monitoring round: plain ``pending`` and each monitored one, back to
back, so each monitored write is set against the plain one of its own round."""
SINK_KEYS = frozenset({"pending", "committed", "default", *MONITORED})
FLOOR = "spark_floor"


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    description: str
    per_row: bool = False
    """A per-row baseline: minutes of small requests against the local BigQuery, after
    which every write for minutes was slower (``docs/journal/profiling.md``, "Monitoring
    overhead"), so :func:`schedule` runs these after every other write."""


CONTENDERS = (
    Contender("pending", "Onceover `pending`", "exactly once: PENDING streams, one BatchCommit"),
    Contender("committed", "Onceover `committed`", "exactly once: COMMITTED streams, offsets"),
    Contender("default", "Onceover `default`", "at least once: the `_default` stream"),
    Contender(
        "pending_monitored",
        "Onceover `pending`, monitored",
        "as `pending`, sending its events to a running backend",
    ),
    Contender(
        "pending_slow",
        "Onceover `pending`, backend slow",
        "as `pending`, its monitor a server of the bench's that answers every request after "
        "1 s; the write is kept if the server got its events",
    ),
    Contender(
        "pending_down",
        "Onceover `pending`, backend down",
        "as `pending`, its monitor a port nothing listens on; the write is kept if its "
        "events, run finished included, are in the spool",
    ),
    Contender(
        "seed_proto_rows",
        "seeds' approach",
        "foreachPartition, AppendRowsStream, COMMITTED stream, a protobuf message per row",
        per_row=True,
    ),
    Contender(
        "streaming_inserts",
        "streaming inserts",
        "foreachPartition, insert_rows_json with row ids (tabledata.insertAll)",
        per_row=True,
    ),
    Contender(
        "arrow_ceiling",
        "Arrow ceiling",
        "one client, pre-built Arrow batches, one COMMITTED stream, no Spark",
    ),
    Contender(
        FLOOR,
        "Spark's hand-off (no writer)",
        "Spark hands the same cached rows to a Python data source's writers as Arrow, the "
        "sink's own way in, and they only count them: what any Python sink pays before it "
        "sends a byte; nothing is written",
    ),
)


@dataclass
class WriterFigure:
    """One contender at one size: its timed runs (``None`` for a failed one)."""

    key: str
    rows: int
    arrow_bytes: int
    seconds: list[float | None] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        done = [s for s in self.seconds if s is not None]
        return statistics.median(done) if done and len(done) == len(self.seconds) else None

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.median if self.median else None

    @property
    def mb_per_s(self) -> float | None:
        return self.arrow_bytes / 1e6 / self.median if self.median else None

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "median_s": self.median,
            "rows_per_s": self.rows_per_s,
            "mb_per_s": self.mb_per_s,
        }


@dataclass
class Monitor:
    """The backend the monitored write reports to, and how to check it heard."""

    url: str
    ingest_token: str
    viewer_token: str

    def options(self) -> dict[str, str]:
        return {"monitor.url": self.url, "monitor.token": self.ingest_token}

    def wait_for_run(self, table_id: str, rows: int) -> None:
        """Raise unless the control plane shows ``rows`` committed into the table: a
        monitored figure is only worth printing if the events arrived. (A batch write's
        run stays ``running``: only a job ends its run.)"""
        headers = {"Authorization": f"Bearer {self.viewer_token}"}
        seen: list[dict[str, Any]] = []

        def shown() -> bool | None:
            nonlocal seen
            answer = httpx.get(
                f"{self.url}/api/runs", params={"table": table_id}, headers=headers, timeout=10
            )
            seen = answer.json().get("data", []) if answer.status_code == 200 else []
            return any(r["rows_committed"] == rows for r in seen) or None

        # the sink's last events are a flush away
        poll_until(shown, MONITOR_WAIT_S, every_s=0.2, timed_out=lambda: baselines.BaselineError(
            f"the backend shows no run with {rows:,} rows committed into {table_id}: {seen}"
        ))  # fmt: skip


@dataclass
class Backends:
    """What the monitored writes report to: a running backend, a slow one and one that
    is down. ``spool_root`` is the sink's spool (``ONCEOVER_SPOOL_DIR`` of the bench's
    Spark session), where the events the down one cannot take go."""

    healthy: Monitor
    slow: SlowBackend
    down_url: str
    spool_root: Path

    def options(self, key: str) -> dict[str, str]:
        url = {"healthy": self.healthy.url, "slow": self.slow.url, "down": self.down_url}
        return {"monitor.url": url[MONITORED[key]], "monitor.token": self.healthy.ingest_token}

    def check(self, key: str, table_id: str, rows: int) -> None:
        """Raise unless the write's events reached where its backend lets them go."""
        match MONITORED[key]:
            case "healthy":
                self.healthy.wait_for_run(table_id, rows)
            case "slow":
                poll_until(lambda: self.slow.heard_from(table_id) or None, MONITOR_WAIT_S,
                           every_s=0.2, timed_out=lambda: baselines.BaselineError(
                    f"the slow backend got no event of {table_id} ({self.slow.requests} "
                    "requests in all)"
                ))  # fmt: skip
            case "down":
                poll_until(lambda: self._spooled_run(table_id, rows) or None, SPOOL_WAIT_S,
                           every_s=0.2, timed_out=lambda: baselines.BaselineError(
                    f"no finished run of {rows:,} rows into {table_id} in the spool "
                    f"{self._down_spool()}: {self._spool_files()}"
                ))  # fmt: skip

    def _down_spool(self) -> Path:
        from onceover_jobs.outbox import spool_dirs

        return spool_dirs(self.spool_root, self.down_url, self.healthy.ingest_token)[0]

    def _spool_files(self) -> list[str]:
        folder = self._down_spool()
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def _spooled_run(self, table_id: str, rows: int) -> bool:
        """Whether a spool file of the down backend holds the write's ``run_finished``
        with ``rows`` committed (its other events are spooled before it)."""
        for name in self._spool_files():
            if not name.startswith("events-"):
                continue
            try:
                data = (self._down_spool() / name).read_bytes()
            except FileNotFoundError:  # renamed as it is claimed or sealed: look again
                return False
            for line in data.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if (isinstance(event, dict) and event.get("table") == table_id
                        and event.get("type") == "run_finished"
                        and event.get("rows_committed") == rows):  # fmt: skip
                    return True
        return False


class WriterBench:
    """The contenders over one cached DataFrame of ``rows`` rows."""

    def __init__(self, bench: Bench, spark: SparkSession, backends: Backends) -> None:
        self.bench = bench
        self.spark = spark
        self.backends = backends
        self.size = arrow_bytes(bench.df)
        self._arrow: list[Any] | None = None
        self._last_sink_write = time.monotonic()

    @contextmanager
    def _scratch_table(self, key: str, attempt: int) -> Iterator[bigquery.Table]:
        """A fresh table for one write, dropped once the block is done with it: the local
        BigQuery keeps every table in memory. A block that raised leaves it: its error is
        what matters then."""
        client = self.bench.client
        table_id = create_table(client, self.bench.table_id(f"{key}_{self.bench.rows}_{attempt}"),
                                self.bench.fields)  # fmt: skip
        yield client.get_table(table_id)
        client.delete_table(table_id)

    def _ledger(self, table: bigquery.Table) -> Path:
        return self.bench.ledger_root / table.table_id

    def _timed(self, key: str, table: bigquery.Table) -> float:
        table_id = full_id(table)
        df = self.bench.df
        match key:
            case _ if key in MODES:  # the sink on its own in the mode of that name
                return sink_write(df, table_id, key, self._ledger(table))
            case "pending_monitored" | "pending_slow" | "pending_down":
                seconds = sink_write(
                    df, table_id, "pending", self._ledger(table), self.backends.options(key)
                )
                self.backends.check(key, table_id, self.bench.rows)
                return seconds
            case "seed_proto_rows":
                return baselines.write_seed_approach(df, table)
            case "streaming_inserts":
                return baselines.write_streaming_inserts(df, table_id, KEY)
            case "arrow_ceiling":
                if self._arrow is None:  # built once, untimed: the ceiling pays no conversion
                    self._arrow = baselines.arrow_requests(df.toArrow(), table)
                return baselines.push_arrow_ceiling(self._arrow, table, self.bench.config)
        raise ValueError(f"unknown contender {key!r}")

    def run(self, key: str, attempt: int, say: Callable[[str], None]) -> float | None:
        """One timed run of ``key``; ``None`` if it failed."""
        if key == FLOOR:
            return self._run_floor(say)
        return self._run_writer(key, attempt, say)

    def _run_floor(self, say: Callable[[str], None]) -> float | None:
        """The floor writes nothing, so it needs no table: its rows are counted in the
        Python workers they were handed to."""
        seconds = self._attempt(FLOOR, self._hand_off, say)
        if seconds is not None:
            self._say_done(FLOOR, seconds, "counted in Python", say)
        return seconds

    def _hand_off(self) -> float:
        handed = hand_off(self.bench.df)
        if handed.rows != self.bench.rows:
            raise baselines.BaselineError(f"Python workers counted {handed.rows:,} rows")
        return handed.seconds

    def _run_writer(self, key: str, attempt: int, say: Callable[[str], None]) -> float | None:
        """One timed write into a fresh table, verified in BigQuery; ``None`` if it failed."""
        if key in SINK_KEYS and time.monotonic() - self._last_sink_write > SINK_IDLE_S:
            self._rewarm()
        with self._scratch_table(key, attempt) as table:
            seconds = self._attempt(key, lambda: self._timed(key, table), say)
            if seconds is None:
                return None
            if key in SINK_KEYS:
                self._last_sink_write = time.monotonic()
            counted, distinct = count(self.bench.client, full_id(table))
        if counted != self.bench.rows or distinct != self.bench.rows:
            say(
                f"FAILED: {key} at {self.bench.rows:,} rows: BigQuery holds {counted:,} rows "
                f"({distinct:,} distinct {KEY})"
            )
            return None
        self._say_done(key, seconds, "verified in BigQuery", say)
        return seconds

    def _attempt(
        self, key: str, timed: Callable[[], float], say: Callable[[str], None]
    ) -> float | None:
        """The seconds ``timed`` reports, or ``None`` once its error is said: one failed
        contender must not stop the others."""
        try:
            return timed()
        except Exception as exc:
            say(f"FAILED: {key} at {self.bench.rows:,} rows: {type(exc).__name__}: {exc}"[:600])
            traceback.print_exc()
            return None

    def _say_done(self, key: str, seconds: float, checked: str, say: Callable[[str], None]) -> None:
        say(f"  {key:<18} {self.bench.rows:>10,} rows {seconds:8.2f} s  ({checked})")

    def _rewarm(self) -> None:
        """A small untimed sink write: Spark's idle Python workers are started again.
        ``pending``, because it alone uses every kind (planning, tasks, the commit)."""
        with self._scratch_table("rewarm", 0) as table:
            sink_write(self.bench.df.limit(WARMUP_ROWS), full_id(table), "pending",
                       self._ledger(table))  # fmt: skip


def full_id(table: bigquery.Table) -> str:
    """``project.dataset.table``, as queries and the sink's ``table`` option take it."""
    return f"{table.project}.{table.dataset_id}.{table.table_id}"


def warm_up(bench: Bench, spark: SparkSession, backends: Backends) -> float:
    """One small untimed write per contender: the first of each pays its Python workers'
    imports (and ``pending`` its commit process), which is start-up, not throughput."""
    started = time.perf_counter()
    small = bench.df.limit(WARMUP_ROWS).repartition(PARTITIONS).cache()
    rows = small.count()
    tiny = Bench(small, rows, bench.client, bench.config, bench.fields, bench.ledger_root)
    writers = WriterBench(tiny, spark, backends)
    for contender in CONTENDERS:
        if writers.run(contender.key, 0, lambda _: None) is None:
            raise baselines.BaselineError(f"the warm-up write of {contender.key} failed")
    small.unpersist()
    return time.perf_counter() - started


@dataclass(frozen=True)
class Pass:
    """One size's writes in one pass: ``repeat`` attempts of ``contenders``, each rotated."""

    rows: int
    writes: list[tuple[int, Contender]]


def schedule(
    sizes: Sequence[int],
    repeat: int,
    contenders: Sequence[Contender] = CONTENDERS,
    monitoring_rounds: int = 0,
) -> list[Pass]:
    """Every size's writes by everyone but the per-row baselines, then every size's
    per-row baselines: after minutes of their small requests every write against the
    local BigQuery was slower for minutes (``docs/journal/profiling.md``, "Monitoring overhead"),
    so nothing the report sets against a target may run in their shadow. Within a pass
    the order rotates by one an attempt, so that no contender always pays for the one
    before it. Past ``repeat``, attempts up to ``monitoring_rounds`` run only a
    monitoring round (:data:`MONITORING_ROUND`): single writes vary by far more than
    the 3% the overhead is held to, and only many rounds, each paired, resolve it."""
    passes = []
    for per_row in (False, True):
        group = [c for c in contenders if c.per_row is per_row]
        if not group:
            continue
        rounds = [c for c in group if c.key in MONITORING_ROUND]
        attempts = max(repeat, monitoring_rounds) if rounds else repeat
        for rows in sizes:
            writes = [
                (attempt, contender)
                for attempt in range(1, attempts + 1)
                for contender in _rotated(group if attempt <= repeat else rounds, attempt - 1)
            ]
            passes.append(Pass(rows, writes))
    return passes


def _rotated(items: list[Contender], shift: int) -> list[Contender]:
    shift %= len(items)
    return items[shift:] + items[:shift]


def run_writers(
    sizes: list[int],
    repeat: int,
    config: BigQueryConfig,
    backends: Backends,
    say: Callable[[str], None],
    *,
    monitoring_rounds: int = 0,
) -> list[WriterFigure]:
    """Every contender at every size, ``repeat`` times (a monitoring round's writers
    ``monitoring_rounds`` times, if more), in ``schedule``'s order; the figures in
    ``sizes`` order, each size's in ``CONTENDERS`` order."""
    from onceover_jobs.generate import write_files
    from onceover_jobs.sink.datasource import register
    from onceover_jobs.spark import spark_session

    runs = {(c.key, rows): WriterFigure(c.key, rows, 0) for rows in sizes for c in CONTENDERS}
    with tempfile.TemporaryDirectory(prefix="onceover-bench-") as tmp:
        spark = spark_session("onceover-bench", MASTER)
        try:
            register(spark)
            for number, run in enumerate(schedule(sizes, repeat, CONTENDERS, monitoring_rounds)):
                source = Path(tmp) / f"orders-{run.rows}"
                if not source.exists():
                    write_files(source, run.rows, FILES, "parquet")
                bench = prepare_bench(spark, source, run.rows, config, Path(tmp) / "ledger")
                writers = WriterBench(bench, spark, backends)
                say(f"{run.rows:,} rows cached in {PARTITIONS} partitions, "
                    f"{writers.size / 1e6:.1f} MB of Arrow")  # fmt: skip
                if number == 0:
                    say(f"  warm-up, untimed: {warm_up(bench, spark, backends):.1f} s")
                for _, contender in run.writes:
                    runs[(contender.key, run.rows)].arrow_bytes = writers.size
                for attempt, contender in run.writes:
                    runs[(contender.key, run.rows)].seconds.append(
                        writers.run(contender.key, attempt, say)
                    )
                bench.df.unpersist()
        finally:
            spark.stop()
    return list(runs.values())


def quiet_spark() -> None:
    """Stage progress bars would interleave with the figures on a terminal."""
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    )
