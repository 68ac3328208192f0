"""The soak: the query as ``writeStream`` runs it by default, for minutes, its process
tree sampled as it goes."""

from __future__ import annotations

import time
import traceback

from onceover_tools.bench.stream_economy import counting
from onceover_tools.bench.stream_economy.figures import QueryFigure, Soak
from onceover_tools.bench.stream_economy.plan import BACKLOG, BATCH_S, FIRST_BATCH_S, POLL_S
from onceover_tools.bench.stream_economy.report import sample_line, say
from onceover_tools.bench.stream_economy.session import Bench


def run_soak(bench: Bench, minutes: float, sample_s: float) -> Soak:
    """The query with no mode option for ``minutes``, sampled every ``sample_s``."""
    from onceover_jobs.generate import write_files

    name = "soak"
    soak = Soak(minutes, sample_s, QueryFigure(name, None))
    try:
        table_id = bench.fresh_table(name)
        source = bench.put(name, bench.files(name, 0, 1))
        put = 1
        with bench.query(name, table_id, None) as progress:
            progress.wait_for(1, FIRST_BATCH_S)
            soak.query.streams.first_batch = counting.created(bench, table_id)
            began = time.monotonic()
            soak.samples.append(bench.tree.sample(0.0, soak.query.streams.first_batch, 1))
            ends, next_sample = began + minutes * 60, began + sample_s
            next_check, peak = began + 1, 0
            while (now := time.monotonic()) < ends:
                progress.poll()
                progress.alive()
                if put - len(progress.batches) < BACKLOG:
                    write_files(source, bench.rows_per_batch, 1, "json",
                                start=put * bench.rows_per_batch)  # fmt: skip
                    put += 1
                if now >= next_check:
                    peak = max(peak, bench.tree.connections()[0])
                    next_check += 1
                if now >= next_sample:
                    soak.samples.append(bench.tree.sample(
                        now - began, counting.created(bench, table_id), len(progress.batches), peak
                    ))  # fmt: skip
                    say(sample_line(soak.samples[-1]))
                    next_sample, peak = next_sample + sample_s, 0
                time.sleep(POLL_S)
            progress.wait_for(put, BATCH_S * BACKLOG + BATCH_S)
            soak.samples.append(bench.tree.sample(
                time.monotonic() - began, counting.created(bench, table_id),
                len(progress.batches), peak,
            ))  # fmt: skip
            say(sample_line(soak.samples[-1]))
        soak.query.expected_rows = put * bench.rows_per_batch
        counting.settle(bench, soak.query, progress, table_id)
    except Exception as exc:
        soak.query.failed = f"{type(exc).__name__}: {exc}"[:600]
        say(f"FAILED: soak: {soak.query.failed}")
        traceback.print_exc()
        return soak
    say(
        f"  soak: {len(soak.query.batches)} micro-batches, {soak.query.counted:,} rows "
        f"({soak.query.distinct:,} distinct) counted in BigQuery; streams "
        f"{soak.query.streams.total} ({soak.query.streams.types})"
    )
    return soak
