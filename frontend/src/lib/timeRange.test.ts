import { describe, expect, it } from "vitest";
import { rangeFromParams } from "./timeRange";

const NOW = Date.parse("2026-03-01T12:00:00Z");

describe("rangeFromParams", () => {
  it("turns a preset into a since relative to now", () => {
    expect(rangeFromParams(new URLSearchParams("range=1h"), NOW)).toEqual({
      since: "2026-03-01T11:00:00.000Z",
      label: "Last hour",
    });
  });
  it("leaves the range open for all time, the default", () => {
    expect(rangeFromParams(new URLSearchParams(""), NOW)).toEqual({ label: "All time" });
    expect(rangeFromParams(new URLSearchParams("range=bogus"), NOW)).toEqual({ label: "All time" });
  });
  it("prefers a custom since and until", () => {
    const range = rangeFromParams(new URLSearchParams("range=1h&since=2026-02-01T00:00:00Z"), NOW);
    expect(range).toEqual({ since: "2026-02-01T00:00:00.000Z", until: undefined, label: "Custom" });
  });
  it("leaves out a time that does not parse", () => {
    expect(rangeFromParams(new URLSearchParams("since=yesterday&until=2026-02-01T00:00:00Z"), NOW)).toEqual({
      since: undefined,
      until: "2026-02-01T00:00:00.000Z",
      label: "Custom",
    });
  });
});
