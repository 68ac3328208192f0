// Alerts firing now: the rule links to the alerts page (its firing alerts), the subject
// to the run or table it watches.
import { Link } from "react-router";
import { DataTable, type Column } from "../../components/DataTable";
import { RunLink, TableLink } from "../../components/links";
import { TimeAgo } from "../../components/TimeAgo";
import { SeverityBadge } from "../../components/ui";
import { formatCount } from "../../lib/format";
import type { FiringAlert } from "./types";

export const ALERTS_SHOWN = 6;

function Subject({ alert }: { alert: FiringAlert }) {
  if (alert.run_id) return <RunLink runId={alert.run_id} />;
  if (alert.table) return <TableLink table={alert.table} />;
  return <span className="muted">–</span>;
}

function firingColumns(now: string): Column<FiringAlert>[] {
  return [
    { id: "rule", header: "Rule", cell: (alert) => <Link to={alert.link}>{alert.rule}</Link> },
    { id: "severity", header: "Severity", cell: (alert) => <SeverityBadge severity={alert.severity} /> },
    { id: "subject", header: "Subject", cell: (alert) => <Subject alert={alert} />, className: "ov-id" },
    { id: "since", header: "Since", cell: (alert) => <TimeAgo iso={alert.since} now={now} />, className: "nowrap" },
  ];
}

export function FiringAlerts({ alerts, count, now }: { alerts: FiringAlert[]; count: number; now: string }) {
  const shown = alerts.slice(0, ALERTS_SHOWN);
  return (
    <section aria-labelledby="ov-alerts-title" data-testid="firing-alerts">
      <h2 id="ov-alerts-title">
        Alerts firing <span className="ov-count">{formatCount(count)}</span>
      </h2>
      <DataTable
        label="Alerts firing"
        className="ov-table"
        columns={firingColumns(now)}
        rows={shown}
        rowKey={(alert) => alert.id}
        rowAttributes={(alert) => ({ "data-testid": "firing-alert", "data-alert-id": alert.id, title: alert.summary })}
        empty={
          <>
            No alert is firing. <Link to="/alerts?tab=rules">The alert rules</Link> say what would fire.
          </>
        }
      />
      {shown.length > 0 && count > shown.length && (
        <p className="ov-more">
          <Link to="/alerts?state=firing">{formatCount(count - shown.length)} more on the alerts page</Link>
        </p>
      )}
    </section>
  );
}
