"""The database's figures as Prometheus metric families, read afresh at each scrape.

Per table: about 30 series (the table's counters, the overview's figures, the latest
reconciliation's status, runs by status); per alert rule: one; webhook deliveries: one
per status. Never a label per run, stream or batch: those grow without bound."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from sqlmodel import Session

from onceover_backend.services.prometheus.figures import Scrape, read

RECONCILIATION_STATUSES = ("ok", "mismatch", "error")
RUN_STATUSES = ("running", "succeeded", "failed", "stalled", "resuming")
DELIVERY_STATUSES = ("pending", "sending", "succeeded", "failed")
RETRY_CODES = ("ALREADY_EXISTS", "OUT_OF_RANGE")


class StoredFigures(Collector):
    """Reads :func:`figures.read` once per scrape and yields every family from it."""

    def __init__(self, engine: Engine, stale_after: Callable[[], timedelta]) -> None:
        self.engine = engine
        self.stale_after = stale_after

    def collect(self) -> Iterator[Metric]:
        with Session(self.engine) as session:
            scrape = read(session, stale_after=self.stale_after())
        yield from _table_counters(scrape)
        yield from _table_overview(scrape)
        yield from _runs(scrape)
        yield from _alerts(scrape)
        yield from _deliveries(scrape)
        yield from _events(scrape)


def _table_counters(scrape: Scrape) -> Iterator[Metric]:
    rows = CounterMetricFamily(
        "onceover_table_rows_committed",
        "Rows committed into the table, over every run the control plane holds",
        labels=["table"],
    )
    batches = CounterMetricFamily(
        "onceover_table_batches_committed", "Batches committed into the table", labels=["table"]
    )
    dead = CounterMetricFamily(
        "onceover_table_rows_dead_lettered",
        "Rows committed batches set aside in a dead-letter table",
        labels=["table"],
    )
    requests = CounterMetricFamily(
        "onceover_table_append_requests",
        "Append requests answered with a retry code: ALREADY_EXISTS (a retried append "
        "BigQuery already had: deduplication at work), OUT_OF_RANGE (a gap in the offsets: "
        "never expected), RESOURCE_EXHAUSTED (the throughput quota)",
        labels=["table", "code"],
    )
    rejected = CounterMetricFamily(
        "onceover_table_requests_rejected",
        "Append requests BigQuery refused for bad rows",
        labels=["table"],
    )
    for table, totals in sorted(scrape.totals.items()):
        rows.add_metric([table], totals.rows_committed)
        batches.add_metric([table], totals.batches_committed)
        dead.add_metric([table], totals.rows_dead_lettered)
        requests.add_metric([table, "ALREADY_EXISTS"], totals.already_exists_requests)
        requests.add_metric([table, "OUT_OF_RANGE"], totals.out_of_range_requests)
        requests.add_metric([table, "RESOURCE_EXHAUSTED"], totals.throttled_requests)
        rejected.add_metric([table], totals.rejected_requests)
    yield from (rows, batches, dead, requests, rejected)


def _table_overview(scrape: Scrape) -> Iterator[Metric]:
    """The overview page's row of each table, figure by figure, as it computes them."""
    today = GaugeMetricFamily(
        "onceover_table_rows_committed_today",
        "Rows committed into the table since 00:00 UTC (the overview's figure)",
        labels=["table"],
    )
    window = GaugeMetricFamily(
        "onceover_table_append_requests_24h",
        "Append requests in the 24 whole UTC hours holding now: every code (code=all) "
        "and the two retry codes (the overview's figures)",
        labels=["table", "code"],
    )
    dead = GaugeMetricFamily(
        "onceover_table_rows_dead_lettered_24h",
        "Rows set aside by batches committed in the overview's 24 hours",
        labels=["table"],
    )
    last = GaugeMetricFamily(
        "onceover_table_last_commit_timestamp_seconds",
        "When the table's last batch was committed (Unix time); absent if never",
        labels=["table"],
    )
    since = GaugeMetricFamily(
        "onceover_table_seconds_since_last_commit",
        "Seconds from the table's last commit to the scrape; absent if never",
        labels=["table"],
    )
    fresh = GaugeMetricFamily(
        "onceover_table_fresh",
        "1 if the last commit is within ONCEOVER_STALE_AFTER_S of now (the overview's "
        "freshness), else 0",
        labels=["table"],
    )
    verdict = GaugeMetricFamily(
        "onceover_table_reconciliation",
        "1 for the status of the newest reconciliation touching the table (of a run into "
        "it or of it whole), 0 for the others; absent if never checked",
        labels=["table", "status"],
    )
    checked = GaugeMetricFamily(
        "onceover_table_reconciliation_timestamp_seconds",
        "When the newest reconciliation touching the table was made (Unix time)",
        labels=["table"],
    )
    now = scrape.window.now
    for row in sorted(scrape.overview.tables, key=lambda r: r.table):
        table = row.table
        today.add_metric([table], row.rows_committed_today)
        window.add_metric([table, "all"], row.requests)
        window.add_metric([table, "ALREADY_EXISTS"], row.already_exists)
        window.add_metric([table, "OUT_OF_RANGE"], row.out_of_range)
        dead.add_metric([table], row.rows_dead_lettered)
        fresh.add_metric([table], 1 if row.freshness == "fresh" else 0)
        if row.last_commit_at is not None:
            last.add_metric([table], row.last_commit_at.timestamp())
            since.add_metric([table], max(0.0, (now - row.last_commit_at).total_seconds()))
        if row.reconciliation is not None:
            for status in RECONCILIATION_STATUSES:
                verdict.add_metric([table, status], 1 if row.reconciliation.status == status else 0)
            checked.add_metric([table], row.reconciliation.checked_at.timestamp())
    yield from (today, window, dead, last, since, fresh, verdict, checked)


