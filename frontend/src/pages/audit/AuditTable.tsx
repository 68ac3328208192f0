// The audit entries, newest first. An actor or action links to the log filtered by it.
import { Link, useSearchParams } from "react-router";
import type { AuditEntry } from "../../api/client";
import { formatTime } from "../../lib/format";

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  return (
    <div className="table-wrap">
      <table className="audit-table">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Actor</th>
            <th scope="col">Role</th>
            <th scope="col">Action</th>
            <th scope="col">Request</th>
            <th scope="col">Target</th>
            <th scope="col" className="number">Status</th>
            <th scope="col">Outcome</th>
            <th scope="col">Request id</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((entry) => (
            <AuditRow key={entry.id} entry={entry} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function AuditRow({ entry }: { entry: AuditEntry }) {
  return (
    <tr data-testid="audit-row" data-audit-id={entry.id}>
      <td className="audit-time">
        <time dateTime={entry.time}>{formatTime(entry.time)}</time>
      </td>
      <td data-testid="audit-actor-cell">
        <FilterLink name="actor" value={entry.actor} />
      </td>
      <td>{entry.role ?? <span className="muted">–</span>}</td>
      <td data-testid="audit-action-cell">
        <FilterLink name="action" value={entry.action} />
      </td>
      <td className="mono">
        <span className="audit-method">{entry.method}</span> {entry.path}
      </td>
      <td className="target">{entry.target ?? <span className="muted">–</span>}</td>
      <td className="number">
        <span className={`audit-status ${statusTone(entry.status_code)}`} data-testid="audit-status-code">
          {entry.status_code}
        </span>
      </td>
      <td className="audit-outcome" data-testid="audit-outcome">
        {entry.outcome}
      </td>
      <td className="mono audit-request-id">{entry.request_id}</td>
    </tr>
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
