import { describe, expect, it } from "vitest";
import {
  durationBetween,
  formatBytes,
  formatCount,
  formatDuration,
  formatRate,
  formatSeconds,
  formatShare,
} from "./format";

describe("formatShare", () => {
  it("never shows a small non-zero share as zero", () => {
    expect(formatShare(0)).toBe("0 %");
    expect(formatShare(1 / 1_000_000)).toBe("< 0.01 %");
    expect(formatShare(0.0004)).toBe("0.04 %");
    expect(formatShare(0.031)).toBe("3.1 %");
    expect(formatShare(0.5)).toBe("50 %");
    expect(formatShare(1)).toBe("100 %");
  });
  it("says when there is nothing to share", () => {
    expect(formatShare(null)).toBe("–");
    expect(formatShare(Number.NaN)).toBe("–");
  });
});

describe("formatRate", () => {
  it("picks the unit that reads best", () => {
    expect(formatRate(12_000, 60)).toBe("200/s");
    expect(formatRate(90, 60)).toBe("1.5/s");
    expect(formatRate(3, 60)).toBe("3.0/min");
    expect(formatRate(1, 3600)).toBe("1.0/h");
    expect(formatRate(0, 60)).toBe("0/s");
    expect(formatRate(5, 0)).toBe("–");
  });
});

describe("formatDuration", () => {
  it("grows its units with the duration", () => {
    expect(formatDuration(850)).toBe("850 ms");
    expect(formatDuration(12_340)).toBe("12.3 s");
    expect(formatDuration(245_000)).toBe("4 min 05 s");
    expect(formatDuration(7_380_000)).toBe("2 h 03 min");
    expect(formatDuration(3 * 86_400_000 + 3_600_000)).toBe("3 d 1 h");
    expect(formatDuration(null)).toBe("–");
    expect(formatDuration(-5)).toBe("–");
  });
  it("measures a running thing up to now", () => {
    const start = "2026-01-01T00:00:00Z";
    expect(durationBetween(start, "2026-01-01T00:01:00Z")).toBe(60_000);
    expect(durationBetween(start, null, Date.parse("2026-01-01T00:00:30Z"))).toBe(30_000);
  });
});

describe("formatSeconds", () => {
  it("reads a setting in the largest units that keep it whole", () => {
    expect(formatSeconds(45)).toBe("45 s");
    expect(formatSeconds(90)).toBe("1 min 30 s");
    expect(formatSeconds(300)).toBe("5 min");
    expect(formatSeconds(14_400)).toBe("4 h");
    expect(formatSeconds(9_000)).toBe("2 h 30 min");
    expect(formatSeconds(0)).toBe("0 s");
    expect(formatSeconds(0, "never")).toBe("never");
  });
});

describe("counts and bytes", () => {
  it("groups thousands and names binary units", () => {
    expect(formatCount(1_234_567)).toBe("1,234,567");
    expect(formatCount(undefined)).toBe("–");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
  });
});
