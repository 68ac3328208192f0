// Tables: `/tables` lists every table runs have loaded; `/tables/:table` is one of them.
import { useParams } from "react-router";
import { TableDetail } from "./tables/TableDetail";
import { TableList } from "./tables/TableList";
import "./tables/tables.css";

export function TablesPage() {
  const { table } = useParams();
  // Keyed by the table so a check's answer or a typed key never carries over to another.
  return table ? <TableDetail key={table} table={table} /> : <TableList />;
}
