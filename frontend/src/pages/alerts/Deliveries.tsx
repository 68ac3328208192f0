// A webhook endpoint's deliveries, newest first, re-read every 2 s while one is still
// on its way (pending or sending), so a retry's outcome shows up without a reload.
import { useEffect, type ReactNode } from "react";
import { api, type Delivery } from "../../api/client";
import { Empty, QueryState, StatusBadge } from "../../components/ui";
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
  return (
    <QueryState query={deliveries} what="the deliveries">
      {({ data, count }) =>
        data.length === 0 ? (
          <Empty>No deliveries yet.{operator ? " “Send test” sends one now." : ""}</Empty>
        ) : (
          <>
            <div className="table-wrap">
              <table data-testid="deliveries">
                <thead>
                  <tr>
                    <th scope="col">Status</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Event</th>
                    <th scope="col" className="number">
                      Tries
                    </th>
                    <th scope="col" className="number">
                      Last code
                    </th>
                    <th scope="col">Last error</th>
                    <th scope="col">Created</th>
                    <th scope="col">Next try</th>
                    {operator && <th scope="col">Actions</th>}
                  </tr>
                </thead>
                <tbody>
                  {data.map((delivery) => (
                    <DeliveryRow
                      key={delivery.id}
                      delivery={delivery}
                      operator={operator}
                      busy={busy}
                      onRedeliver={onRedeliver}
                    />
                  ))}
                </tbody>
              </table>
            </div>
            {pager(count)}
          </>
        )
      }
    </QueryState>
  );
}

function DeliveryRow({
  delivery,
  operator,
  busy,
  onRedeliver,
}: {
  delivery: Delivery;
  operator: boolean;
  busy: string | null;
  onRedeliver: (delivery: Delivery) => void;
}) {
  return (
    <tr data-testid="delivery-row" data-delivery-id={delivery.id} data-status={delivery.status}>
      <td>
        <StatusBadge status={delivery.status} />
      </td>
      <td>
        {delivery.kind}
        {delivery.redelivery_of !== null && <div className="muted">of delivery {delivery.redelivery_of}</div>}
      </td>
      <td>{delivery.event_status}</td>
      <td className="number">
        <DeliveryTries delivery={delivery} />
      </td>
      <td className="number">{delivery.last_status_code ?? "–"}</td>
      <td className="error">{delivery.last_error ?? ""}</td>
      <td>{formatTime(delivery.created_at)}</td>
      <td>{isUnderWay(delivery) ? formatTime(delivery.next_attempt_at) : "–"}</td>
      {operator && (
        <td>
          <button
            type="button"
            onClick={() => onRedeliver(delivery)}
            disabled={busy !== null}
            aria-label={`Redeliver delivery ${delivery.id}`}
          >
            {busy === `redeliver-${delivery.id}` ? "Sending…" : "Redeliver"}
          </button>
        </td>
      )}
    </tr>
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
