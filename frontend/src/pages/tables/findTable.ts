// One table's totals: the table list, filtered to that table.
import { api, type TableTotals } from "../../api/client";

/** `data` is null when no run ever loaded the table (useQuery reads undefined as a failure). */
export async function findTableTotals(
  table: string,
): Promise<{ data?: TableTotals | null; error?: unknown; response: Response }> {
  const { data, error, response } = await api.GET("/api/tables", { params: { query: { table, limit: 1 } } });
  if (!data) return { error, response };
  return { data: data.data[0] ?? null, response };
}
