"""The figures one query takes: each micro-batch's requests by kind, the upstream latency
of each kind, its rows as BigQuery counts them; and what they come to in an hour."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from onceover_tools.bench.ledger_stores.api import APIS, StoreApi
from onceover_tools.bench.ledger_stores.plan import BATCHES_PER_HOUR, POSIX, window
from onceover_tools.bench.ledger_stores.prices import HOURS_PER_MONTH
from onceover_tools.bench.stream_economy.figures import percentile


@dataclass
class BatchRequests:
    """One micro-batch: the requests its ledger made, by kind (those the proxy forwarded
    between the end of the batch before it and its own end), and Spark's addBatch."""

    batch_id: int
    counts: dict[str, int]
    add_batch_ms: float

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Latency:
    """The upstream latency of one kind of request over the steady batches, ms."""

    requests: int
    p50_ms: float
    p95_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        ms = [s * 1000 for s in seconds]
        return cls(len(ms), percentile(ms, 0.5) or 0.0, percentile(ms, 0.95) or 0.0)


@dataclass
class LedgerQuery:
    """One query (a mode on a store): its batches' requests, their latency, its rows."""

    store: str
    mode: str
    expected_rows: int = 0
    batches: list[BatchRequests] = field(default_factory=list)
    latency: dict[str, Latency] = field(default_factory=dict)
    """Kind -> its latency over every batch but the first."""
    statuses: dict[str, int] = field(default_factory=dict)
    """HTTP status -> requests over every batch (a refused create answers 412, an absent
    record 404: both billed like any other)."""
    counted: int | None = None
    distinct: int | None = None
    exactly_once: bool = True
    failed: str | None = None

    @property
    def api(self) -> StoreApi | None:
        """The store's API; None for the disk, where nothing is a request."""
        return None if self.store == POSIX else APIS[self.store]

    @property
    def steady(self) -> list[BatchRequests]:
        """Every batch but the first (which claims the ledger and opens its streams)."""
        return self.batches[1:]

    @property
    def window(self) -> int:
        return window(len(self.batches))

    def early(self) -> list[BatchRequests]:
        return self.steady[: self.window]

    def late(self) -> list[BatchRequests]:
        return self.steady[-self.window :]

    @staticmethod
    def mean(batches: list[BatchRequests], kind: str | None = None) -> float | None:
        """Requests per batch over ``batches``, of ``kind`` or of all kinds."""
        if not batches:
            return None
        return statistics.fmean(b.total if kind is None else b.counts.get(kind, 0) for b in batches)

    @property
    def growth(self) -> float | None:
        """Requests per batch over the last window over the first's: 1.0 is flat."""
        early, late = self.mean(self.early()), self.mean(self.late())
        if early is None or late is None or early == 0:
            return None
        return late / early

    def per_batch(self) -> dict[str, float]:
        """Each kind's requests per micro-batch over the last window: what a query that
        has run a while pays (with a growing count, the first window's would flatter it)."""
        api = self.api
        late = self.late()
        if api is None or not late:
            return {}
        return {kind: self.mean(late, kind) or 0.0 for kind in api.kinds}

    def per_hour(self) -> dict[str, float]:
        """Each kind's requests per hour: a batch a second (:data:`BATCHES_PER_HOUR`) at
        the last window's count."""
        return {kind: n * BATCHES_PER_HOUR for kind, n in self.per_batch().items()}

    def per_hour_by_tier(self) -> dict[str, float]:
        api = self.api
        return {} if api is None else api.prices.per_tier(self.per_hour())

    def dollars_per_hour(self) -> float | None:
        api = self.api
        if api is None or self.failed or not self.late():
            return None
        return api.prices.dollars(self.per_hour())

    def dollars_per_month(self) -> float | None:
        hourly = self.dollars_per_hour()
        return None if hourly is None else hourly * HOURS_PER_MONTH

    def add_batch(self, q: float) -> float | None:
        return percentile([b.add_batch_ms for b in self.steady], q)

    @property
    def exact(self) -> bool:
        rows = self.expected_rows
        if self.counted is None or self.distinct is None:
            return False
        if self.exactly_once:
            return self.counted == self.distinct == rows
        return self.distinct == rows and self.counted >= rows

    def as_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "mode": self.mode,
            "expected_rows": self.expected_rows,
            "counted": self.counted,
            "distinct": self.distinct,
            "exactly_once": self.exactly_once,
            "exact": self.exact,
            "failed": self.failed,
            "window": self.window,
            "batches": [asdict(b) for b in self.batches],
            "latency_ms": {kind: asdict(value) for kind, value in self.latency.items()},
            "statuses": self.statuses,
            "per_batch": {
                "early": self.mean(self.early()),
                "late": self.mean(self.late()),
                "growth": self.growth,
                "late_by_kind": self.per_batch(),
            },
            "per_hour": self.per_hour(),
            "per_hour_by_tier": self.per_hour_by_tier(),
            "dollars_per_hour": self.dollars_per_hour(),
            "dollars_per_month": self.dollars_per_month(),
            "add_batch_p50_ms": self.add_batch(0.5),
            "add_batch_p95_ms": self.add_batch(0.95),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LedgerQuery:
        return cls(
            store=data["store"],
            mode=data["mode"],
            expected_rows=data["expected_rows"],
            batches=[BatchRequests(**b) for b in data["batches"]],
            latency={kind: Latency(**value) for kind, value in data["latency_ms"].items()},
            statuses=data["statuses"],
            counted=data["counted"],
            distinct=data["distinct"],
            exactly_once=data["exactly_once"],
            failed=data["failed"],
        )


@dataclass
class LedgerStores:
    """Every figure of one run."""

    batches: int
    rows_per_batch: int
    stores: list[str]
    modes: list[str]
    queries: list[LedgerQuery] = field(default_factory=list)
    failed: str | None = None
    """Set when the run could not start (no Spark, no stand-in, no local BigQuery)."""

    def query(self, store: str, mode: str) -> LedgerQuery | None:
        return next((q for q in self.queries if (q.store, q.mode) == (store, mode)), None)

    @property
    def any_failed(self) -> bool:
        return bool(self.failed) or not self.queries or any(q.failed for q in self.queries)

    def as_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "rows_per_batch": self.rows_per_batch,
            "stores": self.stores,
            "modes": self.modes,
            "batches_per_hour": BATCHES_PER_HOUR,
            "queries": [q.as_json() for q in self.queries],
            "failed": self.failed,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LedgerStores:
        return cls(
            batches=data["batches"],
            rows_per_batch=data["rows_per_batch"],
            stores=data["stores"],
            modes=data["modes"],
            queries=[LedgerQuery.from_json(q) for q in data["queries"]],
            failed=data["failed"],
        )
