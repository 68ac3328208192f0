"""``onceover demo`` as a user runs it, once, and everything it shows: every story it tells
on the API and in BigQuery; every dashboard page over its real runs, in a real Chromium,
at 1280 x 800 and 1920 x 1080 (nothing wider than its panel or cut off, each table's
figures the same on the overview, the Tables list and the table's page, the crashed
run's headline naming the driver's death and the batch it stopped at); then Ctrl-C
ending it cleanly.

One test, so one demo (about a minute) whichever pytest worker takes it: each check
runs whatever the one before found, and their failures are reported together. The
README's overview and the dashboard guide's runs, tables and crashed-run pictures are
taken here, at 1280 x 800 (test-artifacts/dashboard-demo-*.png, copied to
docs/screenshots/). The demo's pieces on their own: tests/tools/test_demo.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect
from playwright.sync_api import Error as PlaywrightError

from onceover.bigquery import LOCAL_PROJECT, BigQueryConfig, bigquery_client
from onceover.preflight import check_port_free
from tests.browser.dashboard import screenshot, sign_in
from tests.conftest import REPO_ROOT
from tests.helpers.processes import ONCEOVER, LineReader, running

pytestmark = [pytest.mark.browser, pytest.mark.spark]

ROWS = 2_000
SIZES: dict[str, ViewportSize] = {
    "1280x800": {"width": 1280, "height": 800},
    "1920x1080": {"width": 1920, "height": 1080},
}

# What is wider than its panel, cut off, or spilling over its neighbour, on the page now:
# each offender as "tag.class: why". A table's scroller (.table-wrap) may be narrower
# than its table, and a <pre> or a log may scroll: those are the panels' own scrollbars.
# Lines may be clamped only where the whole text is the element's (or its cell's) title.
FIND_MISFITS = """() => {
  const found = [];
  const name = (el) => el.tagName.toLowerCase()
    + (typeof el.className === "string" && el.className
      ? "." + el.className.trim().split(/\\s+/).join(".") : "")
    + (el.dataset.testid ? `[${el.dataset.testid}]` : "")
    + ` "${(el.textContent || "").trim().slice(0, 40)}"`;
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1) {
    found.push(`page: ${doc.scrollWidth} px wide in ${window.innerWidth}`);
  }
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  for (const panel of document.querySelectorAll("main section, main .page-header, header")) {
    const box = panel.getBoundingClientRect();
    for (const el of panel.querySelectorAll("*")) {
      if (el.closest("svg") && el.tagName.toLowerCase() !== "svg") continue;
      if (el.closest(".visually-hidden, dialog:not([open])")) continue;
      const inScroller = el.parentElement && el.parentElement.closest(".table-wrap, pre");
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (!inScroller && (r.right > box.right + 1 || r.left < box.left - 1)) {
        found.push(`${name(el)}: ${Math.round(r.left)}..${Math.round(r.right)} outside its panel ` +
          `${Math.round(box.left)}..${Math.round(box.right)}`);
      }
      const style = getComputedStyle(el);
      if (style.display === "inline" || el.clientWidth === 0 || scrolls(el)) continue;
      if (el.scrollWidth > el.clientWidth + 1) {
        const how = ["hidden", "clip"].includes(style.overflowX) ? "cut off" : "spills over";
        found.push(`${name(el)}: ${how} (${el.scrollWidth} px of content in ${el.clientWidth})`);
      }
      // Lines cut (a clamp) only where the whole text is a hover away.
      const cuts = ["hidden", "clip"].includes(style.overflowY);
      if (cuts && el.scrollHeight > el.clientHeight + 1 && !el.closest("[title]")) {
        found.push(`${name(el)}: cut off (${el.scrollHeight} px of lines in ${el.clientHeight})`);
      }
    }
  }
  return [...new Set(found)];
}"""

# Each table's figures as a page shows them: {table: {figure: value}}. Rows carry
# data-table; a table's own page holds one table, named in the URL.
READ_FIGURES = """(selector) => {
  const out = {};
  for (const row of document.querySelectorAll(selector)) {
    const table = row.dataset.table || decodeURIComponent(location.pathname.split("/").pop());
    const figures = {};
    for (const el of row.querySelectorAll("[data-figure]")) {
      figures[el.dataset.figure] = el.dataset.value;
    }
    out[table] = figures;
  }
  return out;
}"""


@dataclass
class Demo:
    url: str
    token: str
    printed: str  # what it printed until "Ctrl-C to stop."
    runs: dict[str, dict[str, Any]]  # by job name
    tables: list[str]

    def get(self, path: str) -> Any:
        response = httpx.get(
            f"{self.url}{path}", headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )
        assert response.status_code == 200, response.text
        return response.json()


def _demo(process: subprocess.Popen[str]) -> tuple[Demo, LineReader]:
    """The demo ``process`` as it says it is ready: its dashboard, token, runs and tables."""
    assert process.stdout is not None
    output = LineReader(process.stdout)
    output.wait_for("Ctrl-C to stop.", timeout_s=300)
    printed = "".join(output.lines)
    url = _found(r"^Dashboard: (http://\S+?)/ ", printed)
    token = _found(r"operator token\s+(\S+)", printed)
    shown = Demo(url, token, printed, {}, [])
    listed = shown.get("/api/runs")["data"]
    shown.runs = {run["job"]: shown.get(f"/api/runs/{run['run_id']}") for run in listed}
    shown.tables = sorted({run["table"] for run in listed})
    return shown, output


def _subprocess_env(work: Path) -> dict[str, str]:
    """As tests/conftest.py's ``subprocess_env``, for a module's fixture."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ONCEOVER_", "PYSPARK_", "BQEMU_"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # The demo runs in its own folder: a relative PYTHONPATH would name other code there.
    if "PYTHONPATH" in env:
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p
        )
    env["ONCEOVER_DATABASE_URL"] = f"sqlite:///{work / 'onceover.db'}"
    return env


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text, re.M)
    assert match, f"{pattern!r} not in the demo's output:\n{text}"
    return match[1]


