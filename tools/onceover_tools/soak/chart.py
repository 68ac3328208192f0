"""The soak's samples as one PNG: six panels over time, a line at each fault."""

from __future__ import annotations

import itertools
from pathlib import Path

from onceover_tools.soak.faults import SoakFault
from onceover_tools.soak.sampler import Sample

PANELS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("rows/s committed", (("rows_per_s", "committed"), ("appended_per_s", "appended"))),
    (
        "memory, MB",
        (
            ("driver_rss_mb", "driver RSS"),
            ("jvm_rss_mb", "JVM RSS"),
            ("workers_pss_mb", "workers PSS"),
        ),
    ),
    (
        "threads",
        (("driver_threads", "driver"), ("jvm_threads", "JVM"), ("workers_threads", "workers")),
    ),
    (
        "connections",
        (("grpc_connections", "to Storage Write"), ("append_calls_open", "AppendRows open")),
    ),
    (
        "streams and ledger",
        (("streams_created", "streams created"), ("ledger_files", "ledger files")),
    ),
    ("control plane", (("control_plane_lag_s", "ingest lag, s"), ("spool_files", "spool files"))),
)
COLOURS = {"driver_kill": "tab:red", "worker_kill": "tab:orange",
           "commit_error": "tab:purple", "connection_drop": "tab:brown"}  # fmt: skip


def _rates(samples: list[Sample]) -> dict[str, list[float | None]]:
    committed: list[float | None] = [None]
    appended: list[float | None] = [None]
    for before, after in itertools.pairwise(samples):
        span = after.seconds - before.seconds
        committed.append((after.rows_committed - before.rows_committed) / span if span else None)
        appended.append((after.rows_appended - before.rows_appended) / span if span else None)
    return {"rows_per_s": committed, "appended_per_s": appended}


def draw(samples: list[Sample], faults: list[SoakFault], title: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no screen; a file
    import matplotlib.pyplot as plt

    minutes = [s.seconds / 60 for s in samples]
    series: dict[str, list[float | None]] = {
        name: [getattr(s, name) for s in samples] for name in Sample.names()
    } | _rates(samples)
    figure, axes = plt.subplots(len(PANELS), 1, figsize=(11, 2.3 * len(PANELS)), sharex=True)
    for axis, (label, lines) in zip(axes, PANELS, strict=True):
        for name, legend in lines:
            values = [float("nan") if v is None else float(v) for v in series[name]]
            axis.plot(minutes, values, label=legend, linewidth=1.2)
        for fault in faults:
            if fault.fired_s is not None:
                axis.axvline(fault.fired_s / 60, color=COLOURS.get(fault.kind, "grey"),
                             linestyle=":", linewidth=1)  # fmt: skip
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        axis.legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("minutes (dotted: faults; red driver kill, orange worker kill, "
                        "purple commit error, brown dropped connection)")  # fmt: skip
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
