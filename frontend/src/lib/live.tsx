// Live updates: one /api/changes stream per signed-in page, shared by every view.
// A view subscribes and re-reads what it shows when a run it cares about changes.
import {
  createContext,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useRef,
  useState,
  type ReactNode,
} from "react";
import { readToken } from "./token";
import { SseParser } from "./sse";
import { useThrottled } from "./throttle";

export type RunChange = { run_id: string; status: string; rows_committed: number; updated_at: string };
type Listener = (changes: RunChange[]) => void;
type Live = { connected: boolean; subscribe: (listener: Listener) => () => void };

const LiveContext = createContext<Live | null>(null);
const RETRY_MS = [1000, 2000, 5000, 10000];

export function LiveProvider({ children }: { children: ReactNode }) {
  const listeners = useRef(new Set<Listener>());
  const [connected, setConnected] = useState(false);

  useEffect(() => {
    const abort = new AbortController();
    let lastId: string | null = null;
    let failures = 0;

    const connect = async () => {
      while (!abort.signal.aborted) {
        const token = readToken();
        try {
          const headers: Record<string, string> = { Accept: "text/event-stream" };
          if (token) headers.Authorization = `Bearer ${token}`;
          if (lastId) headers["Last-Event-ID"] = lastId; // nothing missed across reconnects
          const response = await fetch("/api/changes", { headers, signal: abort.signal });
          if (!response.ok || !response.body) throw new Error(`changes: ${response.status}`);
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
          const parser = new SseParser();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            for (const event of parser.push(value)) {
              if (event.id) lastId = event.id;
              if (event.event === "ready") {
                failures = 0;
                setConnected(true);
              } else if (event.event === "runs") {
                const changes = (JSON.parse(event.data) as { runs: RunChange[] }).runs;
                for (const listener of listeners.current) listener(changes);
              }
            }
          }
        } catch {
          if (abort.signal.aborted) return;
        }
        setConnected(false);
        const wait = RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)];
        await new Promise((resolve) => window.setTimeout(resolve, wait));
      }
    };
    void connect();
    return () => abort.abort();
  }, []);

  const subscribe = useCallback((listener: Listener) => {
    listeners.current.add(listener);
    return () => {
      listeners.current.delete(listener);
    };
  }, []);
  const value = useMemo(() => ({ connected, subscribe }), [connected, subscribe]);

  return <LiveContext.Provider value={value}>{children}</LiveContext.Provider>;
}

export function useLive(): Live {
  const live = useContext(LiveContext);
  if (!live) throw new Error("useLive outside LiveProvider");
  return live;
}

/** Calls `onChange` whenever runs change (only `runId`'s changes when given). */
export function useRunChanges(onChange: (changes: RunChange[]) => void, runId?: string): void {
  const { subscribe } = useLive();
  const latest = useRef(onChange);
  latest.current = onChange;
  useEffect(
    () =>
      subscribe((changes) => {
        const relevant = runId ? changes.filter((c) => c.run_id === runId) : changes;
        if (relevant.length) latest.current(relevant);
      }),
    [subscribe, runId],
  );
}

/** Re-reads a view when runs change, at most once per `intervalMs` (runs report often
 * while they load), and always once after the last change. */
export function useLiveReload(reload: () => void, intervalMs = 500, runId?: string): void {
  useRunChanges(useThrottled(reload, intervalMs), runId);
}
