"""The soak's report: ``soak-report.json`` (everything, every sample) and
``soak-report.md`` (the verdict, the faults, flatness, samples a minute apart), and a
line on the console per sample."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceover_tools.soak.faults import SoakFault
from onceover_tools.soak.job import JobRun
from onceover_tools.soak.sampler import Sample
from onceover_tools.soak.shapes import Shape
from onceover_tools.soak.verdict import FLAT_WARM_UP_S, Flatness, Verdict


@dataclass
class SoakReport:
    command: str
    shape: Shape
    mode: str
    mode_option: str | None
    crash_every_s: float | None
    partitions: int
    started_at: str
    seconds: float = 0.0
    """When the query was stopped, seconds into the soak."""
    first_commit_s: float | None = None
    """When its first micro-batch was committed: the soak's minutes count from here."""
    drain_s: float | None = None
    runs: list[JobRun] = field(default_factory=list)
    faults: list[SoakFault] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    verdict: Verdict | None = None
    control_plane: dict[str, Any] = field(default_factory=dict)
    chart: str | None = None
    bigquery: str = "the local BigQuery"
    """Where the query wrote."""
    table: str = ""

    def figures(self) -> dict[str, Any]:
        """The run's headline figures."""
        peak = max(self.samples, key=lambda s: s.bigquery_rss_mb, default=None)
        rows = self.verdict.rows if self.verdict else 0
        recoveries = [f.recovery_s for f in self.faults if f.recovery_s is not None]
        return {
            "rows": rows,
            "rows_per_s": round(rows / self.seconds, 1) if self.seconds else None,
            "restarts": sum(r.ended_by != "stopped" for r in self.runs[:-1]),
            "faults_fired": sum(f.fired_s is not None for f in self.faults),
            "faults_missed": sum(f.missed for f in self.faults),
            "recovery_s_max": max(recoveries, default=None),
            "recovery_s_median": sorted(recoveries)[len(recoveries) // 2] if recoveries else None,
            "bigquery_rss_mb_peak": peak.bigquery_rss_mb if peak else None,
            "bigquery_disk_mb": self.samples[-1].bigquery_disk_mb if self.samples else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "shape": self.shape.to_json(),
            "mode": self.mode,
            "mode_option": self.mode_option,
            "crash_every_s": self.crash_every_s,
            "partitions": self.partitions,
            "started_at": self.started_at,
            "bigquery": self.bigquery,
            "table": self.table,
            "seconds": round(self.seconds, 1),
            "first_commit_s": self.first_commit_s,
            "drain_s": self.drain_s,
            "ok": bool(self.verdict and self.verdict.ok),
            "figures": self.figures(),
            "verdict": self.verdict.to_json() if self.verdict else None,
            "control_plane": self.control_plane,
            "runs": [r.to_json() for r in self.runs],
            "faults": [f.to_json() for f in self.faults],
            "samples": [s.to_json() for s in self.samples],
            "chart": self.chart,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SoakReport:
        """A report as :meth:`to_json` wrote it (its figures recomputed, not read)."""
        shape = doc["shape"]
        verdict = doc.get("verdict")
        if verdict is not None:
            verdict = {k: v for k, v in verdict.items() if k != "ok"}
            verdict = Verdict(**{
                **verdict, "flatness": [Flatness(**f) for f in verdict.get("flatness", [])]
            })  # fmt: skip
        return cls(
            command=doc["command"],
            shape=Shape.from_json(shape),
            mode=doc["mode"], mode_option=doc["mode_option"],
            crash_every_s=doc["crash_every_s"], partitions=doc["partitions"],
            started_at=doc["started_at"], seconds=doc["seconds"],
            first_commit_s=doc.get("first_commit_s"), drain_s=doc.get("drain_s"),
            runs=[JobRun(**r) for r in doc["runs"]],
            faults=[SoakFault(**{k: v for k, v in f.items() if k != "recovery_s"})
                    for f in doc["faults"]],
            samples=[Sample(**x) for x in doc["samples"]],
            verdict=verdict, control_plane=doc.get("control_plane", {}), chart=doc.get("chart"),
            bigquery=doc.get("bigquery", "the local BigQuery"), table=doc.get("table", ""),
        )  # fmt: skip


def sample_line(sample: Sample) -> str:
    lag = "-" if sample.control_plane_lag_s is None else f"{sample.control_plane_lag_s:.1f}s"
    return (
        f"  {sample.seconds / 60:6.1f} min  rows {sample.rows_committed:>11,} committed "
        f"{sample.rows_appended:>11,} appended  batches {sample.batches_committed:>5}  "
        f"RSS driver {sample.driver_rss_mb:5.0f} JVM {sample.jvm_rss_mb:5.0f} workers(PSS) "
        f"{sample.workers_pss_mb:5.0f} MB  threads {sample.jvm_threads:>3}  conns "
        f"{sample.grpc_connections}/{sample.append_calls_open}  streams "
        f"{sample.streams_created:>4}  ledger {sample.ledger_files:>5}  spool "
        f"{sample.spool_files}  lag {lag}  BigQuery {sample.bigquery_rss_mb:5.0f} MB"
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(report: SoakReport) -> str:
    verdict = report.verdict
    figures = report.figures()
    lines = [
        f"# Soak: {report.shape.describe()}",
        "",
        f"`{report.command}`",
        "",
        f"Mode `{report.mode}`"
        + ("" if report.mode_option else " (no mode option: writeStream's default)")
        + f"; a fault every {_cell(report.crash_every_s)} s; {report.partitions} partitions; "
        f"started {report.started_at}; {report.seconds / 60:.1f} min, drain "
        f"{_cell(report.drain_s)} s.",
        "",
        f"Table `{report.table or '-'}` in {report.bigquery}.",
        "",
        "## Verdict: " + ("**passed**" if verdict and verdict.ok else "**FAILED**"),
        "",
    ]
    if verdict:
        counts = (
            verdict.source_rows, verdict.rows, verdict.distinct_keys, verdict.missing_keys,
            verdict.extra_rows, verdict.values_checked, verdict.values_wrong, verdict.ledger_rows,
        )  # fmt: skip
        lines += [
            "| source rows | rows | distinct keys | missing | extra | values checked | "
            "wrong | ledger rows |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            "| " + " | ".join(_cell(v) for v in counts) + " |",
            "",
        ]
        lines += [f"- {problem}" for problem in verdict.problems] or ["No problem found."]
        lines += [
            "", "## Flat", "",
            f"Medians over the samples of drivers past their first {FLAT_WARM_UP_S / 60:g} "
            "minutes (judged), and over every sample with a driver up (not judged).", "",
            "| figure | 2nd quarter median | last quarter median | flat | 2nd quarter, "
            "all samples | last quarter, all samples |",
            "|---|---:|---:|---|---:|---:|",
        ]  # fmt: skip
        lines += [
            f"| {f.figure} | {_cell(f.second_quarter)} | {_cell(f.last_quarter)} | "
            f"{'-' if f.flat is None else 'yes' if f.flat else '**no**'} | "
            f"{_cell(f.second_quarter_all)} | {_cell(f.last_quarter_all)} |"
            for f in verdict.flatness
        ]
        lines += [
            "",
            f"Streams created after warm-up: {_cell(verdict.streams_after_warm_up)} "
            f"(allowed {_cell(verdict.streams_allowed)}).",
        ]
    lines += ["", "## Figures", "", "| figure | value |", "|---|---:|"]
    lines += [f"| {name} | {_cell(value)} |" for name, value in figures.items()]
    lines += ["", "## Faults", "", "| # | kind | armed, s | fired, s | first commit after, s | "
              "detail |", "|---:|---|---:|---:|---:|---|"]  # fmt: skip
    lines += [
        f"| {f.number} | {f.kind} | {_cell(f.armed_s)} | {_cell(f.fired_s)} | "
        f"{_cell(f.recovery_s)} | {f.detail} |"
        for f in report.faults
    ]
    lines += ["", "## Samples (about a minute apart)", ""]
    names = [n for n in Sample.names() if n != "seconds"]
    lines += ["| min | " + " | ".join(names) + " |", "|" + "---:|" * (len(names) + 1)]
    last_minute = -1.0
    for sample in report.samples:
        if sample.seconds - last_minute * 60 >= 60 or sample is report.samples[-1]:
            last_minute = sample.seconds / 60
            lines.append(
                f"| {sample.seconds / 60:.1f} | "
                + " | ".join(_cell(getattr(sample, n)) for n in names)
                + " |"
            )
    if report.chart:
        lines += ["", f"![samples]({Path(report.chart).name})"]
    return "\n".join(lines) + "\n"


REPORT_JSON = "soak-report.json"


def write_report(report: SoakReport, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REPORT_JSON).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    path = directory / "soak-report.md"
    path.write_text(markdown(report))
    return path
