// The one table component: columns declared once, sorting by a header (click, Enter or
// Space) with aria-sort, the caller's empty state, stable rows, rows that open a page.
import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { MemoryRouter, Route, Routes, useLocation } from "react-router";
import { afterEach, describe, expect, it } from "vitest";
import { DataTable, sortRows, type Column } from "./DataTable";

afterEach(cleanup);

type Load = { id: string; table: string; rows: number | null };

const LOADS: Load[] = [
  { id: "r2", table: "p.d.orders", rows: 40 },
  { id: "r10", table: "p.d.events", rows: null },
  { id: "r1", table: "p.d.users", rows: 7 },
];

const COLUMNS: Column<Load>[] = [
  { id: "run", header: "Run", cell: (load) => load.id, rowHeader: true, sortValue: (load) => load.id },
  { id: "table", header: "Table", cell: (load) => load.table, className: "mono" },
  {
    id: "rows",
    header: "Rows",
    cell: (load) => load.rows ?? "–",
    align: "end",
    sortValue: (load) => load.rows,
    cellAttributes: (load) => ({ "data-testid": `rows-${load.id}` }),
  },
];

function shownRuns(): string[] {
  return screen.getAllByTestId("load").map((row) => row.dataset.run ?? "");
}

function header(name: string): HTMLElement {
  return screen.getByRole("columnheader", { name });
}

function renderLoads(rows: Load[] = LOADS) {
  return render(
    <DataTable
      label="Loads"
      columns={COLUMNS}
      rows={rows}
      rowKey={(load) => load.id}
      rowAttributes={(load) => ({ "data-testid": "load", "data-run": load.id })}
      empty="Nothing loaded yet."
    />,
  );
}

describe("DataTable", () => {
  it("draws the declared columns: headers, cells, the row's header, alignment, a label", () => {
    renderLoads();
    const table = screen.getByRole("table", { name: "Loads" });
    expect(within(table).getAllByRole("columnheader").map((th) => th.textContent)).toEqual(["Run", "Table", "Rows"]);
    expect(header("Rows").className).toBe("number");
    const first = screen.getAllByTestId("load")[0];
    expect(within(first).getByRole("rowheader").textContent).toBe("r2");
    expect(within(first).getAllByRole("cell").map((td) => [td.textContent, td.className])).toEqual([
      ["p.d.orders", "mono"],
      ["40", "number"],
    ]);
    expect(screen.getByTestId("rows-r10").textContent).toBe("–");
  });

  it("keeps the rows' order until a header is clicked, then sorts up, down and back", () => {
    renderLoads();
    expect(shownRuns()).toEqual(["r2", "r10", "r1"]);
    expect(header("Run").getAttribute("aria-sort")).toBeNull();

    const byRun = within(header("Run")).getByRole("button", { name: "Run" });
    fireEvent.click(byRun);
    expect(shownRuns()).toEqual(["r1", "r2", "r10"]); // numbers inside text compare as numbers
    expect(header("Run").getAttribute("aria-sort")).toBe("ascending");

    fireEvent.click(byRun);
    expect(shownRuns()).toEqual(["r10", "r2", "r1"]);
    expect(header("Run").getAttribute("aria-sort")).toBe("descending");

    fireEvent.click(byRun);
    expect(shownRuns()).toEqual(["r2", "r10", "r1"]);
    expect(header("Run").getAttribute("aria-sort")).toBeNull();
  });

  it("sorts from the keyboard: Enter and Space on a header's button, once per press", () => {
    renderLoads();
    const byRows = within(header("Rows")).getByRole("button", { name: "Rows" });

    fireEvent.keyDown(byRows, { key: "Enter" });
    expect(shownRuns()).toEqual(["r1", "r2", "r10"]); // the row without a count last
    expect(header("Rows").getAttribute("aria-sort")).toBe("ascending");

    fireEvent.keyDown(byRows, { key: " " });
    expect(shownRuns()).toEqual(["r2", "r1", "r10"]); // still last when descending
    expect(header("Rows").getAttribute("aria-sort")).toBe("descending");

    fireEvent.keyDown(byRows, { key: "a" });
    expect(header("Rows").getAttribute("aria-sort")).toBe("descending");
  });

  it("sorts one column at a time, and only the columns that declare a sort key", () => {
    renderLoads();
    expect(within(header("Table")).queryByRole("button")).toBeNull();
    fireEvent.click(within(header("Run")).getByRole("button"));
    fireEvent.click(within(header("Rows")).getByRole("button"));
    expect(header("Run").getAttribute("aria-sort")).toBeNull();
    expect(header("Rows").getAttribute("aria-sort")).toBe("ascending");
    expect(shownRuns()).toEqual(["r1", "r2", "r10"]);
  });

  it("shows the caller's message instead of an empty table", () => {
    renderLoads([]);
    expect(screen.queryByRole("table")).toBeNull();
    expect(screen.getByText("Nothing loaded yet.")).toBeTruthy();
  });

  it("names a table by its caption", () => {
    render(<DataTable caption="Loads, newest first" columns={COLUMNS} rows={LOADS} rowKey={(load) => load.id} />);
    expect(screen.getByRole("table", { name: "Loads, newest first" })).toBeTruthy();
  });

  it("keeps each row's element by its key when the rows change order", () => {
    const { rerender } = renderLoads();
    const before = screen.getAllByTestId("load")[0];
    rerender(
      <DataTable
        label="Loads"
        columns={COLUMNS}
        rows={[LOADS[2], LOADS[1], LOADS[0]]}
        rowKey={(load) => load.id}
        rowAttributes={(load) => ({ "data-testid": "load", "data-run": load.id })}
      />,
    );
    expect(shownRuns()).toEqual(["r1", "r10", "r2"]);
    expect(screen.getAllByTestId("load")[2]).toBe(before);
  });

  it("shows a row's detail under it, across every column, and leaves out the columns given as false", () => {
    render(
      <DataTable
        label="Loads"
        columns={[COLUMNS[0], false, COLUMNS[2]]}
        rows={LOADS}
        rowKey={(load) => load.id}
        detail={(load) => (load.id === "r10" ? { content: "its log", testId: "load-detail", id: "detail-r10" } : null)}
      />,
    );
    expect(screen.getAllByRole("columnheader").map((th) => th.textContent)).toEqual(["Run", "Rows"]);
    const detail = screen.getByTestId("load-detail");
    expect(detail.id).toBe("detail-r10");
    expect(detail.previousElementSibling?.textContent).toContain("r10");
    expect(within(detail).getByRole("cell").getAttribute("colspan")).toBe("2");
  });
});

