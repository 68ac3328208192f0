// Runs a whole-table check and keeps its answer until the history has been re-read.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, errorMessage, type Reconciliation } from "../../api/client";

export type TableReconcile = {
  /** Checks run from this page, newest first. */
  justRun: Reconciliation[];
  busy: boolean;
  error: string | null;
  reconcile: (key: string | null) => Promise<void>;
};

export function useTableReconcile(table: string, onChecked: () => void): TableReconcile {
  const [justRun, setJustRun] = useState<Reconciliation[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);
  const latestOnChecked = useRef(onChecked);
  latestOnChecked.current = onChecked;

  const reconcile = useCallback(
    async (key: string | null) => {
      setBusy(true);
      setError(null);
      try {
        const { data, error: failure, response } = await api.POST("/api/tables/{table}/reconcile", {
          params: { path: { table } },
          body: key ? { key } : {}, // {}: the backend uses the key of the latest run naming one
        });
        if (!mounted.current) return;
        if (data) {
          setJustRun((checks) => [data, ...checks]);
          latestOnChecked.current();
        } else {
          setError(describeFailure(response.status, failure));
        }
      } catch (exc) {
        if (mounted.current) setError(`the backend is unreachable: ${errorMessage(exc)}`);
      } finally {
        if (mounted.current) setBusy(false);
      }
    },
    [table],
  );

  return { justRun, busy, error, reconcile };
}

function describeFailure(status: number, failure: unknown): string {
  if (status === 403) return "your token's role may not reconcile (operators only).";
  if (status === 404) return errorMessage(failure, "no run wrote to this table, so there is nothing to check against.");
  return errorMessage(failure, `the backend answered ${status}`);
}