@contextlib.contextmanager
def _signed_in(browser: Browser, demo: Demo) -> Iterator[Callable[[str], Page]]:
    """Open a signed-in page at a size: ``open_at(size)``; every page closes afterwards."""
    contexts = []

    def open_at(size: str) -> Page:
        context = browser.new_context(viewport=SIZES[size])
        contexts.append(context)
        page = context.new_page()
        sign_in(page, demo.url, demo.token, path="/")
        return page

    try:
        yield open_at
    finally:
        for context in contexts:
            context.close()


def _settled(page: Page, path: str, url: str) -> None:
    """``path`` opened through the app, with nothing left loading."""
    page.goto(f"{url}{path}")
    expect(page.locator("main h1").first).to_be_visible()
    expect(page.get_by_text(re.compile(r"^Loading .*…$"))).to_have_count(0, timeout=20_000)


# The pictures the README and docs/guides/dashboard.md show (copied to docs/screenshots/).
PICTURES = {"/": "demo-overview", "/runs": "demo-runs", "/tables": "demo-tables"}


def _pages(demo: Demo) -> list[str]:
    return [
        "/",
        "/runs",
        "/tables",
        *(f"/tables/{quote(table, safe='')}" for table in demo.tables),
        *(f"/runs/{run['run_id']}" for run in demo.runs.values()),
        "/alerts",
        "/audit",
    ]


def _every_page_fits_its_panels(open_at: Callable[[str], Page], demo: Demo, size: str) -> None:
    page = open_at(size)
    misfits: dict[str, list[str]] = {}
    for path in _pages(demo):
        _settled(page, path, demo.url)
        if size == "1280x800" and path in PICTURES:
            screenshot(page, PICTURES[path])
        if found := page.evaluate(FIND_MISFITS):
            misfits[path] = found
            screenshot(page, f"demo-misfit-{size}-{path.strip('/').replace('/', '-') or 'home'}")
    assert not misfits, misfits


def _wide_tables_keep_their_first_column(open_at: Callable[[str], Page], demo: Demo) -> None:
    page = open_at("1280x800")
    _settled(page, "/tables", demo.url)
    wrap = page.locator("section[aria-label=Tables] .table-wrap")
    first = wrap.locator("tbody tr").first.locator(":scope > :first-child")
    before = first.bounding_box()
    # The Tables list is wider than 1280 px allows: it scrolls, inside its panel.
    scrolled = wrap.evaluate("el => { el.scrollLeft = el.scrollWidth; return el.scrollLeft; }")
    assert scrolled > 0, "the Tables list fits at 1280 px: nothing here scrolls to test"
    after = first.bounding_box()
    assert before is not None
    assert after is not None
    assert abs(after["x"] - before["x"]) < 1, (before, after)  # sticky: it stays put


