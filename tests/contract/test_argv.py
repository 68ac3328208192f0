"""Options are dropped with their values, in both spellings, and nothing else is."""

from __future__ import annotations

from pathlib import Path

import pytest
from onceover_jobs.load_files import parse_args, spec_args

from onceover.argv import without_options


def test_an_option_goes_with_its_value_in_both_spellings() -> None:
    argv = ["--master", "local[1]", "--table", "p.d.t", "--master=yarn", "--mastery", "x"]
    assert without_options(argv, ["--master"]) == ["--table", "p.d.t", "--mastery", "x"]


def test_the_stored_spec_keeps_no_monitor_secret_and_only_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in").mkdir()
    monkeypatch.chdir(tmp_path)
    argv = ["--source", "in", "--format", "json", "--table", "p.d.t", "--key", "id",
            "--monitor-token", "T0k3n", "--monitor-url=http://h", "--checkpoint=ck",
            "--stamp"]  # fmt: skip
    stored = spec_args(argv, parse_args(argv))
    assert "T0k3n" not in stored
    assert "--monitor-url=http://h" not in stored
    assert stored == [
        "--format", "json", "--table", "p.d.t", "--key", "id", "--stamp",
        "--source", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"),
    ]  # fmt: skip
