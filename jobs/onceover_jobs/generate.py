"""Synthetic order events for loads and tests: N rows with unique ``event_id`` in K files.

    python -m onceover_jobs.generate --out DIR --rows N [--files K] [--format json|csv|parquet]
                            [--start ID] [--seed S] [--bad-fraction F]

Columns: ``event_id`` (INT64, unique: START..START+N-1), ``order_id`` (STRING),
``customer_id`` (INT64), ``amount`` (FLOAT64), ``currency`` (STRING), ``event_time``
(TIMESTAMP as ISO-8601 text in JSON/CSV, a timestamp in Parquet). The same arguments
always write the same files, so a test or a chaos schedule can be replayed.

``--bad-fraction 0.005`` makes that share of the rows (at least one; which ones is
drawn from the seed: :func:`bad_keys`) *bad*: their ``currency`` is longer than three
characters (``EURO-X``, ...), which a table whose ``currency`` is ``STRING(3)``
refuses. The other columns, and every other row, are what they are without it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from onceover.console import run

FORMATS = ("json", "csv", "parquet")
EPOCH_2026 = 1_767_225_600  # 2026-01-01T00:00:00Z
CURRENCIES = np.array(["EUR", "USD", "GBP", "JPY"])
BAD_CURRENCIES = np.array(["EURO-X", "DOLLARS", "POUNDS", "YEN-JP"])
"""What a bad row carries in ``currency``: each longer than a ``STRING(3)`` column takes."""
_BAD_STREAM = 0xBAD
"""Keeps the draw of bad keys apart from the columns' draws of the same seed."""


def bad_keys(rows: int, fraction: float, seed: int, *, start: int = 0) -> list[int]:
    """The ``event_id`` of the bad rows among ``start..start+rows-1``, sorted:
    ``round(rows * fraction)`` of them (at least one when ``fraction`` > 0 and there
    are rows), drawn from ``seed`` alone, so the same arguments pick the same rows."""
    if not 0 <= fraction <= 1:
        raise ValueError("the fraction of bad rows must be between 0 and 1")
    if fraction == 0 or rows <= 0:
        return []
    count = min(rows, max(1, round(rows * fraction)))
    rng = np.random.default_rng([seed & 0xFFFF_FFFF_FFFF_FFFF, _BAD_STREAM])
    picked = rng.choice(rows, size=count, replace=False)
    return sorted(int(start + key) for key in picked)


def order_events(start: int, rows: int, seed: int, bad: Collection[int] = ()) -> pa.Table:
    """``rows`` order events with ``event_id`` start..start+rows-1; those whose id is in
    ``bad`` carry a currency longer than three characters."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + rows, dtype=np.int64)
    seconds = EPOCH_2026 + ids * 7 + rng.integers(0, 5, rows)
    customers = rng.integers(1, 50_000, rows, dtype=np.int64)  # drawn in this order
    amounts = np.round(rng.uniform(0.5, 2_000.0, rows), 2)
    currency = CURRENCIES[rng.integers(0, len(CURRENCIES), rows)]
    broken = np.isin(ids, np.fromiter(bad, dtype=np.int64, count=len(bad)))
    if broken.any():  # no draw from rng: the other columns stay as they were
        currency = currency.astype(BAD_CURRENCIES.dtype)
        currency[broken] = BAD_CURRENCIES[ids[broken] % len(BAD_CURRENCIES)]
    return pa.table(
        {
            "event_id": ids,
            "order_id": pa.array([f"ord-{i:010d}" for i in ids]),
            "customer_id": customers,
            "amount": amounts,
            "currency": currency,
            "event_time": pa.array(seconds * 1_000_000, pa.timestamp("us", tz="UTC")),
        }
    )


def write_files(
    out: Path,
    rows: int,
    files: int,
    fmt: str,
    *,
    start: int = 0,
    seed: int = 0,
    bad: Collection[int] = (),
) -> list[Path]:
    """Write the events into ``files`` files of about equal size; returns their paths.
    The rows whose ``event_id`` is in ``bad`` are bad (:func:`bad_keys`)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if rows < 0 or files < 1:
        raise ValueError("rows must be >= 0 and files >= 1")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    bounds = file_bounds(rows, files)
    for index in range(files):
        first, last = int(bounds[index]), int(bounds[index + 1])
        table = order_events(start + first, last - first, seed, bad)
        path = out / f"orders-{start + first:010d}.{fmt}"
        temp = path.with_name(f".{path.name}.tmp")  # a streaming source must never see half a file
        if fmt == "parquet":
            pq.write_table(table, temp)
        elif fmt == "csv":
            pa_csv.write_csv(table.set_column(5, "event_time", _iso(table)), temp)
        else:
            with temp.open("w") as handle:
                for row in table.set_column(5, "event_time", _iso(table)).to_pylist():
                    handle.write(json.dumps(row) + "\n")
        temp.replace(path)
        written.append(path)
    return written


def file_bounds(rows: int, files: int) -> list[int]:
    """Where the files split the rows: file ``i`` holds ids ``start + bounds[i]`` up to
    (not including) ``start + bounds[i + 1]``."""
    return [int(b) for b in np.linspace(0, rows, files + 1, dtype=np.int64)]


def _iso(table: pa.Table) -> pa.Array:
    import pyarrow.compute as pc

    text = pc.strftime(table["event_time"], format="%Y-%m-%dT%H:%M:%S")
    return pc.binary_join_element_wise(text, "Z", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_jobs.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument("--rows", type=int, required=True, help="number of events")
    parser.add_argument("--files", type=int, default=4, help="number of files (default 4)")
    parser.add_argument("--format", choices=FORMATS, default="json")
    parser.add_argument("--start", type=int, default=0, help="first event_id (default 0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--bad-fraction",
        type=float,
        default=0.0,
        help="share of rows whose currency is too long for STRING(3) (default 0: none)",
    )
    args = parser.parse_args(argv)
    if args.rows < 0 or args.files < 1:
        parser.error("--rows must be >= 0 and --files >= 1")
    if not 0 <= args.bad_fraction <= 1:
        parser.error("--bad-fraction must be between 0 and 1")
    bad = bad_keys(args.rows, args.bad_fraction, args.seed, start=args.start)
    paths = write_files(
        args.out, args.rows, args.files, args.format, start=args.start, seed=args.seed, bad=bad
    )
    print(f"Wrote {args.rows:,} events into {len(paths)} {args.format} files in {args.out}.")
    if bad:
        shown = ", ".join(str(key) for key in bad[:10]) + (", ..." if len(bad) > 10 else "")
        print(f"{len(bad):,} of them bad (currency longer than 3 characters): {shown}.")
    return 0


if __name__ == "__main__":
    run(main, prog="onceover_jobs.generate")