def _each_tables_figures_agree(open_at: Callable[[str], Page], demo: Demo) -> None:
    page = open_at("1920x1080")
    _settled(page, "/", demo.url)
    overview = page.evaluate(READ_FIGURES, "[data-testid=overview-table]")
    _settled(page, "/tables", demo.url)
    listed = page.evaluate(READ_FIGURES, "[data-testid=table-row]")
    own: dict[str, dict[str, str]] = {}
    history: dict[str, str] = {}
    for table in demo.tables:
        _settled(page, f"/tables/{quote(table, safe='')}", demo.url)
        own.update(page.evaluate(READ_FIGURES, "[data-testid=table-totals]"))
        checks = page.get_by_role("region", name="Reconciliation", exact=True)
        history[table] = checks.inner_text()

    api = {t["table"]: t for t in demo.get("/api/overview")["tables"]}
    expected = {
        table: {
            "freshness": row["freshness"],
            "rows-today": str(row["rows_committed_today"]),
            "already-exists": str(row["already_exists"]),
            "out-of-range": str(row["out_of_range"]),
            "check": (
                f"{row['reconciliation']['id']}:{row['reconciliation']['status']}"
                if row["reconciliation"]
                else "never"
            ),
        }
        for table, row in api.items()
    }
    assert sorted(expected) == demo.tables
    assert overview == expected
    assert listed == expected
    assert own == expected
    # The demo's story, so "agree" is not "all empty": checks of runs show on the tables.
    latest = {table: figures["check"].split(":")[-1] for table, figures in expected.items()}
    assert latest[_table(demo, "orders-clean")] == "ok"
    assert latest[_table(demo, "orders-tampered")] == "mismatch"
    assert expected[_table(demo, "orders-faults")]["already-exists"] != "0"
    # The page's own history agrees too: a run's check is the latest, not "never".
    for table, figures in expected.items():
        if figures["check"] != "never":
            assert "Its latest check was of run" in history[table], history[table]
            assert "never been reconciled" not in history[table]


def _table(demo: Demo, job: str) -> str:
    return str(demo.runs[job]["table"])


def _the_crashed_runs_headline(open_at: Callable[[str], Page], demo: Demo) -> None:
    crashed = demo.runs["orders-crashed"]
    assert crashed["status"] == "failed"
    page = open_at("1280x800")

    _settled(page, "/", demo.url)
    why = page.locator(f"[data-testid=attention-run][data-run-id='{crashed['run_id']}']")
    expect(why.get_by_test_id("attention-why")).to_have_attribute("data-kind", "driver_died")
    expect(why.get_by_test_id("attention-why")).to_contain_text("The Spark driver died")
    expect(why.get_by_test_id("attention-why")).to_contain_text("batch 0")

    _settled(page, f"/runs/{crashed['run_id']}", demo.url)
    cause = page.get_by_test_id("run-cause")
    expect(cause).to_have_attribute("data-kind", "driver_died")
    expect(cause).to_have_attribute("data-batch", "0")
    headline = page.get_by_test_id("run-cause-headline")
    expect(headline).to_contain_text("The Spark driver died (its JVM exited)")
    expect(headline).to_contain_text("batch 0")
    # The error as the job reported it is beneath, not in the headline. A dying JVM's last
    # words vary with timing (a refused connection, or Py4J's network error): its name.
    symptom = str(crashed["cause"]["error"]).split(":", 1)[0].strip()
    assert symptom.endswith("Error"), crashed["cause"]
    expect(headline).not_to_contain_text(symptom)
    expect(page.get_by_test_id("run-cause-error")).to_contain_text(symptom)
    screenshot(page, "demo-run-crashed")


JOBS = ("orders-clean", "orders-faults", "orders-crashed", "orders-tampered")


