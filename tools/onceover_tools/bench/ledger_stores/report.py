"""The bench's words: a run's figures as Markdown tables, one per store, and its targets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.bench.ledger_stores.api import APIS, StoreApi
from onceover_tools.bench.ledger_stores.figures import LedgerQuery, LedgerStores
from onceover_tools.bench.ledger_stores.plan import (
    BATCHES_PER_HOUR,
    FLAT_TARGET,
    PARTITIONS,
    POSIX,
    window,
)
from onceover_tools.bench.ledger_stores.prices import HOURS_PER_MONTH
from onceover_tools.bench.stream_economy.economy import Goal
from onceover_tools.bench.stream_economy.plan import KEY, TRIGGER

STAND_IN_NAMES = {"s3": "moto's S3 server", "gcs": "the patched Cloud Storage stand-in"}


def _cell(value: float | None, fmt: str) -> str:
    return "FAILED" if value is None else format(value, fmt)


def _ratio(value: float | None) -> str:
    return "FAILED" if value is None else f"{value:.2f}x"


def _rows_cell(figure: LedgerQuery) -> str:
    if figure.counted is None or figure.distinct is None:
        return "FAILED"
    verdict = "exact" if figure.exactly_once else "at least once"
    return f"{figure.counted:,} / {figure.distinct:,} ({verdict if figure.exact else 'WRONG'})"


def _add_batch(figure: LedgerQuery) -> str:
    return f"{_cell(figure.add_batch(0.5), ',.0f')} / {_cell(figure.add_batch(0.95), ',.0f')}"


def _dollars(value: float | None) -> str:
    return "FAILED" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _span(figure: LedgerQuery, late: bool) -> str:
    """Which batch ids a window holds, as the report names them."""
    chosen = figure.late() if late else figure.early()
    return f"batches {chosen[0].batch_id} to {chosen[-1].batch_id}" if chosen else "none"


def growth_name(api: StoreApi, mode: str, result: LedgerStores) -> str:
    each = window(result.batches)
    return (
        f"ledger requests per micro-batch, last {each} / first {each} batches, `{mode}` on "
        f"{api.name}"
    )


def goals(result: LedgerStores) -> list[Goal]:
    """The target: each mode's requests per micro-batch flat in the batches its ledger
    holds (the last window over the first), on each object store."""
    every = []
    for store in result.stores:
        if store == POSIX:
            continue
        for mode in result.modes:
            figure = result.query(store, mode)
            growth = None if figure is None or figure.failed else figure.growth
            every.append(Goal(growth_name(APIS[store], mode, result), growth, FLAT_TARGET, "x"))
    return every


def store_table(result: LedgerStores, store: str) -> list[str]:
    """One object store's queries, a column a mode, as Markdown."""
    api = APIS[store]
    queries = [q for mode in result.modes if (q := result.query(store, mode)) is not None]
    if not queries:
        return []
    first = queries[0]

    def each(fn: Callable[[LedgerQuery], str]) -> list[str]:
        return [("FAILED" if q.failed else fn(q)) for q in queries]

    def latency(kind: str) -> Callable[[LedgerQuery], str]:
        def shown(q: LedgerQuery) -> str:
            found = q.latency.get(kind)
            return "" if found is None else f"{found.p50_ms:,.1f} / {found.p95_ms:,.1f}"

        return shown

    def per_batch(kind: str) -> Callable[[LedgerQuery], str]:
        return lambda q: _cell(q.per_batch().get(kind), ",.1f")

    def per_hour(tier: str) -> Callable[[LedgerQuery], str]:
        return lambda q: _cell(q.per_hour_by_tier().get(tier), ",.0f")

    tiers = api.prices.tier_names
    rows = [
        ["micro-batches", *each(lambda q: f"{len(q.batches)}")],
        [f"rows in BigQuery, COUNT(*) / COUNT(DISTINCT {KEY})", *each(_rows_cell)],
        [f"**requests per micro-batch, first {first.window} steady batches** "
         f"({_span(first, False)})", *each(lambda q: _cell(q.mean(q.early()), ",.1f"))],
        [f"**last {first.window}** ({_span(first, True)})",
         *each(lambda q: _cell(q.mean(q.late()), ",.1f"))],
        ["**last / first** (1.00: flat in the batches stored)",
         *each(lambda q: _cell(q.growth, ".2f"))],
        *([f"  {label}, per micro-batch (last {first.window})", *each(per_batch(kind))]
          for kind, label in api.kinds.items()),
        *([f"  {label}: upstream latency p50 / p95, ms", *each(latency(kind))]
          for kind, label in api.kinds.items()),
        ["answers by HTTP status, every batch",
         *each(lambda q: ", ".join(f"{s}: {n:,}" for s, n in sorted(q.statuses.items())))],
        ["sink time per batch (addBatch) p50 / p95, ms",
         *each(_add_batch)],
        [f"**requests per hour** ({BATCHES_PER_HOUR:,.0f} micro-batches at the last "
         f"{first.window}'s count)",
         *each(lambda q: _cell(sum(q.per_hour().values()), ",.0f"))],
        *([f"  {tier}", *each(per_hour(tier))] for tier in tiers),
        ["**$ per hour** at list price", *each(lambda q: _dollars(q.dollars_per_hour()))],
        [f"**$ per month** ({HOURS_PER_MONTH:g} h)",
         *each(lambda q: _dollars(q.dollars_per_month()))],
    ]  # fmt: skip
    return [
        f"| {api.name} ({STAND_IN_NAMES[store]}) | "
        + " | ".join(f"`{q.mode}`" for q in queries)
        + " |",
        "|---|" + "---:|" * len(queries),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def posix_table(result: LedgerStores) -> list[str]:
    """The disk's queries (no request to count): their rows and their time per batch."""
    queries = [q for mode in result.modes if (q := result.query(POSIX, mode)) is not None]
    if not queries:
        return []
    rows = [
        ["micro-batches", *(f"{len(q.batches)}" for q in queries)],
        [f"rows in BigQuery, COUNT(*) / COUNT(DISTINCT {KEY})", *(_rows_cell(q) for q in queries)],
        ["sink time per batch (addBatch) p50 / p95, ms",
         *(_add_batch(q) for q in queries)],
    ]  # fmt: skip
    return [
        "| a disk (the reference) | " + " | ".join(f"`{q.mode}`" for q in queries) + " |",
        "|---|" + "---:|" * len(queries),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def how(result: LedgerStores) -> str:
    """How the figures were taken, under the tables."""
    prices = " ".join(
        f"{api.prices.store}: {', '.join(f'{t.name} ${t.usd_per_1000:g}' for t in _tiers(api))} "
        f"per 1,000, {', '.join(sorted(api.prices.free))} free ({api.prices.source}, list "
        f"price as of {api.prices.as_of})."
        for store, api in APIS.items()
        if store in result.stores
    )
    return (
        f'A user\'s query (JSON files, one per micro-batch, `repartition({PARTITIONS}, "{KEY}")`, '
        f'trigger {TRIGGER}) into `format("onceover")`, its checkpoint on the disk and its '
        "`ledger` option a bucket's URL on each stand-in (Spark writes a checkpoint in a "
        "bucket only through Hadoop's connectors, which this Spark does not ship: Spark's "
        "own checkpoint requests are not counted); every process (the driver and "
        "each Python worker) reaches the store through a counting proxy of the bench's, "
        "which classifies each request as the store's API names it and times it "
        "upstream. One query at a time, a bucket of its own; a file is put in only once "
        "Spark reported the batch before, so a batch's requests are those forwarded "
        "between two reports. The first batch (the ledger's claim, the probe, the "
        "streams opened) is left out of the windows and the latencies. Per hour: "
        f"{BATCHES_PER_HOUR:,.0f} micro-batches (a 1 s trigger kept) at the last window's "
        f"count. {prices} Storage, egress and BigQuery are not in the dollars."
    )


def _tiers(api: StoreApi) -> list[Any]:
    unique = {tier.name: tier for tier in api.prices.tiers.values()}
    return [unique[name] for name in api.prices.tier_names]


def section(result: LedgerStores) -> list[str]:
    """Every table of the run, under one heading (the full bench's report and the bench
    alone print the same)."""
    lines = [
        f"### Ledger stores: the object requests of a streaming query's micro-batch, "
        f"{PARTITIONS} partitions, trigger {TRIGGER}, {result.batches} micro-batches of "
        f"{result.rows_per_batch} rows per mode",
        "",
    ]
    for store in result.stores:
        if store != POSIX and (table := store_table(result, store)):
            lines += [*table, ""]
    if table := posix_table(result):
        lines += [*table, ""]
    lines.append(how(result))
    if result.failed:
        lines += ["", f"FAILED: {result.failed}"]
    return lines


def markdown(result: LedgerStores, header: dict[str, Any]) -> list[str]:
    """The bench alone: its header, its targets and its tables."""
    mark = {True: "met", False: "**missed**", None: "FAILED"}
    return [
        "# Ledger stores",
        "",
        f"`{header['command']}` on {header['generated_at']}, commit {header['commit']}; "
        f"{header['machine']}.",
        "",
        "| target | value | goal | status |",
        "|---|---:|---:|---|",
        *(f"| {g.name} | {_ratio(g.value)} | ≤ {g.goal:.2f}x | {mark[g.met]} |"
          for g in goals(result)),
        "",
        *section(result),
    ]  # fmt: skip
