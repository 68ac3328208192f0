// Every table at a glance: freshness, rows today, retry codes per hour, rows set aside,
// the newest check. Stale tables come first (the backend orders them).
import { Link } from "react-router";
import { DataTable, type Column } from "../../components/DataTable";
import { TableLink } from "../../components/links";
import { FigureCount, Freshness, VerdictLink } from "../../components/TableFigures";
import { CodeName } from "../../components/ui";
import { formatCount, formatDuration } from "../../lib/format";
import { Sparkline, sparkLabel } from "./Sparkline";
import type { OverviewTable } from "./types";

function hoursOf(table: OverviewTable, code: "already_exists" | "out_of_range") {
  return table.hours.map((hour) => ({ start: hour.start, count: hour[code] }));
}

function glanceColumns(now: string): Column<OverviewTable>[] {
  return [
    {
      id: "table",
      header: "Table",
      cell: (table) => <TableLink table={table.table} testId="overview-table-link" />,
      rowHeader: true,
      className: "ov-id ov-table-name",
    },
    { id: "freshness", header: "Freshness", cell: (table) => <Freshness figures={table} now={now} /> },
    {
      id: "rows-today",
      header: "Rows today",
      cell: (table) => <FigureCount figure="rows-today" count={table.rows_committed_today} />,
      align: "end",
      cellAttributes: () => ({ "data-testid": "table-rows-today" }),
    },
    {
      id: "already-exists",
      header: (
        <>
          <CodeName code="ALREADY_EXISTS" /> 24&nbsp;h
        </>
      ),
      headerTitle: "append requests answered ALREADY_EXISTS, per hour",
      headerClassName: "code",
      cell: (table) => (
        <Sparkline
          values={table.hours.map((hour) => hour.already_exists)}
          label={sparkLabel(`ALREADY_EXISTS on ${table.table}`, hoursOf(table, "already_exists"))}
          tone="info"
          testId="table-already-exists"
          figure="already-exists"
        />
      ),
    },
    {
      id: "out-of-range",
      header: (
        <>
          <CodeName code="OUT_OF_RANGE" /> 24&nbsp;h
        </>
      ),
      headerTitle: "append requests answered OUT_OF_RANGE, per hour",
      headerClassName: "code",
      cell: (table) => (
        <Sparkline
          values={table.hours.map((hour) => hour.out_of_range)}
          label={sparkLabel(`OUT_OF_RANGE on ${table.table}`, hoursOf(table, "out_of_range"))}
          tone="bad"
          testId="table-out-of-range"
          figure="out-of-range"
        />
      ),
    },
    {
      id: "set-aside",
      header: "Set aside 24 h",
      cell: (table) => formatCount(table.rows_dead_lettered),
      align: "end",
      cellAttributes: () => ({ "data-testid": "table-dead-lettered" }),
    },
    { id: "latest-check", header: "Latest check", cell: (table) => <VerdictLink verdict={table.reconciliation} now={now} /> },
  ];
}

export function TableGlance({
  tables,
  count,
  now,
  staleAfterS,
}: {
  tables: OverviewTable[];
  count: number;
  now: string;
  staleAfterS: number;
}) {
  const stale = tables.filter((table) => table.freshness === "stale").length;
  return (
    <section aria-labelledby="ov-tables-title" data-testid="overview-tables">
      <div className="ov-section-header">
        <h2 id="ov-tables-title">
          Tables <span className="ov-count">{formatCount(count)}</span>
          {stale > 0 && <span className="badge badge-warn ov-stale-count">{formatCount(stale)} stale</span>}
        </h2>
        <p className="muted ov-note">
          Stale: no commit for {formatDuration(staleAfterS * 1000)} (<code>ONCEOVER_STALE_AFTER_S</code>). Today is the
          UTC day; retry codes are per hour over the last 24 hours.
        </p>
      </div>
      <DataTable
        label="Tables"
        className="ov-table"
        columns={glanceColumns(now)}
        rows={tables}
        rowKey={(table) => table.table}
        rowAttributes={(table) => ({
          "data-testid": "overview-table",
          "data-table": table.table,
          "data-freshness": table.freshness,
        })}
        empty="No table has been loaded yet."
      />
      {count > tables.length && (
        <p className="ov-more">
          <Link to="/tables">All {formatCount(count)} tables</Link>
        </p>
      )}
    </section>
  );
}
