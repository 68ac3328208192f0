// The page's state lives in the URL (tab, filters, selection), so a view can be
// linked and survives a reload. These helpers change some keys and keep the rest.
import { useCallback } from "react";
import { useSearchParams } from "react-router";

export type ParamChanges = Record<string, string | number | null | undefined>;

/** `current` with `changes` applied: null/undefined/"" removes a key. */
export function withParams(current: URLSearchParams, changes: ParamChanges): URLSearchParams {
  const next = new URLSearchParams(current);
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === "") next.delete(key);
    else next.set(key, String(value));
  }
  return next;
}

/** The search params and a setter merging changes into them. */
export function useUrlState(): [URLSearchParams, (changes: ParamChanges) => void] {
  const [params, setParams] = useSearchParams();
  const change = useCallback(
    (changes: ParamChanges) => setParams((current) => withParams(current, changes)),
    [setParams],
  );
  return [params, change];
}

/** A non-negative integer param (an offset, an id), or `fallback`. */
export function intParam(params: URLSearchParams, key: string, fallback: number): number {
  const value = Number(params.get(key));
  return params.has(key) && Number.isInteger(value) && value >= 0 ? value : fallback;
}
