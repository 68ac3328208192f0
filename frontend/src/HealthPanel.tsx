import { useEffect, useState } from "react";
import { api, type DependencyHealth, type Health } from "./api/client";

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

function DependencyRow({ name, dependency }: { name: string; dependency: DependencyHealth }) {
  return (
    <tr data-testid={`health-${name.toLowerCase()}`}>
      <th scope="row">{name}</th>
      <td>
        <span className={`badge badge-${dependency.status}`}>{dependency.status}</span>
      </td>
      <td className="target">{dependency.target}</td>
      <td className="number">
        {dependency.latency_ms.toFixed(1)} ms
        {/* Answers are shared for a few seconds (ONCEOVER_HEALTH_CACHE_S). */}
        {dependency.age_s >= 1 && (
          <span className="muted">, checked {Math.round(dependency.age_s)} s ago</span>
        )}
      </td>
      <td className="error">{dependency.error ?? ""}</td>
    </tr>
  );
}

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
          <table>
            <thead>
              <tr>
                <th scope="col">Dependency</th>
                <th scope="col">Status</th>
                <th scope="col">Target</th>
                <th scope="col">Latency</th>
                <th scope="col">Error</th>
              </tr>
            </thead>
            <tbody>
              <DependencyRow name="Database" dependency={state.health.database} />
              <DependencyRow name="BigQuery" dependency={state.health.bigquery} />
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