def _every_story_on_the_api(demo: Demo) -> None:
    """Each run's story, as the API tells it, and the alerts the receiver took."""
    printed = demo.printed
    assert [int(n) for n in re.findall(r"^\[(\d)/8\] ", printed, re.M)] == list(range(1, 9))
    assert '<div id="root">' in httpx.get(f"{demo.url}/", timeout=10).text  # the dashboard
    runs = demo.runs
    assert sorted(runs) == sorted(JOBS)

    clean = runs["orders-clean"]
    assert (clean["status"], clean["rows_committed"]) == ("succeeded", ROWS)
    assert clean["reconciliation"]["status"] == "ok"

    faults = runs["orders-faults"]
    assert (faults["status"], faults["rows_committed"]) == ("succeeded", ROWS)
    assert faults["already_exists"] > 0
    assert faults["out_of_range"] > 0
    assert faults["write_requests"]["UNAVAILABLE"] > 0

    crashed = runs["orders-crashed"]
    assert crashed["status"] == "failed"
    plan = httpx.post(
        f"{demo.url}/api/runs/{crashed['run_id']}/resume", params={"dry_run": "true"},
        headers={"Authorization": f"Bearer {demo.token}"}, timeout=60,
    )  # fmt: skip
    assert plan.status_code == 200, plan.text
    assert plan.json()["pending_intents"], plan.json()  # a batch to settle with BigQuery
    assert plan.json()["module"] == "onceover_jobs.load_files"

    tampered = runs["orders-tampered"]
    checks = demo.get(f"/api/runs/{tampered['run_id']}/reconciliations")["data"]
    assert sorted(check["status"] for check in checks) == ["mismatch", "ok"]
    assert tampered["reconciliation"]["status"] == "mismatch"

    (endpoint,) = demo.get("/api/webhooks")["data"]
    deliveries = demo.get(f"/api/webhooks/{endpoint['id']}/deliveries")["data"]
    alerts = [d for d in deliveries if d["kind"] == "alert"]
    assert len(alerts) >= 3
    assert {d["status"] for d in alerts} == {"succeeded"}
    assert "the receiver at" in printed
    assert "3 with a valid signature" in printed


def _clean_and_faulty_tables_hold_each_row_once(demo: Demo) -> None:
    """Counted in BigQuery: the clean and the faulty tables hold the generated rows, once."""
    match = re.search(r"BigQuery REST\s+(\S+)  \(gRPC (\S+)\)", demo.printed, re.M)
    assert match, f"no BigQuery endpoints in:\n{demo.printed}"
    client = bigquery_client(BigQueryConfig(match[1], match[2], LOCAL_PROJECT))
    try:
        for job in ("orders-clean", "orders-faults"):
            table = _table(demo, job)
            query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{table}`"
            row = next(iter(client.query_and_wait(query)))
            assert (row["n"], row["ids"]) == (ROWS, ROWS), table
    finally:
        client.close()


def _failures(checks: dict[str, Callable[[], None]]) -> list[str]:
    """Run every check; what each that failed said (an assertion's or Playwright's)."""
    failed = []
    for name, check in checks.items():
        try:
            check()
        except (AssertionError, PlaywrightError) as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return failed


def test_the_demo_tells_every_story_on_the_api_in_bigquery_and_on_every_page(
    browser: Browser, tmp_path: Path
) -> None:
    assert (REPO_ROOT / "frontend" / "dist" / "index.html").is_file(), "run `make frontend` first"
    with running(
        [*ONCEOVER, "demo", "--rows", str(ROWS)], env=_subprocess_env(tmp_path), cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    ) as process:  # fmt: skip
        demo, output = _demo(process)
        with _signed_in(browser, demo) as open_at:
            failed = _failures({
                "stories": partial(_every_story_on_the_api, demo),
                "tables": partial(_clean_and_faulty_tables_hold_each_row_once, demo),
                **{
                    f"fits at {size}": partial(_every_page_fits_its_panels, open_at, demo, size)
                    for size in SIZES
                },
                "sticky column": partial(_wide_tables_keep_their_first_column, open_at, demo),
                "figures agree": partial(_each_tables_figures_agree, open_at, demo),
                "crashed run": partial(_the_crashed_runs_headline, open_at, demo),
            })  # fmt: skip
        assert not failed, "\n".join(failed)

        # Ctrl-C ends it cleanly, its control plane with it.
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        output.wait_for("Onceover demo stopped.", timeout_s=5)
    check_port_free("127.0.0.1", int(demo.url.rsplit(":", 1)[1]), "--port")
