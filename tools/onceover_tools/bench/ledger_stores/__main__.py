"""The command line: ``python -m onceover_tools.bench.ledger_stores [options]``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from onceover_tools.bench import ledger_stores
from onceover_tools.bench.ledger_stores.measure import measure
from onceover_tools.bench.ledger_stores.plan import (
    BATCHES,
    DEFAULT_STORES,
    JSON_NAME,
    MARKDOWN_NAME,
    MODES,
    ROWS_PER_BATCH,
    STORES,
)
from onceover_tools.bench.ledger_stores.report import markdown
from onceover_tools.bench.stream_economy.plan import PARTITIONS
from onceover_tools.bench.stream_economy.report import say


def _choices(choices: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    def parse(value: str) -> list[str]:
        chosen = [part.strip() for part in value.split(",") if part.strip()]
        if not chosen or any(part not in choices for part in chosen):
            raise argparse.ArgumentTypeError(
                f"{value!r}: give {what} from {', '.join(choices)}, separated by commas"
            )
        return chosen

    return parse


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_tools.bench.ledger_stores",
        description=(ledger_stores.__doc__ or "").split("\n")[0],
    )
    parser.add_argument("--batches", type=int, default=BATCHES,
                        help="micro-batches per mode and store (default %(default)s)")  # fmt: skip
    parser.add_argument("--stores", type=_choices(STORES, "stores"), default=list(DEFAULT_STORES),
                        help=f"from {','.join(STORES)} (default {','.join(DEFAULT_STORES)}; "
                             "posix: the disk, the reference)")  # fmt: skip
    parser.add_argument("--modes", type=_choices(MODES, "modes"), default=list(MODES),
                        help=f"default {','.join(MODES)}")  # fmt: skip
    parser.add_argument("--rows-per-batch", type=int, default=ROWS_PER_BATCH)
    parser.add_argument("--out", type=Path, default=None, help="write JSON and Markdown here")
    args = parser.parse_args()
    if args.batches < 2 or args.rows_per_batch < PARTITIONS:
        parser.error(f"--batches must be >= 2 and --rows-per-batch >= {PARTITIONS}")
    from onceover_tools.bench.provenance import current_commit, machine

    header = {
        "command": "python -m onceover_tools.bench.ledger_stores " + " ".join(sys.argv[1:]),
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": current_commit(),
        "machine": machine(),
    }
    say(f"machine: {header['machine']}")
    with tempfile.TemporaryDirectory(prefix="onceover-bench-ledger-") as tmp:
        result = measure(
            Path(tmp), args.batches, args.stores, args.modes, rows_per_batch=args.rows_per_batch
        )
    load = os.getloadavg()
    header["load_at_end"] = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    lines = markdown(result, header)
    say("\n" + "\n".join(lines))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / MARKDOWN_NAME).write_text("\n".join(lines) + "\n")
        document = {**header, "figures": result.as_json()}
        (args.out / JSON_NAME).write_text(json.dumps(document, indent=2) + "\n")
        say(f"written: {args.out / MARKDOWN_NAME}, {args.out / JSON_NAME}")
    return 1 if result.any_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
