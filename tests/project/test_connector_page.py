"""docs/guides/from-connector.md says what the code does with each connector option.

Its table "Every option" has one row per option: every name the sink reads for the
connector (``CONNECTOR_OPTIONS``, the connection's ``OPTIONS``, the table-creation
options) exactly once, with ``CONNECTOR_OPTIONS``' disposition where it has one, and no
row for an option the code does not know. The tests it cites for its examples exist.

Pure Python over the page and the modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from onceover_jobs.sink.job.connector_options import CONNECTOR_OPTIONS
from onceover_jobs.sink.table import creation

from onceover.connection import OPTION_NAMES as CONNECTION_OPTION_NAMES
from onceover.connection import OPTIONS as CONNECTION_OPTIONS
from tests.project.test_docs_links import prose_lines

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "from-connector.md"
EXAMPLES = ROOT / "tests" / "sink" / "test_connector_writes.py"
TABLE_HEADING = "## Every option"
DISPOSITIONS = ("honoured", "honoured differently", "ignored", "refused")
LABEL = "bigQueryTableLabel.<key>"
CREATION_NAMES = {
    "createdisposition": "createDisposition",
    "partitionfield": "partitionField",
    "partitiontype": "partitionType",
    "partitionexpirationms": "partitionExpirationMs",
    "partitionrangestart": "partitionRangeStart",
    "partitionrangeend": "partitionRangeEnd",
    "partitionrangeinterval": "partitionRangeInterval",
    "clusteredfields": "clusteredFields",
    "destinationtablekmskeyname": "destinationTableKmsKeyName",
}
"""creation.OPTIONS in the connector's spelling (the module keeps them lower case)."""

_ROW = re.compile(r"^\|\s*`(?P<name>[^`]+)`\s*\|\s*(?P<here>[^|]+?)\s*\|")


def known() -> dict[str, str | None]:
    """Every option the code reads for the connector → its disposition (None: not in
    CONNECTOR_OPTIONS, so the page's word is the page's to choose)."""
    names: dict[str, str | None] = {o.name: o.disposition for o in CONNECTOR_OPTIONS}
    names.update(dict.fromkeys(CONNECTION_OPTION_NAMES.values()))
    names.update(dict.fromkeys(CREATION_NAMES.values()))
    names[LABEL] = None
    return names


def rows(page: Path = PAGE) -> list[tuple[int, str, str]]:
    """(line, option, disposition) of each row of the page's option table."""
    found: list[tuple[int, str, str]] = []
    inside = False
    for number, line in prose_lines(page):
        if line.startswith("## "):
            inside = line.strip() == TABLE_HEADING
        elif inside and (match := _ROW.match(line)):
            found.append((number, match["name"], match["here"]))
    return found


def wrong_rows(table: list[tuple[int, str, str]], names: dict[str, str | None]) -> list[str]:
    """What is wrong with the table, one line each, naming the option."""
    wrong = []
    seen: dict[str, int] = {}
    for number, name, here in table:
        where = f"{PAGE.relative_to(ROOT)}:{number}"
        if name in seen:
            wrong.append(f"{where}: {name!r} has a row already (line {seen[name]})")
            continue
        seen[name] = number
        if name not in names:
            wrong.append(f"{where}: {name!r} is an option the code does not know")
        elif here not in DISPOSITIONS:
            wrong.append(f"{where}: {name!r} is {here!r}, not one of {', '.join(DISPOSITIONS)}")
        elif names[name] is not None and here != names[name]:
            wrong.append(
                f"{where}: {name!r} is {here!r} on the page, {names[name]!r} in the code "
                "(CONNECTOR_OPTIONS)"
            )
    wrong += [f"{name!r} has no row on the page" for name in names if name not in seen]
    return wrong


def test_the_known_names_are_the_codes() -> None:
    """The spellings here are the modules' own names, lower-cased."""
    assert {name.lower() for name in CONNECTION_OPTION_NAMES.values()} == set(CONNECTION_OPTIONS)
    assert set(CREATION_NAMES) == creation.OPTIONS
    assert all(key == name.lower() for key, name in CREATION_NAMES.items())
    assert LABEL.lower().startswith(creation.LABEL_PREFIX)


def test_every_option_the_code_knows_has_one_true_row() -> None:
    table = rows()
    assert len(table) > len(CONNECTOR_OPTIONS), f"no option table under {TABLE_HEADING!r}"
    wrong = wrong_rows(table, known())
    assert not wrong, "\n".join(wrong)


def test_the_check_names_what_is_missing_extra_repeated_or_untrue() -> None:
    names: dict[str, str | None] = {"writeMethod": "honoured", "credentials": None, "path": None}
    table = [
        (1, "writeMethod", "refused"),
        (2, "credentials", "honoured differently"),
        (3, "credentials", "honoured"),
        (4, "gcpAccessTokenProvider", "refused"),
    ]
    page = PAGE.relative_to(ROOT)
    assert wrong_rows(table, names) == [
        f"{page}:1: 'writeMethod' is 'refused' on the page, 'honoured' in the code "
        "(CONNECTOR_OPTIONS)",
        f"{page}:3: 'credentials' has a row already (line 2)",
        f"{page}:4: 'gcpAccessTokenProvider' is an option the code does not know",
        "'path' has no row on the page",
    ]


def test_the_examples_cite_tests_that_exist() -> None:
    """Each example names the test that runs it; a renamed test fails here, not silently."""
    tests = {
        node.name
        for node in ast.walk(ast.parse(EXAMPLES.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }
    cited = set(re.findall(r"`(test_\w+)`", PAGE.read_text()))
    assert cited, "the page cites no test of tests/sink/test_connector_writes.py"
    assert not cited - tests, f"cited, not in {EXAMPLES.name}: {sorted(cited - tests)}"
    assert not tests - cited, f"run, not on the page: {sorted(tests - cited)}"