def _runs(scrape: Scrape) -> Iterator[Metric]:
    runs = GaugeMetricFamily(
        "onceover_runs", "Runs the control plane holds, by table and status",
        labels=["table", "status"],
    )  # fmt: skip
    for table, by_status in sorted(scrape.runs.items()):
        for status in sorted(set(RUN_STATUSES) | set(by_status)):
            runs.add_metric([table, status], by_status.get(status, 0))
    yield runs


def _alerts(scrape: Scrape) -> Iterator[Metric]:
    firing = GaugeMetricFamily(
        "onceover_alerts_firing",
        "Alerts firing, by rule (every enabled or disabled rule not deleted: 0 when quiet)",
        labels=["rule_id", "rule", "severity"],
    )
    for rule in scrape.rules:
        firing.add_metric([str(rule.rule_id), rule.rule, rule.severity], rule.firing)
    yield firing


def _deliveries(scrape: Scrape) -> Iterator[Metric]:
    deliveries = GaugeMetricFamily(
        "onceover_webhook_deliveries",
        "Webhook deliveries kept (ONCEOVER_RETENTION_DELIVERIES_DAYS), by status",
        labels=["status"],
    )
    for status in sorted(set(DELIVERY_STATUSES) | set(scrape.deliveries)):
        deliveries.add_metric([status], scrape.deliveries.get(status, 0))
    yield deliveries


def _events(scrape: Scrape) -> Iterator[Metric]:
    ingested = CounterMetricFamily(
        "onceover_events_ingested",
        "Events stored since the database was made (the newest event's sequence number)",
    )
    lag = GaugeMetricFamily(
        "onceover_ingest_lag_seconds",
        "The newest stored event's delay from its time (the job's clock) to being stored",
    )
    received = GaugeMetricFamily(
        "onceover_last_event_received_timestamp_seconds",
        "When the newest stored event was received (Unix time)",
    )
    newest = scrape.newest_event
    ingested.add_metric([], newest.seq if newest is not None else 0)
    if newest is not None:
        lag.add_metric([], max(0.0, (newest.received_at - newest.time).total_seconds()))
        received.add_metric([], newest.received_at.timestamp())
    yield from (ingested, lag, received)
