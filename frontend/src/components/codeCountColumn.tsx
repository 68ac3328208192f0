// The count of append requests BigQuery answered with a retry code, as every table of
// counts shows it: the code's name as the header, the count right-aligned.
import { formatCount } from "../lib/format";
import type { Column } from "./DataTable";
import { CodeName } from "./ui";

export type RetryCode = "ALREADY_EXISTS" | "OUT_OF_RANGE";

/** `more` adds to the column or overrides it (a header's title, a test id, a sort key). */
export function codeCountColumn<T>(
  code: RetryCode,
  count: (row: T) => number | null | undefined,
  more: Partial<Column<T>> = {},
): Column<T> {
  return {
    id: code,
    header: <CodeName code={code} />,
    headerClassName: "code",
    cell: (row) => formatCount(count(row)),
    align: "end",
    ...more,
  };
}
