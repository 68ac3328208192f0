"""What a benchmark report says about where its figures came from: the commit measured
and the machine's cores and load when the run started."""

from __future__ import annotations

import os
import shutil
import subprocess


def current_commit() -> str | None:
    """The short hash of the checkout's HEAD, or None outside a git checkout."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run(
            [git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            check=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def machine() -> str:
    """Cores (and how many this process may use) and the load average now."""
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), load average at "
        f"start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
