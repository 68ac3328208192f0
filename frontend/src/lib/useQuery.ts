// Loading what a view shows: keeps the last answer on screen while a reload (a live
// update, a filter change) is under way, so numbers change in place without flicker.
import { useCallback, useEffect, useRef, useState } from "react";
import { errorMessage } from "../api/client";

export type Query<T> = {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  reload: () => void;
};

/** `load` returns openapi-fetch's `{data, error}`; it is called again when `key` changes. */
export function useQuery<T>(
  load: () => Promise<{ data?: T; error?: unknown; response: Response }>,
  key: string,
): Query<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const latest = useRef(load);
  latest.current = load;
  const shownKey = useRef(key);

  useEffect(() => {
    let current = true;
    if (shownKey.current !== key) {
      shownKey.current = key;
      setData(undefined); // another thing is asked for: do not show the old one as it
    }
    setLoading(true);
    latest
      .current()
      .then(({ data: answer, error: failure, response }) => {
        if (!current) return;
        if (answer !== undefined) {
          setData(answer);
          setError(null);
        } else {
          setError(errorMessage(failure, `the backend answered ${response.status}`));
        }
      })
      .catch((exc: unknown) => current && setError(`the backend is unreachable: ${errorMessage(exc)}`))
      .finally(() => current && setLoading(false));
    return () => {
      current = false;
    };
  }, [key, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}
