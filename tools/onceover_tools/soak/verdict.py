"""The soak's verdict: BigQuery against the source, the ledger against BigQuery, and the
samples against themselves.

The source is Spark's ``rate`` source, whose rows are ``0 .. K-1`` for the offset (in
seconds) of the last micro-batch in the query's offset log, ``K = seconds x rows a
second``: what the source produced is read from Spark's own log, not from the sink.
Beam's two checks are asked in BigQuery: nothing missing and nothing extra (its
``EXCEPT DISTINCT`` both ways: the distinct keys of ``0 .. K-1`` in the table, the rows
that are not one of them once), and no key twice; then a sample of rows is read back
and every field held against what the source made for its key.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from google.cloud import bigquery
from onceover_jobs.examples.rate_stream import KEY, field_name, field_value

from onceover.errors import LedgerError
from onceover.modes import traits_of
from onceover_tools.chaos.verify import ledger_view
from onceover_tools.soak.sampler import Sample, batches_committed
from onceover_tools.soak.shapes import Shape

VALUES_CHECKED = 500
"""Rows read back whole, spread over the key range."""
FLAT_TOLERANCE = 0.10
"""The last quarter's median within this of the second quarter's (issue 58)."""
FLAT_MIN_MINUTES = 8.0
"""A shorter soak is not judged flat: a JVM's heap, its JIT and its pools still grow
over the first minutes, so quarters of a few minutes compare warm-up with warm-up."""
FLAT_WARM_UP_S = 300.0
"""A driver's samples count toward flatness from this long after its start. A leak grows
with a process's life and a restart resets it, so the quarters compare processes past
their warm-up, not a young one with an old one: in the runs of record a JVM's RSS rose by
about 150 MB over its first five to eight minutes, and a fresh set of Python workers
took about 10 % more PSS than the set it replaced. Decided on 2026-12-06, after the
30-minute buffered run failed the rule taken over every sample only on the workers' PSS
of a driver restarted five minutes before its end; the report gives both medians."""
NOT_FLAT = " is not flat: "
"""How a flatness problem reads after its figure's name."""
FLAT_FIGURES: dict[str, bool] = {
    "driver_rss_mb": False,
    "jvm_rss_mb": False,
    "workers_pss_mb": False,
    "driver_threads": True,
    "jvm_threads": True,
    "workers_threads": True,
    "grpc_connections": True,
    "append_calls_open": True,
}
"""What must stay flat, and whether it is a count (a count may move by one: 10 % of 3
connections is no connection at all)."""


@dataclass
class Flatness:
    figure: str
    second_quarter: float | None
    last_quarter: float | None
    flat: bool | None
    """``None``: too few samples in a quarter to say."""
    second_quarter_all: float | None = None
    last_quarter_all: float | None = None
    """The medians over every sample with a driver up, warm or not (not judged)."""


@dataclass
class Verdict:
    source_rows: int
    rows: int = 0
    distinct_keys: int = 0
    missing_keys: int = 0
    extra_rows: int = 0
    """Rows beyond one per key of the source: duplicates and keys it never made."""
    values_checked: int = 0
    values_wrong: int = 0
    ledger_rows: int | None = None
    ledger_writes: int | None = None
    flatness: list[Flatness] = field(default_factory=list)
    streams_after_warm_up: int | None = None
    streams_allowed: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def source_seconds(checkpoint: Path) -> tuple[int, int]:
    """The last batch id in the query's offset log, and its end offset (seconds)."""
    offsets = checkpoint / "offsets"
    last = max((int(p.name) for p in offsets.iterdir() if p.name.isdigit()), default=None)
    if last is None:
        return -1, 0
    lines = (offsets / str(last)).read_text().splitlines()
    return last, int(lines[-1].strip())


def judge_table(client: bigquery.Client, table: str, shape: Shape, checkpoint: Path) -> Verdict:
    last_batch, seconds = source_seconds(checkpoint)
    verdict = Verdict(source_rows=seconds * shape.rows_per_second)
    committed = batches_committed(checkpoint)
    if last_batch + 1 != committed:
        verdict.problems.append(
            f"the query's last micro-batch ({last_batch}) is not in Spark's commit log "
            f"(it holds {committed} batches): the drain did not finish it"
        )
    k = verdict.source_rows
    row = next(iter(client.query_and_wait(f"""
        SELECT COUNT(*) AS n, COUNT(DISTINCT {KEY}) AS d,
               COUNT(DISTINCT IF({KEY} >= 0 AND {KEY} < {k}, {KEY}, NULL)) AS inside
        FROM `{table}`""")))  # fmt: skip
    verdict.rows, verdict.distinct_keys = int(row["n"]), int(row["d"])
    inside = int(row["inside"])
    verdict.missing_keys = k - inside
    verdict.extra_rows = verdict.rows - inside
    if verdict.missing_keys:
        verdict.problems.append(f"{verdict.missing_keys:,} of the source's {k:,} keys missing")
    if verdict.extra_rows:
        verdict.problems.append(
            f"{verdict.extra_rows:,} rows extra ({verdict.rows - verdict.distinct_keys:,} "
            f"keys twice or more, {verdict.distinct_keys - inside:,} keys the source never made)"
        )
    _check_values(client, table, shape, verdict)
    return verdict


