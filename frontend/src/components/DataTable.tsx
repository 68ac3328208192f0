// Every table of the dashboard. A page declares its columns once (header, cell, and
// optionally a sort key and an alignment); the markup, sorting, the empty state and
// rows that open a page are decided here, so every table behaves the same.
import { Fragment, useState, type KeyboardEvent, type MouseEvent, type ReactNode, type Ref } from "react";
import { useNavigate } from "react-router";
import { Empty } from "./ui";

/** What a column sorts by; missing values sort last whichever the direction. */
export type SortValue = string | number | null | undefined;

/** `data-*` attributes: what tests and styles find a row or cell by. */
export type DataAttributes = { [name: `data-${string}`]: string | number | undefined };
export type CellAttributes = DataAttributes & { className?: string; title?: string };
export type RowAttributes = DataAttributes & { className?: string; title?: string };

export interface Column<T> {
  /** Tells the column apart (its React key; what a sort is on). */
  id: string;
  header: ReactNode;
  /** The header's hover text: what a terse header means. */
  headerTitle?: string;
  /** Classes of the header cell only ("code" for an error code's name). */
  headerClassName?: string;
  cell: (row: T) => ReactNode;
  /** Classes of every cell of the column ("mono", "error", ...). */
  className?: string;
  /** Attributes a cell takes from its row: a test id, a title. */
  cellAttributes?: (row: T) => CellAttributes;
  /** "end" for figures: header and cells right-aligned, digits in columns. */
  align?: "start" | "end";
  /** The value the header's button sorts the rows by; without it the column does not sort. */
  sortValue?: (row: T) => SortValue;
  /** The cell that names its row (`<th scope="row">`). */
  rowHeader?: boolean;
}

/** A row shown under its row across every column (a receipt, a log). */
export interface RowDetail {
  content: ReactNode;
  id?: string;
  testId?: string;
}

/** A table says what it is: a caption shown (or visually hidden by its class), or a label. */
type TableName = { caption: ReactNode; captionClassName?: string; label?: never } | { label: string; caption?: never };

export type DataTableProps<T> = TableName & {
  /** A column left out (`false`, `null`) is not shown: columns that only some data needs. */
  columns: ReadonlyArray<Column<T> | false | null | undefined>;
  /** In the order they are shown until the reader sorts. */
  rows: readonly T[];
  /** Unique and stable per row, so a row keeps its state when the rows change or reorder. */
  rowKey: (row: T) => string | number;
  rowAttributes?: (row: T) => RowAttributes;
  /** Where a row leads: the row opens it on a click, and is a Tab stop that opens it on Enter. */
  rowLink?: (row: T) => string;
  detail?: (row: T) => RowDetail | null;
  /** Shown instead of the table when there are no rows; without it the table shows its headers. */
  empty?: ReactNode;
  testId?: string;
  className?: string;
  ref?: Ref<HTMLTableElement>;
};

type Direction = "ascending" | "descending";
type Sort = { column: string; direction: Direction };

/** Unsorted, then ascending, then descending, then back to the order the rows came in. */
function nextSort(sort: Sort | null, column: string): Sort | null {
  if (sort?.column !== column) return { column, direction: "ascending" };
  return sort.direction === "ascending" ? { column, direction: "descending" } : null;
}

function compare(a: SortValue, b: SortValue): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** `rows` sorted by `value`, stably (ties keep their order), missing values last. */
export function sortRows<T>(rows: readonly T[], value: (row: T) => SortValue, direction: Direction): T[] {
  const sign = direction === "ascending" ? 1 : -1;
  return rows
    .map((row, index) => ({ row, index, value: value(row) }))
    .sort((x, y) => {
      const xMissing = x.value === null || x.value === undefined;
      const yMissing = y.value === null || y.value === undefined;
      if (xMissing || yMissing) return Number(xMissing) - Number(yMissing) || x.index - y.index;
      return sign * compare(x.value, y.value) || x.index - y.index;
    })
    .map(({ row }) => row);
}

function classes(...names: Array<string | false | undefined>): string | undefined {
  return names.filter(Boolean).join(" ") || undefined;
}

