"""Print what each phase of a CI run took: ``python3 scripts/ci_summary.py PHASES TIERS TOTAL_S``.

PHASES is the file ``scripts/timed`` wrote (phase, seconds, exit status per line); TIERS
the JSON that pytest's tier clock wrote (``tests/helpers/tiers.py``), if pytest got that far.
Standard library only: it runs before, and whether or not, the project's venv exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(phases_path: str, tiers_path: str, total_s: str) -> None:
    print("\n== CI timing ==")
    phases = Path(phases_path)
    for line in phases.read_text().splitlines() if phases.is_file() else []:
        phase, seconds, status = line.split("\t")
        failed = "" if status == "0" else f"  (exit {status})"
        print(f"{phase:<30} {float(seconds):>8.1f} s{failed}")
    print(f"{'total':<30} {float(total_s):>8.1f} s ({float(total_s) / 60:.1f} min)")
    _tiers(Path(tiers_path))


def _tiers(path: Path) -> None:
    try:
        tiers = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    slowest = tiers.pop("slowest", [])
    print("pytest by tier (test time; on two workers, both added up):")
    for tier, figures in tiers.items():
        name = f"  {tier} ({figures['tests']} tests)"
        print(f"{name:<30} {figures['seconds']:>8.1f} s")
    if slowest:
        print("slowest tests (set-up, call and tear-down; a session fixture where first used):")
    for nodeid, seconds in slowest:
        print(f"  {seconds:>7.1f} s  {nodeid}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
