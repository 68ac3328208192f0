// Alerts firing now: the rule links to the alerts page (its firing alerts), the subject
// to the run or table it watches.
import { Link } from "react-router";
import { RunLink, TableLink } from "../../components/links";
import { TimeAgo } from "../../components/TimeAgo";
import { Empty, SeverityBadge } from "../../components/ui";
import { formatCount } from "../../lib/format";
import type { FiringAlert } from "./types";

export const ALERTS_SHOWN = 6;

function Subject({ alert }: { alert: FiringAlert }) {
  if (alert.run_id) return <RunLink runId={alert.run_id} />;
  if (alert.table) return <TableLink table={alert.table} />;
  return <span className="muted">–</span>;
}

export function FiringAlerts({ alerts, count, now }: { alerts: FiringAlert[]; count: number; now: string }) {
  const shown = alerts.slice(0, ALERTS_SHOWN);
  return (
    <section aria-labelledby="ov-alerts-title" data-testid="firing-alerts">
      <h2 id="ov-alerts-title">
        Alerts firing <span className="ov-count">{formatCount(count)}</span>
      </h2>
      {shown.length === 0 ? (
        <Empty>
          No alert is firing. <Link to="/alerts?tab=rules">The alert rules</Link> say what would fire.
        </Empty>
      ) : (
        <>
          <div className="table-wrap">
            <table className="ov-table">
              <thead>
                <tr>
                  <th scope="col">Rule</th>
                  <th scope="col">Severity</th>
                  <th scope="col">Subject</th>
                  <th scope="col">Since</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((alert) => (
                  <tr key={alert.id} data-testid="firing-alert" data-alert-id={alert.id} title={alert.summary}>
                    <td>
                      <Link to={alert.link}>{alert.rule}</Link>
                    </td>
                    <td>
                      <SeverityBadge severity={alert.severity} />
                    </td>
                    <td className="ov-id">
                      <Subject alert={alert} />
                    </td>
                    <td className="nowrap">
                      <TimeAgo iso={alert.since} now={now} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {count > shown.length && (
            <p className="ov-more">
              <Link to="/alerts?state=firing">{formatCount(count - shown.length)} more on the alerts page</Link>
            </p>
          )}
        </>
      )}
    </section>
  );
}
