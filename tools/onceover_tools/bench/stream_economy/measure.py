"""One run, set up and measured: a local BigQuery in a child process, one Spark session,
the warm-up, the modes interleaved, the soak; in this process or in a fresh one."""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from onceover_tools.bench.stream_economy.economy import Economy, default_mode
from onceover_tools.bench.stream_economy.interleaved import run_modes, warm_up
from onceover_tools.bench.stream_economy.plan import (
    JSON_NAME,
    MODES,
    PARTITIONS,
    ROWS_PER_BATCH,
    SAMPLE_S,
    SEGMENT,
    TRIGGER,
    WARMUP_BATCHES,
)
from onceover_tools.bench.stream_economy.report import say
from onceover_tools.bench.stream_economy.session import bench_session
from onceover_tools.bench.stream_economy.soak import run_soak


def measure(
    tmp: Path,
    batches: int,
    soak_minutes: float,
    *,
    rows_per_batch: int = ROWS_PER_BATCH,
    sample_s: float = SAMPLE_S,
    warmup_batches: int = WARMUP_BATCHES,
    segment: int = SEGMENT,
) -> Economy:
    """Every figure, in this process: it starts Spark, so call it in a process whose JVM
    (if any) was started with this run's local BigQuery; :func:`measure_in_child` runs it
    in a fresh one."""
    result = Economy(batches=batches, rows_per_batch=rows_per_batch, segment=segment)
    try:
        with bench_session(
            tmp, "onceover-bench-stream-economy", rows_per_batch=rows_per_batch
        ) as bench:
            warm_up(bench, warmup_batches)
            say(
                f"{batches} micro-batches of {rows_per_batch} rows per mode, "
                f"{PARTITIONS} partitions, trigger {TRIGGER}; the modes and the floor "
                f"(Spark's hand-off) interleaved: their first batches, then "
                f"{result.rounds} rounds of {segment} micro-batches per mode in turn"
            )
            *result.modes, result.floor = run_modes(
                bench, [(mode, mode) for mode in MODES], batches, segment,
                result.round_loads, floor=True,
            )  # fmt: skip
            if soak_minutes > 0:
                say(
                    f"soak: the query with no mode option (`{default_mode()}`) for "
                    f"{soak_minutes:g} min, sampled every {sample_s:g} s"
                )
                result.soak = run_soak(bench, soak_minutes, sample_s)
    except Exception as exc:
        result.failed = f"{type(exc).__name__}: {exc}"[:600]
        say(f"FAILED: {result.failed}")
        traceback.print_exc()
    return result


def measure_in_child(
    out: Path, batches: int, soak_minutes: float, say: Callable[[str], None] = say
) -> Economy:
    """:func:`measure` in a fresh Python process (its own JVM, its own local BigQuery),
    its output passed through; the figures it wrote into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_NAME).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "onceover_tools.bench.stream_economy", "--batches", str(batches),
            "--soak-minutes", f"{soak_minutes:g}", "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, check=False)
    figures = out / JSON_NAME
    if not figures.exists():
        say(f"FAILED: stream economy: exited {done.returncode} without figures")
        return Economy(batches, ROWS_PER_BATCH, failed=f"exited {done.returncode}")
    return Economy.from_json(json.loads(figures.read_text())["figures"])
