"""One run, set up and measured: the stand-ins, a counting proxy in front of each, a local
BigQuery and one Spark session whose every process reaches the stores through the
proxies; then each store's queries, one mode at a time; in this process or a fresh one."""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from onceover.modes import traits_of
from onceover_tools.bench.ledger_stores.api import APIS
from onceover_tools.bench.ledger_stores.figures import (
    BatchRequests,
    Latency,
    LedgerQuery,
    LedgerStores,
)
from onceover_tools.bench.ledger_stores.plan import (
    BATCH_S,
    BUCKET_PREFIX,
    DATASET,
    FIRST_BATCH_S,
    JSON_NAME,
    PARTITIONS,
    POSIX,
    ROWS_PER_BATCH,
)
from onceover_tools.bench.ledger_stores.proxy import CountingProxy, Request
from onceover_tools.bench.stream_economy import counting
from onceover_tools.bench.stream_economy.plan import TRIGGER
from onceover_tools.bench.stream_economy.report import say
from onceover_tools.bench.stream_economy.session import Bench, bench_session
from onceover_tools.localstores import LocalGCS, LocalS3, StandInProcess

STAND_INS: dict[str, type[LocalS3] | type[LocalGCS]] = {"s3": LocalS3, "gcs": LocalGCS}


@dataclass(frozen=True)
class Store:
    """Where one store's queries keep their ledgers: a stand-in behind its proxy, or
    (both None) the disk beside the checkpoint."""

    name: str
    stand_in: StandInProcess | None = None
    proxy: CountingProxy | None = None


def _through(stand_in: StandInProcess, proxy: CountingProxy) -> dict[str, str]:
    """The stand-in's client variables, its endpoint replaced by the proxy's: whichever
    variable a client reads to find the store (``AWS_ENDPOINT_URL``,
    ``STORAGE_EMULATOR_HOST``) leads it to the proxy."""
    return {
        name: proxy.endpoint if value == stand_in.endpoint else value
        for name, value in stand_in.environment().items()
    }


def _batches(
    progress_figures: list[tuple[int, float]], spans: list[tuple[int, int]],
    proxy: CountingProxy | None, bucket: str,
) -> tuple[list[BatchRequests], list[list[Request]]]:  # fmt: skip
    """Each batch's requests: those the proxy forwarded for ``bucket`` within its span."""
    batches, requests = [], []
    for (batch_id, add_batch_ms), (start, end) in zip(progress_figures, spans, strict=True):
        seen = proxy.since(start, end, bucket=bucket) if proxy is not None else []
        requests.append(seen)
        batches.append(BatchRequests(batch_id, dict(Counter(r.kind for r in seen)), add_batch_ms))
    return batches, requests


def run_query(bench: Bench, store: Store, mode: str, batches: int) -> LedgerQuery:
    """``batches`` micro-batches of the user's query in ``mode``, its ledger on ``store``:
    one file put in at a time, the next only once Spark reported the batch before it,
    so each batch's requests are those between two reports (no other query runs, and
    an idle trigger calls no sink)."""
    figure = LedgerQuery(store.name, mode, expected_rows=batches * bench.rows_per_batch,
                         exactly_once=traits_of(mode).exactly_once)  # fmt: skip
    name = f"{store.name}_{mode}"
    try:
        table_id = bench.fresh_table(name)
        options, bucket = {}, ""
        if store.stand_in is not None:
            url = store.stand_in.create_bucket(f"{BUCKET_PREFIX}-{mode}")
            bucket = url.split("://", 1)[1]
            options["ledger"] = f"{url}/ledger"
        files = bench.files(name, 0, batches)
        proxy = store.proxy
        spans: list[tuple[int, int]] = []
        mark = proxy.mark() if proxy is not None else 0  # the query's start is its first batch's
        with bench.query(name, table_id, mode, options) as progress:
            for done, path in enumerate(files, start=1):
                bench.put(name, [path])
                progress.wait_for(done, FIRST_BATCH_S if done == 1 else BATCH_S)
                end = proxy.mark() if proxy is not None else 0
                spans.append((mark, end))
                mark = end
        seen = [(b.batch_id, b.add_batch_ms) for b in progress.figures()]
        figure.batches, requests = _batches(seen, spans, proxy, bucket)
        steady: defaultdict[str, list[float]] = defaultdict(list)
        for each in requests[1:]:
            for request in each:
                steady[request.kind].append(request.seconds)
        figure.latency = {kind: Latency.of(seconds) for kind, seconds in steady.items()}
        figure.statuses = dict(Counter(str(r.status) for each in requests for r in each))
        figure.counted, figure.distinct = counting.count(bench, table_id)
        if not figure.exact:
            raise RuntimeError(
                f"BigQuery holds {figure.counted:,} rows ({figure.distinct:,} distinct), "
                f"{figure.expected_rows:,} were written"
            )
    except Exception as exc:
        figure.failed = f"{type(exc).__name__}: {exc}"[:600]
        say(f"FAILED: {name}: {figure.failed}")
        traceback.print_exc()
    return figure


