// Live updates can arrive many times a second while a job commits; a view re-reads at
// most once per `ms`, and always once after the last announcement.
import { useEffect, useMemo, useRef } from "react";

export function useThrottled(fn: () => void, ms: number): () => void {
  const latest = useRef(fn);
  latest.current = fn;
  const state = useRef<{ last: number; timer: number | null }>({ last: 0, timer: null });
  useEffect(
    () => () => {
      if (state.current.timer !== null) window.clearTimeout(state.current.timer);
    },
    [],
  );
  return useMemo(
    () => () => {
      const s = state.current;
      if (s.timer !== null) return; // one is already due
      const wait = Math.max(0, s.last + ms - Date.now());
      s.timer = window.setTimeout(() => {
        s.timer = null;
        s.last = Date.now();
        latest.current();
      }, wait);
    },
    [ms],
  );
}