def _check_values(client: bigquery.Client, table: str, shape: Shape, verdict: Verdict) -> None:
    step = max(1, verdict.source_rows // VALUES_CHECKED)
    names = ", ".join(field_name(i) for i in range(shape.fields))
    query = (
        f"SELECT {KEY}, {names} FROM `{table}` WHERE MOD({KEY}, {step}) = 0 "
        f"ORDER BY {KEY} LIMIT {VALUES_CHECKED * 2}"
    )
    for row in client.query_and_wait(query):
        verdict.values_checked += 1
        key = int(row[KEY])
        if any(
            row[field_name(i)] != field_value(key, i, shape.bytes_per_field)
            for i in range(shape.fields)
        ):
            verdict.values_wrong += 1
    if verdict.values_wrong:
        verdict.problems.append(
            f"{verdict.values_wrong} of {verdict.values_checked} rows read back differ from "
            "what the source made for their keys"
        )


def judge_ledger(verdict: Verdict, ledger: Path, table: str, mode: str) -> None:
    """The ledger's committed rows for the table add up to the table (exactly-once modes)."""
    try:
        view = ledger_view(str(ledger), table)
    except LedgerError as exc:
        verdict.problems.append(f"the ledger at {ledger} cannot be read: {exc}")
        return
    verdict.ledger_rows, verdict.ledger_writes = view.rows, view.writes
    if traits_of(mode).exactly_once and view.rows != verdict.rows:
        verdict.problems.append(
            f"the ledger's committed writes hold {view.rows:,} rows; the table {verdict.rows:,}"
        )


def _median(samples: list[Sample], name: str) -> float | None:
    values = [float(getattr(s, name)) for s in samples]
    return statistics.median(values) if values else None


def judge_flatness(
    verdict: Verdict,
    samples: list[Sample],
    seconds: float,
    began_s: float = 0.0,
    starts: Sequence[float] = (),
) -> None:
    """The last quarter's medians against the second's, for memory, threads, connections,
    the quarters of the time from ``began_s`` (the first commit) to ``seconds``: samples
    while the driver was down (no JVM) left out, and those of a driver younger than
    :data:`FLAT_WARM_UP_S` (``starts``: when each driver started)."""
    span = seconds - began_s
    judged = span >= FLAT_MIN_MINUTES * 60
    up = [s for s in samples if s.jvm_threads > 0 and s.seconds <= seconds]
    warm = [s for s in up if _age(s.seconds, starts) >= FLAT_WARM_UP_S]

    def quarters(pool: list[Sample]) -> tuple[list[Sample], list[Sample]]:
        second = [s for s in pool if began_s + span / 4 <= s.seconds < began_s + span / 2]
        return second, [s for s in pool if s.seconds >= began_s + span * 3 / 4]

    second, last = quarters(warm)
    second_all, last_all = quarters(up)
    for name, is_count in FLAT_FIGURES.items():
        before, after = _median(second, name), _median(last, name)
        figure = Flatness(
            name, before, after, None, _median(second_all, name), _median(last_all, name)
        )
        verdict.flatness.append(figure)
        if not judged or before is None or after is None or len(second) < 2 or len(last) < 2:
            continue
        slack = max(FLAT_TOLERANCE * before, 1.0 if is_count else 0.0)
        figure.flat = abs(after - before) <= slack
        if not figure.flat:
            verdict.problems.append(
                f"{name}{NOT_FLAT}median {before:g} in the second quarter, {after:g} in "
                f"the last (drivers past their first {FLAT_WARM_UP_S / 60:g} minutes; more "
                f"than {FLAT_TOLERANCE:.0%} apart)"
            )


def _age(at_s: float, starts: Sequence[float]) -> float:
    """How long the driver of a sample taken at ``at_s`` had been running."""
    return at_s - max((t for t in starts if t <= at_s), default=0.0)


def judge_streams(  # noqa: PLR0917 - one call site, every argument named there
    verdict: Verdict,
    samples: list[Sample],
    warm_up_s: float,
    stopped_s: float,
    mode: str,
    partitions: int,
    faults_after_warm_up: int,
) -> None:
    """Streams created after the warm-up: at most one per partition per stream lifetime.
    A PENDING stream lives one micro-batch; a BUFFERED or COMMITTED one as long as its
    query (a fault may end every partition's); ``_default`` is never created. Counted up
    to the stop (``stopped_s``): the drain is a query of its own."""
    warm = [s for s in samples if warm_up_s <= s.seconds <= stopped_s]
    if not warm:
        return
    start, end = warm[0], warm[-1]
    verdict.streams_after_warm_up = end.streams_created - start.streams_created
    traits = traits_of(mode)
    if not traits.creates_streams:
        lifetimes = 0
    elif traits.slotted:
        lifetimes = faults_after_warm_up
    else:  # a stream per task attempt: per micro-batch, and per retried task
        lifetimes = end.batches_committed - start.batches_committed + faults_after_warm_up
    verdict.streams_allowed = partitions * lifetimes
    if verdict.streams_after_warm_up > verdict.streams_allowed:
        verdict.problems.append(
            f"{verdict.streams_after_warm_up} streams created after warm-up; at most "
            f"{verdict.streams_allowed} ({partitions} partitions x {lifetimes} lifetimes)"
        )