function Where() {
  return <p data-testid="where">{useLocation().pathname}</p>;
}

function renderLinkedLoads() {
  return render(
    <MemoryRouter initialEntries={["/loads"]}>
      <Routes>
        <Route
          path="/loads"
          element={
            <DataTable
              label="Loads"
              columns={[
                ...COLUMNS,
                { id: "open", header: "Open", cell: (load) => <button type="button">Hide {load.id}</button> },
              ]}
              rows={LOADS}
              rowKey={(load) => load.id}
              rowLink={(load) => `/runs/${load.id}`}
              rowAttributes={(load) => ({ "data-testid": "load", "data-run": load.id })}
            />
          }
        />
        <Route path="*" element={<Where />} />
      </Routes>
    </MemoryRouter>,
  );
}

describe("DataTable rows that link somewhere", () => {
  it("are Tab stops that open their page on Enter", () => {
    renderLinkedLoads();
    const row = screen.getAllByTestId("load")[1];
    expect(row.tabIndex).toBe(0);
    row.focus();
    expect(document.activeElement).toBe(row);
    fireEvent.keyDown(row, { key: "Enter" });
    expect(screen.getByTestId("where").textContent).toBe("/runs/r10");
  });

  it("open their page on a click, but leave a control inside them to do its own", () => {
    renderLinkedLoads();
    fireEvent.click(screen.getByRole("button", { name: "Hide r2" }));
    fireEvent.keyDown(screen.getByRole("button", { name: "Hide r2" }), { key: "Enter" });
    expect(screen.queryByTestId("where")).toBeNull();
    fireEvent.click(within(screen.getAllByTestId("load")[2]).getByTestId("rows-r1"));
    expect(screen.getByTestId("where").textContent).toBe("/runs/r1");
  });
});

describe("sortRows", () => {
  it("is stable: rows of equal value keep their order", () => {
    const rows = [
      { name: "b", n: 1 },
      { name: "a", n: 1 },
      { name: "c", n: 0 },
    ];
    expect(sortRows(rows, (row) => row.n, "ascending").map((row) => row.name)).toEqual(["c", "b", "a"]);
    expect(sortRows(rows, (row) => row.n, "descending").map((row) => row.name)).toEqual(["b", "a", "c"]);
  });
});
