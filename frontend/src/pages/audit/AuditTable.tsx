// The audit entries, newest first. An actor or action links to the log filtered by it.
import { Link, useSearchParams } from "react-router";
import type { AuditEntry } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { formatTime } from "../../lib/format";

const AUDIT_COLUMNS: Column<AuditEntry>[] = [
  {
    id: "time",
    header: "Time",
    cell: (entry) => <time dateTime={entry.time}>{formatTime(entry.time)}</time>,
    className: "audit-time",
  },
  {
    id: "actor",
    header: "Actor",
    cell: (entry) => <FilterLink name="actor" value={entry.actor} />,
    cellAttributes: () => ({ "data-testid": "audit-actor-cell" }),
  },
  { id: "role", header: "Role", cell: (entry) => entry.role ?? <span className="muted">–</span> },
  {
    id: "action",
    header: "Action",
    cell: (entry) => <FilterLink name="action" value={entry.action} />,
    cellAttributes: () => ({ "data-testid": "audit-action-cell" }),
  },
  {
    id: "request",
    header: "Request",
    cell: (entry) => (
      <>
        <span className="audit-method">{entry.method}</span> {entry.path}
      </>
    ),
    className: "mono",
  },
  { id: "target", header: "Target", cell: (entry) => entry.target ?? <span className="muted">–</span>, className: "target" },
  {
    id: "status",
    header: "Status",
    cell: (entry) => (
      <span className={`audit-status ${statusTone(entry.status_code)}`} data-testid="audit-status-code">
        {entry.status_code}
      </span>
    ),
    align: "end",
  },
  {
    id: "outcome",
    header: "Outcome",
    cell: (entry) => entry.outcome,
    className: "audit-outcome",
    cellAttributes: () => ({ "data-testid": "audit-outcome" }),
  },
  { id: "request-id", header: "Request id", cell: (entry) => entry.request_id, className: "mono audit-request-id" },
];

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  return (
    <DataTable
      label="Audit log"
      className="audit-table"
      columns={AUDIT_COLUMNS}
      rows={entries}
      rowKey={(entry) => entry.id}
      rowAttributes={(entry) => ({ "data-testid": "audit-row", "data-audit-id": entry.id })}
      empty="No entries on this page."
    />
  );
}

function statusTone(code: number): string {
  if (code >= 500) return "badge badge-bad";
  if (code >= 400) return "badge badge-warn";
  return "badge badge-ok";
}

function FilterLink({ name, value }: { name: "actor" | "action"; value: string }) {
  const [params] = useSearchParams();
  const next = new URLSearchParams(params);
  next.set(name, value);
  next.delete("offset");
  return (
    <Link to={{ search: `?${next.toString()}` }} title={`Show only entries with ${name} ${value}`}>
      {value}
    </Link>
  );
}
