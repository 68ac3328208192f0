"""A kept soak report's flatness judged again from its samples, under today's rule
(:func:`~onceover_tools.soak.verdict.judge_flatness`): every sample is in the report's
JSON, so a change to the rule reaches a run of record without running it again. What
BigQuery held stays as the run counted it (the table went with its local BigQuery), and
so do the streams' budget and the control plane's count."""

from __future__ import annotations

import json
from pathlib import Path

from onceover_tools.soak.report import REPORT_JSON, SoakReport, write_report
from onceover_tools.soak.verdict import NOT_FLAT, judge_flatness


class RejudgeError(ValueError):
    """The directory holds no soak report that can be judged again."""


def rejudge(directory: Path) -> SoakReport:
    """Judge the report in ``directory`` for flatness again; rewrite its JSON and Markdown."""
    path = directory / REPORT_JSON
    try:
        report = SoakReport.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RejudgeError(f"{path} is not a soak report ({exc})") from None
    verdict = report.verdict
    if verdict is None:
        raise RejudgeError(f"{path}: the soak has no verdict to judge again")
    began = report.first_commit_s
    if began is None:  # written before reports kept it: the first sample with a commit
        began = next((s.seconds for s in report.samples if s.rows_committed > 0), 0.0)
        report.first_commit_s = began
    verdict.flatness = []
    verdict.problems = [p for p in verdict.problems if NOT_FLAT not in p]
    starts = [run.started_s for run in report.runs]
    judge_flatness(verdict, report.samples, report.seconds, began, starts)
    write_report(report, directory)
    return report
