import { useEffect, useState } from "react";
import { api, type DependencyHealth, type Health } from "../api/client";
import { DataTable, type Column } from "./DataTable";

const REFRESH_MS = 5000;

type State =
  | { kind: "loading" }
  | { kind: "loaded"; health: Health; checkedAt: Date }
  | { kind: "unreachable"; reason: string; checkedAt: Date };

// /api/health answers 503 with the same body when a dependency is down.
async function fetchHealth(): Promise<State> {
  try {
    const { data, error } = await api.GET("/api/health");
    const health = (data ?? error) as Health | undefined;
    if (health && "database" in health) {
      return { kind: "loaded", health, checkedAt: new Date() };
    }
    return { kind: "unreachable", reason: "unexpected answer from /api/health", checkedAt: new Date() };
  } catch (exc) {
    return { kind: "unreachable", reason: String(exc), checkedAt: new Date() };
  }
}

type Dependency = { name: string; health: DependencyHealth };

const DEPENDENCY_COLUMNS: Column<Dependency>[] = [
  { id: "dependency", header: "Dependency", cell: (dependency) => dependency.name, rowHeader: true },
  {
    id: "status",
    header: "Status",
    cell: ({ health }) => <span className={`badge badge-${health.status}`}>{health.status}</span>,
  },
  { id: "target", header: "Target", cell: ({ health }) => health.target, className: "target" },
  {
    id: "latency",
    header: "Latency",
    cell: ({ health }) => (
      <>
        {health.latency_ms.toFixed(1)} ms
        {/* Answers are shared for a few seconds (ONCEOVER_HEALTH_CACHE_S). */}
        {health.age_s >= 1 && <span className="muted">, checked {Math.round(health.age_s)} s ago</span>}
      </>
    ),
    className: "number", // the cells only (not align): the header stays left-aligned, as it always was
  },
  { id: "error", header: "Error", cell: ({ health }) => health.error ?? "", className: "error" },
];

export function HealthPanel() {
  const [state, setState] = useState<State>({ kind: "loading" });

  useEffect(() => {
    let cancelled = false;
    const refresh = async () => {
      const next = await fetchHealth();
      if (!cancelled) setState(next);
    };
    void refresh();
    const timer = window.setInterval(refresh, REFRESH_MS);
    return () => {
      cancelled = true;
      window.clearInterval(timer);
    };
  }, []);

  return (
    <section aria-labelledby="health-title">
      <h2 id="health-title">System health</h2>
      {state.kind === "loading" && <p>Checking…</p>}
      {state.kind === "unreachable" && (
        <p role="alert">The backend is unreachable: {state.reason}</p>
      )}
      {state.kind === "loaded" && (
        <>
          <p data-testid="health-status">
            Overall: <span className={`badge badge-${state.health.status}`}>{state.health.status}</span>{" "}
            <span className="muted">
              version {state.health.version}, checked {state.checkedAt.toLocaleTimeString()}
            </span>
          </p>
          <DataTable
            label="Dependencies"
            columns={DEPENDENCY_COLUMNS}
            rows={[
              { name: "Database", health: state.health.database },
              { name: "BigQuery", health: state.health.bigquery },
            ]}
            rowKey={(dependency) => dependency.name}
            rowAttributes={(dependency) => ({ "data-testid": `health-${dependency.name.toLowerCase()}` })}
          />
        </>
      )}
    </section>
  );
}
