// Paging kept in the URL (`limit`, `offset`) so a link reproduces the page shown.

export type Page = { limit: number; offset: number };

function wholeNumber(text: string | null): number | null {
  if (text === null || !/^\d+$/.test(text)) return null;
  return Number(text);
}

/** The page asked for by `params`, clamped to what the backend accepts (1..maxLimit, offset >= 0). */
export function pageFromParams(params: URLSearchParams, defaultLimit: number, maxLimit: number): Page {
  const limit = wholeNumber(params.get("limit")) ?? defaultLimit;
  return {
    limit: Math.min(Math.max(limit, 1), maxLimit),
    offset: wholeNumber(params.get("offset")) ?? 0,
  };
}

/** `params` moved to `offset`; the first page drops the parameter to keep links short. */
export function paramsAtOffset(params: URLSearchParams, offset: number): URLSearchParams {
  const next = new URLSearchParams(params);
  if (offset > 0) next.set("offset", String(offset));
  else next.delete("offset");
  return next;
}

/** "1–50 of 123" (positions are 1-based), or "none" for an empty result. */
export function describePage({ limit, offset }: Page, shown: number, count: number): string {
  if (shown === 0) return count > 0 ? `none on this page (${count} in all)` : "none";
  return `${offset + 1}–${offset + Math.min(shown, limit)} of ${count}`;
}
