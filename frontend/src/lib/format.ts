// How numbers, rates, durations and times read on every page.

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function formatCount(n: number | null | undefined): string {
  return n === null || n === undefined ? "–" : integer.format(n);
}

/**
 * A share of requests (0..1) as a percentage a reader can compare: small but non-zero
 * shares are never shown as 0 %, since a few ALREADY_EXISTS among many OKs still matter.
 */
export function formatShare(share: number | null | undefined): string {
  if (share === null || share === undefined || Number.isNaN(share)) return "–";
  if (share === 0) return "0 %";
  const percent = share * 100;
  if (percent < 0.01) return "< 0.01 %";
  if (percent < 1) return `${percent.toFixed(2)} %`;
  if (percent < 10) return `${percent.toFixed(1)} %`;
  return `${Math.round(percent)} %`;
}

/** `count` events over `seconds` as a per-second or per-minute rate, whichever reads better. */
export function formatRate(count: number, seconds: number): string {
  if (seconds <= 0) return "–";
  const perSecond = count / seconds;
  if (perSecond === 0) return "0/s";
  if (perSecond >= 10) return `${integer.format(Math.round(perSecond))}/s`;
  if (perSecond >= 1) return `${perSecond.toFixed(1)}/s`;
  const perMinute = perSecond * 60;
  return perMinute >= 1 ? `${perMinute.toFixed(1)}/min` : `${(perMinute * 60).toFixed(1)}/h`;
}

/** Milliseconds as "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min". */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || Number.isNaN(ms) || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) return `${minutes} min ${String(whole % 60).padStart(2, "0")} s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${String(minutes % 60).padStart(2, "0")} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** Whole seconds as a setting reads: "45 s", "1 min 30 s", "4 h", "2 h 30 min"; 0 as `zero`. */
export function formatSeconds(s: number, zero = "0 s"): string {
  if (s === 0) return zero;
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return s % 60 ? `${minutes} min ${Math.round(s % 60)} s` : `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
}

/** From `start` to `end` (or to `now` while it runs). */
export function durationBetween(start: string, end: string | null | undefined, now = Date.now()): number {
  return (end ? Date.parse(end) : now) - Date.parse(start);
}

/** A timestamp in the reader's time zone, to the second. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "–";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString("en-GB", {
    year: "numeric",
    month: "short",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

/** Bytes as "512 B", "1.5 KiB", "3.2 MiB". */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}
