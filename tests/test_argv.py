"""Options are dropped with their values, in both spellings, and nothing else is."""

from __future__ import annotations

from jobs.load_files import spec_args
from onceover.argv import without_options


def test_an_option_goes_with_its_value_in_both_spellings() -> None:
    argv = ["--master", "local[1]", "--table", "p.d.t", "--master=yarn", "--mastery", "x"]
    assert without_options(argv, ["--master"]) == ["--table", "p.d.t", "--mastery", "x"]


def test_the_stored_spec_keeps_no_monitor_secret() -> None:
    argv = ["--source", "s", "--monitor-token", "T0k3n", "--monitor-url=http://h", "--stamp"]
    assert spec_args(argv) == ["--source", "s", "--stamp"]
