"""``onceover chaos`` refusing, as a user runs it: a report drawn with other arguments
is named in one clear line (exit 2) and left as it was, before Java is looked for."""

from __future__ import annotations

from pathlib import Path

from onceover_tools.chaos.report import REPORT_JSON, Session, now, write_report
from onceover_tools.chaos.schedule import DEFAULT_MODES, WORKLOADS

from tests.helpers.processes import run_onceover


def test_another_seeds_report_is_refused_in_one_line_and_kept(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    report_dir = tmp_path / "seed1"
    write_report(
        report_dir, Session(1, 2, list(DEFAULT_MODES), 3000, workloads=list(WORKLOADS)), [],
        now(), 1.0,
    )  # fmt: skip
    before = (report_dir / REPORT_JSON).read_text()
    # Were it not refused, the session would stop here rather than run a schedule.
    env = {**subprocess_env, "JAVA_HOME": str(tmp_path / "no-java")}

    done = run_onceover(
        "chaos", "--seed", "2", "--schedules", "2", "--report", str(report_dir), env=env
    )

    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("onceover:")]
    assert len(lines) == 1, done.stderr
    assert "was drawn with --seed 1, not --seed 2" in lines[0]
    assert "--fresh" in lines[0]
    assert "JAVA_HOME" not in done.stderr
    assert (report_dir / REPORT_JSON).read_text() == before
