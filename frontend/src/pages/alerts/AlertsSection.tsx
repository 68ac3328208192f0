// What is firing (or pending) now, and every notification alerts made before.
import { useEffect } from "react";
import { api, type Alert, type AlertRule, type AlertTransition } from "../../api/client";
import { HistoryPager } from "../../components/HistoryPager";
import { RunLink, TableLink } from "../../components/links";
import { Empty, QueryState, SeverityBadge, StatusBadge } from "../../components/ui";
import { formatTime } from "../../lib/format";
import { useQuery } from "../../lib/useQuery";
import { intParam, useUrlState } from "./urlState";

type AlertState = Alert["state"];

/** The state filter's choices; "" (the default) is what needs attention now. */
const STATE_FILTERS: { value: string; label: string; states: AlertState[] }[] = [
  { value: "", label: "Firing and pending", states: ["firing", "pending"] },
  { value: "firing", label: "Firing", states: ["firing"] },
  { value: "pending", label: "Pending", states: ["pending"] },
  { value: "resolved", label: "Resolved", states: ["resolved"] },
  { value: "inactive", label: "Inactive (cleared while pending)", states: ["inactive"] },
  { value: "any", label: "Any state", states: ["pending", "firing", "resolved", "inactive"] },
];

const EMPTY_TEXT: Record<string, string> = {
  "": "No alerts are firing or pending.",
  firing: "No alerts are firing.",
  pending: "No alerts are pending.",
  resolved: "No resolved alerts.",
  inactive: "No inactive alerts.",
  any: "No alerts yet.",
};

// Rules are evaluated every 15 s by default: looking again as often shows changes.
const REFRESH_MS = 15_000;
const HISTORY_LIMIT = 25;

function useEvery(ms: number, reload: () => void) {
  useEffect(() => {
    const timer = window.setInterval(reload, ms);
    return () => window.clearInterval(timer);
  }, [ms, reload]);
}

export function AlertsSection({ rules }: { rules: AlertRule[] }) {
  const [params, change] = useUrlState();
  const state = params.get("state") ?? "";
  const filter = STATE_FILTERS.find((f) => f.value === state) ?? STATE_FILTERS[0];
  const ruleId = intParam(params, "rule", 0) || undefined;

  return (
    <>
      <div className="filters" role="group" aria-label="Alert filters">
        <label>
          State
          <select value={filter.value} onChange={(e) => change({ state: e.target.value, history_offset: null })}>
            {STATE_FILTERS.map((f) => (
              <option key={f.value} value={f.value}>
                {f.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Rule
          <select
            value={ruleId ?? ""}
            onChange={(e) => change({ rule: e.target.value, history_offset: null })}
          >
            <option value="">Any rule</option>
            {rules.map((rule) => (
              <option key={rule.id} value={rule.id}>
                {rule.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      <CurrentAlerts states={filter.states} ruleId={ruleId} emptyText={EMPTY_TEXT[filter.value] ?? "No alerts."} />
      <AlertHistory ruleId={ruleId} offset={intParam(params, "history_offset", 0)} onOffset={(o) => change({ history_offset: o })} />
    </>
  );
}

function CurrentAlerts({ states, ruleId, emptyText }: { states: AlertState[]; ruleId?: number; emptyText: string }) {
  const alerts = useQuery(
    () => api.GET("/api/alerts", { params: { query: { state: states, rule_id: ruleId, limit: 200 } } }),
    `alerts:${states.join(",")}:${ruleId ?? ""}`,
  );
  useEvery(REFRESH_MS, alerts.reload);
  return (
    <section aria-labelledby="current-alerts-title" data-testid="current-alerts">
      <h2 id="current-alerts-title">Current alerts</h2>
      <QueryState query={alerts} what="alerts">
        {({ data, count }) =>
          data.length === 0 ? (
            <Empty>{emptyText}</Empty>
          ) : (
            <>
              <div className="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Rule</th>
                      <th scope="col">Severity</th>
                      <th scope="col">State</th>
                      <th scope="col">Summary</th>
                      <th scope="col">Run</th>
                      <th scope="col">Table</th>
                      <th scope="col">Since</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.map((alert) => (
                      <AlertRow key={alert.id} alert={alert} />
                    ))}
                  </tbody>
                </table>
              </div>
              {count > data.length && (
                <p className="muted">
                  The {data.length} most urgent of {count} are shown.
                </p>
              )}
            </>
          )
        }
      </QueryState>
    </section>
  );
}

function AlertRow({ alert }: { alert: Alert }) {
  // A firing alert counts from when it fired, a pending one from when it began to hold.
  const since = alert.state === "resolved" ? alert.ended_at : (alert.started_at ?? alert.pending_since);
  return (
    <tr data-testid="alert-row">
      <td>{alert.labels.alertname ?? `rule ${alert.rule_id}`}</td>
      <td>
        <SeverityBadge severity={alert.labels.severity} />
      </td>
      <td>
        <StatusBadge status={alert.state} />
      </td>
      <td>{alert.summary}</td>
      <td>
        <RunLink runId={alert.run_id} />
      </td>
      <td>
        <TableLink table={alert.table} />
      </td>
      <td>{formatTime(since)}</td>
    </tr>
  );
}

function AlertHistory({ ruleId, offset, onOffset }: { ruleId?: number; offset: number; onOffset: (o: number) => void }) {
  const history = useQuery(
    () => api.GET("/api/alerts/history", { params: { query: { rule_id: ruleId, limit: HISTORY_LIMIT, offset } } }),
    `history:${ruleId ?? ""}:${offset}`,
  );
  useEvery(REFRESH_MS, history.reload);
  return (
    <section aria-labelledby="alert-history-title" data-testid="alert-history">
      <h2 id="alert-history-title">History</h2>
      <p className="muted">Every notification alerts made (firing, repeats, resolved), newest first.</p>
      <QueryState query={history} what="the alert history">
        {({ data, count }) =>
          data.length === 0 ? (
            <Empty>No alert has fired yet.</Empty>
          ) : (
            <>
              <div className="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">At</th>
                      <th scope="col">Status</th>
                      <th scope="col">Rule</th>
                      <th scope="col">Severity</th>
                      <th scope="col">Summary</th>
                      <th scope="col">Run</th>
                      <th scope="col">Table</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.map((transition) => (
                      <TransitionRow key={transition.id} transition={transition} />
                    ))}
                  </tbody>
                </table>
              </div>
              <HistoryPager label="History pages" offset={offset} limit={HISTORY_LIMIT} count={count} onOffset={onOffset} />
            </>
          )
        }
      </QueryState>
    </section>
  );
}

function TransitionRow({ transition }: { transition: AlertTransition }) {
  const { labels } = transition;
  return (
    <tr>
      <td>{formatTime(transition.at)}</td>
      <td>
        <StatusBadge status={transition.status} label={transition.repeat ? `${transition.status} (repeat)` : undefined} />
      </td>
      <td>{labels.alertname ?? "–"}</td>
      <td>
        <SeverityBadge severity={labels.severity} />
      </td>
      <td>{transition.summary}</td>
      <td>
        <RunLink runId={labels.run_id} />
      </td>
      <td>
        <TableLink table={labels.table} />
      </td>
    </tr>
  );
}