def query_line(figure: LedgerQuery) -> str:
    """One query's figures, as the run prints them when it stopped."""
    if figure.failed:
        return f"  {figure.store:<5} {figure.mode:<10} FAILED: {figure.failed}"
    early, late, growth = figure.mean(figure.early()), figure.mean(figure.late()), figure.growth
    counts = "no requests (a disk)" if figure.api is None else (
        f"requests per batch {early or 0:.1f} over the first {figure.window} steady, "
        f"{late or 0:.1f} over the last ({'n/a' if growth is None else f'{growth:.2f}x'})"
    )  # fmt: skip
    return (
        f"  {figure.store:<5} {figure.mode:<10} {len(figure.batches)} micro-batches, "
        f"{figure.counted:,} rows ({figure.distinct:,} distinct) counted in BigQuery; {counts}; "
        f"addBatch p50 {figure.add_batch(0.5) or 0:,.0f} ms"
    )


def measure(
    tmp: Path,
    batches: int,
    stores: Sequence[str],
    modes: Sequence[str],
    *,
    rows_per_batch: int = ROWS_PER_BATCH,
) -> LedgerStores:
    """Every figure, in this process: it starts Spark, so call it in a process with no
    JVM yet (:func:`measure_in_child` runs it in a fresh one)."""
    result = LedgerStores(batches, rows_per_batch, list(stores), list(modes))
    try:
        with ExitStack() as stack:
            chosen: list[Store] = []
            environment: dict[str, str] = {}
            for name in stores:
                if name == POSIX:
                    chosen.append(Store(name))
                    continue
                log = tmp / f"local-{name}.log"
                stand_in = stack.enter_context(STAND_INS[name](log_path=log))
                proxy = stack.enter_context(CountingProxy(stand_in.endpoint, APIS[name]))
                environment.update(_through(stand_in, proxy))
                chosen.append(Store(name, stand_in, proxy))
            bench = stack.enter_context(bench_session(
                tmp, "onceover-bench-ledger-stores", rows_per_batch=rows_per_batch,
                dataset=DATASET, environment=environment,
            ))  # fmt: skip
            say(
                f"{batches} micro-batches of {rows_per_batch} rows per mode and store, "
                f"{PARTITIONS} partitions, trigger {TRIGGER}; stores {', '.join(stores)}, "
                f"modes {', '.join(modes)}, one query at a time"
            )
            for store in chosen:
                for mode in modes:
                    figure = run_query(bench, store, mode, batches)
                    result.queries.append(figure)
                    say(query_line(figure))
    except Exception as exc:
        result.failed = f"{type(exc).__name__}: {exc}"[:600]
        say(f"FAILED: {result.failed}")
        traceback.print_exc()
    return result


def measure_in_child(
    out: Path,
    batches: int,
    stores: Sequence[str],
    modes: Sequence[str],
    say: Callable[[str], None] = say,
) -> LedgerStores:
    """:func:`measure` in a fresh Python process (its own JVM, started with the proxies'
    endpoints), its output passed through; the figures it wrote into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_NAME).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "onceover_tools.bench.ledger_stores",
            "--batches", str(batches), "--stores", ",".join(stores),
            "--modes", ",".join(modes), "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, check=False)
    figures = out / JSON_NAME
    if not figures.exists():
        say(f"FAILED: ledger stores: exited {done.returncode} without figures")
        return LedgerStores(batches, ROWS_PER_BATCH, list(stores), list(modes),
                            failed=f"exited {done.returncode}")  # fmt: skip
    return LedgerStores.from_json(json.loads(figures.read_text())["figures"])
