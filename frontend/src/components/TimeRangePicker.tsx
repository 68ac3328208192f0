// Picks the time range kept in the URL: a preset, or a custom since/until.
import { useSearchParams } from "react-router";
import { fromLocalInput, PRESETS, rangeFromParams, toLocalInput } from "../lib/timeRange";

export function TimeRangePicker({ fallback = "all" }: { fallback?: string }) {
  const [params, setParams] = useSearchParams();
  const custom = params.has("since") || params.has("until");
  const range = rangeFromParams(params, Date.now(), fallback);
  const selected = custom ? "custom" : (params.get("range") ?? fallback);

  const update = (change: (next: URLSearchParams) => void) => {
    const next = new URLSearchParams(params);
    change(next);
    next.delete("offset"); // a new range starts at its first page
    setParams(next);
  };

  return (
    <fieldset className="time-range">
      <legend>Time range</legend>
      <label>
        <span className="visually-hidden">Range</span>
        <select
          aria-label="Time range"
          value={selected}
          onChange={(event) =>
            update((next) => {
              const value = event.target.value;
              next.delete("since");
              next.delete("until");
              next.delete("range");
              if (value === "custom") next.set("since", new Date(Date.now() - 86400_000).toISOString());
              else if (value !== fallback) next.set("range", value);
            })
          }
        >
          {PRESETS.map((preset) => (
            <option key={preset.value} value={preset.value}>
              {preset.label}
            </option>
          ))}
          <option value="custom">Custom…</option>
        </select>
      </label>
      {custom && (
        <>
          <label>
            From{" "}
            <input
              type="datetime-local"
              value={toLocalInput(range.since)}
              onChange={(event) =>
                update((next) => {
                  const since = fromLocalInput(event.target.value);
                  if (since) next.set("since", since);
                  else next.delete("since");
                })
              }
            />
          </label>
          <label>
            to{" "}
            <input
              type="datetime-local"
              value={toLocalInput(range.until)}
              onChange={(event) =>
                update((next) => {
                  const until = fromLocalInput(event.target.value);
                  if (until) next.set("until", until);
                  else next.delete("until");
                })
              }
            />
          </label>
        </>
      )}
    </fieldset>
  );
}
