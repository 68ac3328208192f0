// Links to a run's and a table's page, drawn the same on every page.
import { Link } from "react-router";
import { TableId } from "./ui";

export function runPath(runId: string): string {
  return `/runs/${encodeURIComponent(runId)}`;
}

export function tablePath(table: string): string {
  return `/tables/${encodeURIComponent(table)}`;
}

/** A run's id linking to its page; "–" when there is none. */
export function RunLink({ runId }: { runId: string | null | undefined }) {
  if (!runId) return <span className="muted">–</span>;
  return (
    <Link to={runPath(runId)} className="mono">
      {runId}
    </Link>
  );
}

/** A table's id, wrapping only at its dots, linking to its page; "–" when there is none. */
export function TableLink({ table, testId }: { table: string | null | undefined; testId?: string }) {
  if (!table) return <span className="muted">–</span>;
  return (
    <Link to={tablePath(table)} data-testid={testId}>
      <TableId id={table} />
    </Link>
  );
}
