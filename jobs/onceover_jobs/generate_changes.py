"""Synthetic change data capture: a key set's inserts, updates and deletes in K files, in order,
and the state they leave.

    python -m onceover_jobs.generate_changes --out DIR --changes N [--files K]
        [--apart A] [--format parquet|json] [--seed S]

Columns: ``customer_id`` (INT64, the table's primary key), ``version`` (INT64: the key's
n-th change, from 1), ``name`` (STRING), ``balance`` (INT64) and ``_CHANGE_TYPE``
(``UPSERT`` or ``DELETE``; a DELETE carries its key and version, the rest NULL). The first
change of a key inserts it; later ones update it or delete it, and a deleted key may be
inserted again. The same arguments always write the same files (:func:`change_tables`),
and :func:`final_state` says what a table that applied them in order holds, key by key.

Why the files are shaped so (the sink's derived sequence numbers,
``onceover_jobs.sink.rows.change_capture``, order batches by time and, within a batch, a
key's changes by partition, and a file source packs files into partitions by size, not by
name): each file changes a key at most once, a key's changes are at least ``apart`` files
apart, and the files' modification times follow their order (the file source takes them
by modification time). So any ``apart`` consecutive files, which is what a micro-batch of
``maxFilesPerTrigger`` ≤ ``apart`` reads, change each key at most once, and a key's later
change is always in a later micro-batch, whichever partition each file lands in.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from onceover.console import run
from onceover_jobs.generate import file_bounds

FORMATS = ("parquet", "json")
KEY = "customer_id"
CHANGE_TYPE = "_CHANGE_TYPE"
CHANGE_SCHEMA = (
    "customer_id BIGINT, version BIGINT, name STRING, balance BIGINT, _CHANGE_TYPE STRING"
)
"""The change files' columns, as Spark reads them (``readStream.schema(...)``)."""
TABLE_COLUMNS = (("customer_id", "INT64"), ("version", "INT64"), ("name", "STRING"),
                 ("balance", "INT64"))  # fmt: skip
"""The mirrored table's columns (BigQuery types); ``customer_id`` is its primary key."""
DELETE_SHARE = 0.25
"""Of the changes to a live key, the share that delete it (the rest update it)."""
_CHANGES_STREAM = 0xCDC
"""Keeps these draws apart from other generators' draws of the same seed."""


@dataclass(frozen=True)
class Row:
    """A key's row as the table holds it after its last change, an UPSERT."""

    version: int
    name: str
    balance: int


def key_count(changes: int, files: int, apart: int) -> int:
    """How many keys the changes are drawn from: enough that each file can pick its keys
    among those the ``apart - 1`` files before it left alone, with room to choose."""
    per_file = math.ceil(changes / files) if files else 0
    return max(1, per_file * (apart + 1))


def change_tables(changes: int, files: int, seed: int, *, apart: int = 2) -> list[pa.Table]:
    """The changes, file by file, in order: ``changes`` rows over ``files`` files, each
    file changing a key at most once and a key's changes ``apart`` files apart or more."""
    if changes < 0 or files < 1 or apart < 1:
        raise ValueError("changes must be >= 0, files and apart >= 1")
    rng = np.random.default_rng([seed & 0xFFFF_FFFF_FFFF_FFFF, _CHANGES_STREAM])
    keys = key_count(changes, files, apart)
    bounds = file_bounds(changes, files)
    versions: dict[int, int] = {}
    alive: set[int] = set()
    last_file: dict[int, int] = {}
    tables = []
    for index in range(files):
        eligible = np.array([k for k in range(keys) if last_file.get(k, -apart) <= index - apart])
        picked = np.sort(
            rng.choice(eligible, size=bounds[index + 1] - bounds[index], replace=False)
        )
        deletes = rng.random(len(picked)) < DELETE_SHARE  # drawn whole: one draw per file
        balances = rng.integers(0, 1_000_000, len(picked))
        rows: dict[str, list[object]] = {"customer_id": [], "version": [], "name": [],
                                         "balance": [], CHANGE_TYPE: []}  # fmt: skip
        for key, delete, balance in zip(picked.tolist(), deletes, balances.tolist(), strict=True):
            version = versions.get(key, 0) + 1
            versions[key] = version
            last_file[key] = index
            gone = bool(delete) and key in alive
            (alive.discard if gone else alive.add)(key)
            rows["customer_id"].append(key)
            rows["version"].append(version)
            rows["name"].append(None if gone else f"customer-{key}-v{version}")
            rows["balance"].append(None if gone else balance)
            rows[CHANGE_TYPE].append("DELETE" if gone else "UPSERT")
        tables.append(pa.table(rows, schema=_ARROW_SCHEMA))
    return tables