export function DataTable<T>(props: DataTableProps<T>) {
  const { rows, rowKey, rowAttributes, rowLink, detail, empty, testId, className, ref } = props;
  const columns = props.columns.filter((column): column is Column<T> => Boolean(column));
  const [sort, setSort] = useState<Sort | null>(null);
  if (rows.length === 0 && empty !== undefined) return <Empty>{empty}</Empty>;

  const sortedBy = sort ? columns.find((column) => column.id === sort.column && column.sortValue) : undefined;
  const shown = sort && sortedBy?.sortValue ? sortRows(rows, sortedBy.sortValue, sort.direction) : rows;
  return (
    <div className="table-wrap">
      <table ref={ref} className={className} data-testid={testId} aria-label={props.label}>
        {props.caption !== undefined && <caption className={props.captionClassName}>{props.caption}</caption>}
        <thead>
          <tr>
            {columns.map((column) => (
              <HeaderCell
                key={column.id}
                column={column}
                direction={sortedBy === column ? sort?.direction : undefined}
                onSort={() => setSort(nextSort(sortedBy ? sort : null, column.id))}
              />
            ))}
          </tr>
        </thead>
        <tbody>
          {shown.map((row) => {
            const more = detail?.(row) ?? null;
            const cells = columns.map((column) => <BodyCell key={column.id} column={column} row={row} />);
            const attributes = rowAttributes?.(row) ?? {};
            return (
              <Fragment key={rowKey(row)}>
                {rowLink ? (
                  <LinkedRow to={rowLink(row)} attributes={attributes}>
                    {cells}
                  </LinkedRow>
                ) : (
                  <tr {...attributes}>{cells}</tr>
                )}
                {more && (
                  <tr id={more.id} data-testid={more.testId}>
                    <td colSpan={columns.length}>{more.content}</td>
                  </tr>
                )}
              </Fragment>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function HeaderCell<T>({
  column,
  direction,
  onSort,
}: {
  column: Column<T>;
  direction: Direction | undefined;
  onSort: () => void;
}) {
  const className = classes(column.align === "end" && "number", column.headerClassName);
  if (!column.sortValue) {
    return (
      <th scope="col" className={className} title={column.headerTitle}>
        {column.header}
      </th>
    );
  }
  // Enter and Space are handled here, not left to the button, so that a key press sorts
  // once and the same in every browser (and in jsdom, which does not turn keys into clicks).
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key !== "Enter" && event.key !== " ") return;
    event.preventDefault();
    onSort();
  };
  return (
    <th scope="col" className={className} title={column.headerTitle} aria-sort={direction}>
      <button type="button" className="sort-button" onClick={onSort} onKeyDown={onKeyDown}>
        {column.header}
        {direction && (
          <span className="sort-mark" aria-hidden="true">
            {direction === "ascending" ? "▲" : "▼"}
          </span>
        )}
      </button>
    </th>
  );
}

function BodyCell<T>({ column, row }: { column: Column<T>; row: T }) {
  const attributes = column.cellAttributes?.(row) ?? {};
  const className = classes(column.align === "end" && "number", column.className, attributes.className);
  const content = column.cell(row);
  if (column.rowHeader) {
    return (
      <th scope="row" {...attributes} className={className}>
        {content}
      </th>
    );
  }
  return (
    <td {...attributes} className={className}>
      {content}
    </td>
  );
}

/** What a click inside a linked row does itself (follow a link, press a button). */
const CONTROLS = "a, button, input, select, textarea, summary, label";

function LinkedRow({ to, attributes, children }: { to: string; attributes: RowAttributes; children: ReactNode }) {
  const navigate = useNavigate();
  const onClick = (event: MouseEvent<HTMLTableRowElement>) => {
    const control = (event.target as Element).closest(CONTROLS);
    if (control && event.currentTarget.contains(control)) return;
    navigate(to);
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTableRowElement>) => {
    // Only the row's own Enter: a link or button in it answers its own.
    if (event.key !== "Enter" || event.target !== event.currentTarget) return;
    event.preventDefault();
    navigate(to);
  };
  return (
    <tr
      {...attributes}
      className={classes("clickable", attributes.className)}
      tabIndex={0}
      onClick={onClick}
      onKeyDown={onKeyDown}
    >
      {children}
    </tr>
  );
}
