// The time range every list and chart is filtered by, kept in the URL
// (`range=24h`, or `since=`/`until=` for a custom one) so a link reproduces the view.

export const PRESETS = [
  { value: "1h", label: "Last hour", seconds: 3600 },
  { value: "24h", label: "Last 24 hours", seconds: 86400 },
  { value: "7d", label: "Last 7 days", seconds: 7 * 86400 },
  { value: "30d", label: "Last 30 days", seconds: 30 * 86400 },
  { value: "all", label: "All time", seconds: null },
] as const;

export type TimeRange = { since?: string; until?: string; label: string };

/** Reads the range from URL parameters; `fallback` is the preset when none is given. */
export function rangeFromParams(params: URLSearchParams, now = Date.now(), fallback = "all"): TimeRange {
  const since = params.get("since");
  const until = params.get("until");
  if (since || until) {
    // A hand-edited link may carry a time that does not parse: it is left out, not fatal.
    return { since: isoOrUndefined(since), until: isoOrUndefined(until), label: "Custom" };
  }
  const preset = PRESETS.find((p) => p.value === (params.get("range") ?? fallback)) ?? PRESETS[4];
  if (preset.seconds === null) return { label: preset.label };
  return { since: new Date(now - preset.seconds * 1000).toISOString(), label: preset.label };
}

function isoOrUndefined(text: string | null): string | undefined {
  if (!text) return undefined;
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** `datetime-local` input value (local time, minutes) for an ISO time, and back. */
export function toLocalInput(iso: string | undefined): string {
  if (!iso) return "";
  const date = new Date(iso);
  const offset = date.getTimezoneOffset() * 60_000;
  return new Date(date.getTime() - offset).toISOString().slice(0, 16);
}

export function fromLocalInput(value: string): string | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}
