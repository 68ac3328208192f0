"""The command line: ``python -m onceover_tools.bench.stream_economy [options]``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from onceover_tools.bench import stream_economy
from onceover_tools.bench.stream_economy.measure import measure
from onceover_tools.bench.stream_economy.plan import (
    BATCHES,
    JSON_NAME,
    MARKDOWN_NAME,
    PARTITIONS,
    ROWS_PER_BATCH,
    SAMPLE_S,
    SEGMENT,
    SOAK_MINUTES,
    WARMUP_BATCHES,
)
from onceover_tools.bench.stream_economy.report import markdown, say


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="stream_economy.py",  # the usage line as it read when the bench was one module
        description=(stream_economy.__doc__ or "").split("\n")[0],
    )
    parser.add_argument("--batches", type=int, default=BATCHES, help="micro-batches per mode")
    parser.add_argument("--segment", type=int, default=SEGMENT,
                        help="micro-batches each mode runs in its turn of a round")  # fmt: skip
    parser.add_argument("--soak-minutes", type=float, default=SOAK_MINUTES,
                        help="how long the soak runs; 0 skips it")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="write JSON and Markdown here")
    parser.add_argument("--rows-per-batch", type=int, default=ROWS_PER_BATCH)
    parser.add_argument("--sample-seconds", type=float, default=SAMPLE_S,
                        help="the soak's sampling interval")  # fmt: skip
    parser.add_argument("--warmup-batches", type=int, default=WARMUP_BATCHES,
                        help="untimed micro-batches before the modes (0: none)")  # fmt: skip
    args = parser.parse_args()
    if args.batches < 2 or args.segment < 1 or args.rows_per_batch < PARTITIONS:
        parser.error(f"--batches must be >= 2, --segment >= 1 and --rows-per-batch >= {PARTITIONS}")
    if args.soak_minutes < 0 or args.sample_seconds <= 0 or args.warmup_batches < 0:
        parser.error("--soak-minutes and --warmup-batches must be >= 0, --sample-seconds > 0")
    from onceover_tools.bench.provenance import current_commit, machine

    header = {
        "command": "python -m onceover_tools.bench.stream_economy " + " ".join(sys.argv[1:]),
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": current_commit(),
        "machine": machine(),
    }
    say(f"machine: {header['machine']}")
    with tempfile.TemporaryDirectory(prefix="onceover-bench-economy-") as tmp:
        result = measure(
            Path(tmp), args.batches, args.soak_minutes, rows_per_batch=args.rows_per_batch,
            sample_s=args.sample_seconds, warmup_batches=args.warmup_batches,
            segment=args.segment,
        )  # fmt: skip
    load = os.getloadavg()
    header["load_at_end"] = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    lines = markdown(result, header)
    say("\n" + "\n".join(lines))
    say(f"\nload average at the end {header['load_at_end']}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / MARKDOWN_NAME).write_text("\n".join(lines) + "\n")
        document = {**header, "figures": result.as_json()}
        (args.out / JSON_NAME).write_text(json.dumps(document, indent=2) + "\n")
        say(f"written: {args.out / MARKDOWN_NAME}, {args.out / JSON_NAME}")
    return 1 if result.any_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
