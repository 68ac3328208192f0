// A webhook endpoint's deliveries, newest first, re-read every 2 s while one is still
// on its way (pending or sending), so a retry's outcome shows up without a reload.
import { useEffect, type ReactNode } from "react";
import { api, type Delivery } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { QueryState, StatusBadge } from "../../components/ui";
import { formatDuration, formatTime } from "../../lib/format";
import { useQuery, type Query } from "../../lib/useQuery";

const POLL_MS = 2000;

export type DeliveriesQuery = Query<{ data: Delivery[]; count: number }>;

export function isUnderWay(delivery: Delivery): boolean {
  return delivery.status === "pending" || delivery.status === "sending";
}

export function useDeliveries(endpointId: number, offset: number, limit: number): DeliveriesQuery {
  const deliveries = useQuery(
    () =>
      api.GET("/api/webhooks/{endpoint_id}/deliveries", {
        params: { path: { endpoint_id: endpointId }, query: { limit, offset } },
      }),
    `deliveries:${endpointId}:${offset}:${limit}`,
  );
  const { data, reload } = deliveries;
  const underWay = data?.data.some(isUnderWay) ?? false;
  useEffect(() => {
    if (!underWay) return;
    const timer = window.setTimeout(reload, POLL_MS);
    return () => window.clearTimeout(timer);
  }, [data, underWay, reload]);
  return deliveries;
}

export function DeliveriesTable({
  deliveries,
  operator,
  busy,
  onRedeliver,
  pager,
}: {
  deliveries: DeliveriesQuery;
  operator: boolean;
  busy: string | null;
  onRedeliver: (delivery: Delivery) => void;
  pager: (count: number) => ReactNode;
}) {
  const columns: Array<Column<Delivery> | false> = [
    { id: "status", header: "Status", cell: (delivery) => <StatusBadge status={delivery.status} /> },
    {
      id: "kind",
      header: "Kind",
      cell: (delivery) => (
        <>
          {delivery.kind}
          {delivery.redelivery_of !== null && <div className="muted">of delivery {delivery.redelivery_of}</div>}
        </>
      ),
    },
    { id: "event", header: "Event", cell: (delivery) => delivery.event_status },
    { id: "tries", header: "Tries", cell: (delivery) => <DeliveryTries delivery={delivery} />, align: "end" },
    { id: "last-code", header: "Last code", cell: (delivery) => delivery.last_status_code ?? "–", align: "end" },
    { id: "last-error", header: "Last error", cell: (delivery) => delivery.last_error ?? "", className: "error" },
    { id: "created", header: "Created", cell: (delivery) => formatTime(delivery.created_at) },
    {
      id: "next-try",
      header: "Next try",
      cell: (delivery) => (isUnderWay(delivery) ? formatTime(delivery.next_attempt_at) : "–"),
    },
    operator && {
      id: "actions",
      header: "Actions",
      cell: (delivery) => (
        <button
          type="button"
          onClick={() => onRedeliver(delivery)}
          disabled={busy !== null}
          aria-label={`Redeliver delivery ${delivery.id}`}
        >
          {busy === `redeliver-${delivery.id}` ? "Sending…" : "Redeliver"}
        </button>
      ),
    },
  ];
  return (
    <QueryState query={deliveries} what="the deliveries">
      {({ data, count }) => (
        <>
          <DataTable
            label="Deliveries"
            testId="deliveries"
            columns={columns}
            rows={data}
            rowKey={(delivery) => delivery.id}
            rowAttributes={(delivery) => ({
              "data-testid": "delivery-row",
              "data-delivery-id": delivery.id,
              "data-status": delivery.status,
            })}
            empty={`No deliveries yet.${operator ? " “Send test” sends one now." : ""}`}
          />
          {data.length > 0 && pager(count)}
        </>
      )}
    </QueryState>
  );
}

/** The number of tries; each try's code, latency and error on demand. */
function DeliveryTries({ delivery }: { delivery: Delivery }) {
  if (delivery.attempts.length === 0) return <>0</>;
  return (
    <details className="tries">
      <summary data-testid="delivery-attempts">{delivery.attempts.length}</summary>
      <ol>
        {delivery.attempts.map((attempt) => (
          <li key={attempt.number}>
            {formatTime(attempt.started_at)}: {attempt.status_code ?? "no answer"} in{" "}
            {formatDuration(attempt.latency_ms)}
            {attempt.error && <span className="field-error"> — {attempt.error}</span>}
            {attempt.retry_after_s !== null && <span className="muted"> (Retry-After {attempt.retry_after_s} s)</span>}
          </li>
        ))}
      </ol>
    </details>
  );
}
