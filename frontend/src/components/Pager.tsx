// Previous / next over a paged list whose limit and offset live in the URL.
import { useSearchParams } from "react-router";
import { describePage, paramsAtOffset, type Page } from "../lib/paging";

export function Pager({ page, shown, count, label }: { page: Page; shown: number; count: number; label: string }) {
  const [params, setParams] = useSearchParams();
  const { limit, offset } = page;
  const go = (to: number) => setParams(paramsAtOffset(params, Math.max(0, to)));
  return (
    <nav className="pager" aria-label={`${label} pages`}>
      <button type="button" onClick={() => go(offset - limit)} disabled={offset === 0}>
        Previous
      </button>
      <span data-testid="pager-position" aria-live="polite">
        {describePage(page, shown, count)}
      </span>
      <button type="button" onClick={() => go(offset + limit)} disabled={offset + limit >= count}>
        Next
      </button>
    </nav>
  );
}
