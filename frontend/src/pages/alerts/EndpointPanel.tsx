// One webhook endpoint: what an operator can do to it (send a test, enable or disable,
// rotate its secret, delete it) and its deliveries.
import { useState } from "react";
import { api, errorMessage, type Delivery, type Webhook, type WebhookCreated } from "../../api/client";
import { ConfirmDialog } from "../../components/ConfirmDialog";
import { HistoryPager } from "../../components/HistoryPager";
import { ErrorNote } from "../../components/ui";
import { formatTime } from "../../lib/format";
import { DeliveriesTable, isUnderWay, useDeliveries } from "./Deliveries";
import { intParam, useUrlState } from "./urlState";

const DELIVERIES_LIMIT = 25;

/** How a delivery's first try went, in a sentence. */
export function deliveryOutcome(delivery: Delivery): string {
  // The error names the status code when there was one ("HTTP 500"); else the code does.
  const code = delivery.last_status_code ? `HTTP ${delivery.last_status_code}` : null;
  const detail = delivery.last_error ?? code;
  const outcome = detail ? `${delivery.status} (${detail})` : delivery.status;
  return delivery.next_attempt_at && isUnderWay(delivery)
    ? `${outcome}; tried again from ${formatTime(delivery.next_attempt_at)}`
    : outcome;
}

export function EndpointPanel({
  endpoint,
  operator,
  onChanged,
  onRotated,
  onDeleted,
}: {
  endpoint: Webhook;
  operator: boolean;
  onChanged: () => void;
  onRotated: (rotated: WebhookCreated) => void;
  onDeleted: () => void;
}) {
  const [params, change] = useUrlState();
  const offset = intParam(params, "deliveries_offset", 0);
  const deliveries = useDeliveries(endpoint.id, offset, DELIVERIES_LIMIT);
  const [notice, setNotice] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<"delete" | "rotate" | null>(null);

  /** Runs one action, shows what came of it, and re-reads what it changed. */
  const run = async (what: string, action: () => Promise<string>) => {
    setBusy(what);
    setFailure(null);
    try {
      setNotice(await action());
    } catch (exc) {
      setNotice(null);
      setFailure(errorMessage(exc));
    } finally {
      setBusy(null);
      deliveries.reload();
      onChanged(); // a 410 answer disables the endpoint
    }
  };

  const sendTest = () =>
    run("test", async () => {
      const { data, error, response } = await api.POST("/api/webhooks/{endpoint_id}/test", {
        params: { path: { endpoint_id: endpoint.id } },
      });
      if (!data) throw new Error(errorMessage(error, `the backend answered ${response.status}`));
      change({ deliveries_offset: null }); // the newest delivery is on the first page
      return `Test sent to “${endpoint.name}”: ${deliveryOutcome(data)}.`;
    });

  const setEnabled = (enabled: boolean) =>
    run("enable", async () => {
      const { data, error, response } = await api.PATCH("/api/webhooks/{endpoint_id}", {
        params: { path: { endpoint_id: endpoint.id } },
        body: { enabled },
      });
      if (!data) throw new Error(errorMessage(error, `the backend answered ${response.status}`));
      return `“${data.name}” ${data.enabled ? "enabled" : "disabled"}.`;
    });

  const redeliver = (delivery: Delivery) =>
    run(`redeliver-${delivery.id}`, async () => {
      const { data, error, response } = await api.POST(
        "/api/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver",
        { params: { path: { endpoint_id: endpoint.id, delivery_id: delivery.id } } },
      );
      if (!data) throw new Error(errorMessage(error, `the backend answered ${response.status}`));
      change({ deliveries_offset: null });
      return `Delivery ${delivery.id} sent again as delivery ${data.id}: ${deliveryOutcome(data)}.`;
    });

  const rotate = async () => {
    const { data, error, response } = await api.POST("/api/webhooks/{endpoint_id}/rotate-secret", {
      params: { path: { endpoint_id: endpoint.id } },
    });
    if (!data) return errorMessage(error, `the backend answered ${response.status}`);
    setConfirming(null);
    onRotated(data);
    onChanged();
    return null;
  };

  const remove = async () => {
    const { error, response } = await api.DELETE("/api/webhooks/{endpoint_id}", {
      params: { path: { endpoint_id: endpoint.id } },
    });
    if (!response.ok) return errorMessage(error, `the backend answered ${response.status}`);
    setConfirming(null);
    onDeleted();
    return null;
  };

  return (
    <section aria-labelledby="endpoint-title" data-testid="endpoint-panel">
      <div className="section-header">
        <h2 id="endpoint-title">Deliveries to “{endpoint.name}”</h2>
        {operator && (
          <div className="actions">
            <button type="button" className="primary" onClick={sendTest} disabled={busy !== null}>
              {busy === "test" ? "Sending…" : "Send test"}
            </button>
            <button type="button" onClick={() => setEnabled(!endpoint.enabled)} disabled={busy !== null}>
              {endpoint.enabled ? "Disable" : "Enable"}
            </button>
            <button type="button" onClick={() => setConfirming("rotate")} disabled={busy !== null}>
              Rotate secret
            </button>
            <button type="button" className="danger" onClick={() => setConfirming("delete")} disabled={busy !== null}>
              Delete endpoint
            </button>
          </div>
        )}
      </div>
      <p className="muted mono">{endpoint.url}</p>
      {notice && (
        <p role="status" className="notice" data-testid="endpoint-notice">
          {notice}
        </p>
      )}
      {failure && <ErrorNote message={failure} />}
      <DeliveriesTable
        deliveries={deliveries}
        operator={operator}
        busy={busy}
        onRedeliver={redeliver}
        pager={(count) => (
          <HistoryPager
            label="Delivery pages"
            offset={offset}
            limit={DELIVERIES_LIMIT}
            count={count}
            onOffset={(o) => change({ deliveries_offset: o })}
          />
        )}
      />
      {confirming === "rotate" && (
        <ConfirmDialog
          title="Rotate this endpoint's secret?"
          confirmLabel="Rotate secret"
          busyLabel="Rotating…"
          act={rotate}
          onClose={() => setConfirming(null)}
        >
          <p>
            Deliveries to <strong>{endpoint.name}</strong> are signed with a new secret from now on; a receiver still
            checking with the old one will refuse them until it has the new one. The new secret is shown once.
          </p>
        </ConfirmDialog>
      )}
      {confirming === "delete" && (
        <ConfirmDialog
          title="Delete this endpoint?"
          confirmLabel="Delete endpoint"
          busyLabel="Deleting…"
          act={remove}
          onClose={() => setConfirming(null)}
        >
          <p>
            Nothing more is sent to <strong>{endpoint.name}</strong>. Its deliveries stay in the audit trail.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
