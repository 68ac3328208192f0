// What is firing (or pending) now, and every notification alerts made before.
import { useEffect } from "react";
import { api, type Alert, type AlertRule, type AlertTransition } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { HistoryPager } from "../../components/HistoryPager";
import { RunLink, TableLink } from "../../components/links";
import { QueryState, SeverityBadge, StatusBadge } from "../../components/ui";
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
        {({ data, count }) => (
          <>
            <DataTable
              label="Current alerts"
              columns={ALERT_COLUMNS}
              rows={data}
              rowKey={(alert) => alert.id}
              rowAttributes={() => ({ "data-testid": "alert-row" })}
              empty={emptyText}
            />
            {data.length > 0 && count > data.length && (
              <p className="muted">
                The {data.length} most urgent of {count} are shown.
              </p>
            )}
          </>
        )}
      </QueryState>
    </section>
  );
}

const ALERT_COLUMNS: Column<Alert>[] = [
  { id: "rule", header: "Rule", cell: (alert) => alert.labels.alertname ?? `rule ${alert.rule_id}` },
  { id: "severity", header: "Severity", cell: (alert) => <SeverityBadge severity={alert.labels.severity} /> },
  { id: "state", header: "State", cell: (alert) => <StatusBadge status={alert.state} /> },
  { id: "summary", header: "Summary", cell: (alert) => alert.summary },
  { id: "run", header: "Run", cell: (alert) => <RunLink runId={alert.run_id} /> },
  { id: "table", header: "Table", cell: (alert) => <TableLink table={alert.table} /> },
  { id: "since", header: "Since", cell: (alert) => formatTime(alertSince(alert)) },
];

/** A firing alert counts from when it fired, a pending one from when it began to hold. */
function alertSince(alert: Alert): string | null | undefined {
  return alert.state === "resolved" ? alert.ended_at : (alert.started_at ?? alert.pending_since);
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
        {({ data, count }) => (
          <>
            <DataTable
              label="Alert history"
              columns={TRANSITION_COLUMNS}
              rows={data}
              rowKey={(transition) => transition.id}
              empty="No alert has fired yet."
            />
            {data.length > 0 && (
              <HistoryPager label="History pages" offset={offset} limit={HISTORY_LIMIT} count={count} onOffset={onOffset} />
            )}
          </>
        )}
      </QueryState>
    </section>
  );
}

const TRANSITION_COLUMNS: Column<AlertTransition>[] = [
  { id: "at", header: "At", cell: (transition) => formatTime(transition.at) },
  {
    id: "status",
    header: "Status",
    cell: (transition) => (
      <StatusBadge status={transition.status} label={transition.repeat ? `${transition.status} (repeat)` : undefined} />
    ),
  },
  { id: "rule", header: "Rule", cell: (transition) => transition.labels.alertname ?? "–" },
  { id: "severity", header: "Severity", cell: (transition) => <SeverityBadge severity={transition.labels.severity} /> },
  { id: "summary", header: "Summary", cell: (transition) => transition.summary },
  { id: "run", header: "Run", cell: (transition) => <RunLink runId={transition.labels.run_id} /> },
  { id: "table", header: "Table", cell: (transition) => <TableLink table={transition.labels.table} /> },
];