_ARROW_SCHEMA = pa.schema([
    pa.field("customer_id", pa.int64()), pa.field("version", pa.int64()),
    pa.field("name", pa.string()), pa.field("balance", pa.int64()),
    pa.field(CHANGE_TYPE, pa.string()),
])  # fmt: skip


def final_state(tables: Sequence[pa.Table]) -> dict[int, Row]:
    """What a table holds after applying ``tables``' changes in order: each key's last
    UPSERT, deleted keys gone."""
    state: dict[int, Row] = {}
    for table in tables:
        for change in table.to_pylist():
            key = change["customer_id"]
            if change[CHANGE_TYPE] == "DELETE":
                state.pop(key, None)
            else:
                state[key] = Row(change["version"], change["name"], change["balance"])
    return state


def change_counts(tables: Sequence[pa.Table]) -> Mapping[str, int]:
    """The source's upserts and deletes, counted."""
    types = [t for table in tables for t in table.column(CHANGE_TYPE).to_pylist()]
    return {"upserts": types.count("UPSERT"), "deletes": types.count("DELETE")}


def write_change_files(
    out: Path,
    changes: int,
    files: int,
    fmt: str = "parquet",
    *,
    seed: int = 0,
    apart: int = 2,
) -> list[Path]:
    """Write :func:`change_tables` into ``out``, one file each, their modification times a
    second apart in order (a file source reads them in that order); returns their paths."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    out.mkdir(parents=True, exist_ok=True)
    first_mtime = int(time.time()) - files
    written = []
    for index, table in enumerate(change_tables(changes, files, seed, apart=apart)):
        path = out / f"changes-{index:04d}.{fmt}"
        temp = path.with_name(f".{path.name}.tmp")  # a streaming source must never see half a file
        if fmt == "parquet":
            pq.write_table(table, temp)
        else:
            with temp.open("w") as handle:
                for row in table.to_pylist():
                    handle.write(json.dumps(row) + "\n")
        os.utime(temp, (first_mtime + index, first_mtime + index))
        temp.replace(path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_jobs.generate_changes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument("--changes", type=int, required=True, help="number of changes")
    parser.add_argument("--files", type=int, default=6, help="number of files (default 6)")
    parser.add_argument("--apart", type=int, default=2,
                        help="a key's changes at least this many files apart: read at most "
                             "this many files per micro-batch (default 2)")  # fmt: skip
    parser.add_argument("--format", choices=FORMATS, default="parquet")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.changes < 0 or args.files < 1 or args.apart < 1:
        parser.error("--changes must be >= 0, --files and --apart >= 1")
    paths = write_change_files(
        args.out, args.changes, args.files, args.format, seed=args.seed, apart=args.apart
    )
    tables = change_tables(args.changes, args.files, args.seed, apart=args.apart)
    counts = change_counts(tables)
    print(
        f"Wrote {args.changes:,} changes ({counts['upserts']:,} upserts, {counts['deletes']:,} "
        f"deletes) of {key_count(args.changes, args.files, args.apart):,} keys into "
        f"{len(paths)} {args.format} files in {args.out}; {len(final_state(tables)):,} keys remain."
    )
    return 0


if __name__ == "__main__":
    run(main, prog="onceover_jobs.generate_changes")
