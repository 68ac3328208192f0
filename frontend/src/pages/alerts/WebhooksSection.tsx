// Webhook endpoints: the list, a new one (its secret shown once), and the selected
// one's actions and deliveries. The selection (?endpoint=) and the form (?edit=new)
// are in the URL; the secret never is.
import { useState } from "react";
import { Link } from "react-router";
import { api, type AlertRule, type Webhook, type WebhookCreate } from "../../api/client";
import { DataTable, type Column } from "../../components/DataTable";
import { Empty, QueryState, StatusBadge } from "../../components/ui";
import { formatTime } from "../../lib/format";
import { useQuery } from "../../lib/useQuery";
import { formFailure, type FormFailure } from "./apiErrors";
import { EndpointPanel } from "./EndpointPanel";
import { SigningSecretBox, type ShownSecret } from "./SigningSecretBox";
import { intParam, useUrlState, withParams } from "./urlState";
import { WebhookForm } from "./WebhookForm";

export function WebhooksSection({ rules, operator }: { rules: AlertRule[]; operator: boolean }) {
  const [params, change] = useUrlState();
  const creating = operator && params.get("edit") === "new";
  const selectedId = intParam(params, "endpoint", 0);
  const [secret, setSecret] = useState<ShownSecret | null>(null);
  const endpoints = useQuery(() => api.GET("/api/webhooks", { params: { query: { limit: 500 } } }), "webhooks");

  const create = async (body: WebhookCreate): Promise<FormFailure | null> => {
    const { data, error, response } = await api.POST("/api/webhooks", { body });
    if (!data) return formFailure(error, response.status);
    setSecret({ endpointName: data.name, secret: data.secret, why: "created" });
    change({ edit: null, endpoint: data.id, deliveries_offset: null });
    endpoints.reload();
    return null;
  };

  const selected = endpoints.data?.data.find((endpoint) => endpoint.id === selectedId);
  return (
    <>
      {secret && <SigningSecretBox shown={secret} onDismiss={() => setSecret(null)} />}
      {creating && <WebhookForm rules={rules} onSubmit={create} onCancel={() => change({ edit: null })} />}
      <section aria-labelledby="webhooks-title" data-testid="webhooks">
        <div className="section-header">
          <h2 id="webhooks-title">Webhook endpoints</h2>
          {operator && !creating && (
            <button type="button" className="primary" onClick={() => change({ edit: "new" })}>
              New endpoint
            </button>
          )}
        </div>
        <QueryState query={endpoints} what="the webhook endpoints">
          {({ data }) => <EndpointsTable endpoints={data} rules={rules} selectedId={selectedId} params={params} />}
        </QueryState>
      </section>
      {selected && (
        <EndpointPanel
          key={selected.id}
          endpoint={selected}
          operator={operator}
          onChanged={endpoints.reload}
          onRotated={(rotated) => setSecret({ endpointName: rotated.name, secret: rotated.secret, why: "rotated" })}
          onDeleted={() => {
            change({ endpoint: null, deliveries_offset: null });
            endpoints.reload();
          }}
        />
      )}
      {selectedId > 0 && endpoints.data && !selected && (
        <Empty>There is no webhook endpoint {selectedId} (was it deleted?).</Empty>
      )}
    </>
  );
}

function EndpointsTable({
  endpoints,
  rules,
  selectedId,
  params,
}: {
  endpoints: Webhook[];
  rules: AlertRule[];
  selectedId: number;
  params: URLSearchParams;
}) {
  const ruleName = (id: number) => rules.find((rule) => rule.id === id)?.name ?? `rule ${id}`;
  const columns: Column<Webhook>[] = [
    {
      id: "name",
      header: "Name",
      cell: (endpoint) => (
        <Link
          to={`?${withParams(params, { endpoint: endpoint.id, deliveries_offset: null, edit: null })}`}
          aria-current={endpoint.id === selectedId ? "true" : undefined}
        >
          {endpoint.name}
        </Link>
      ),
      sortValue: (endpoint) => endpoint.name,
    },
    { id: "url", header: "URL", cell: (endpoint) => endpoint.url, className: "mono" },
    { id: "format", header: "Format", cell: (endpoint) => endpoint.format },
    {
      id: "sends",
      header: "Sends",
      cell: (endpoint) => (
        <>
          {endpoint.severities.length ? endpoint.severities.join(", ") : "all severities"};{" "}
          {endpoint.rule_ids.length ? endpoint.rule_ids.map(ruleName).join(", ") : "all rules"}
          {endpoint.send_resolved ? "" : "; not resolved"}
        </>
      ),
    },
    {
      id: "state",
      header: "State",
      cell: (endpoint) => (
        <>
          <StatusBadge status={endpoint.enabled ? "ok" : "inactive"} label={endpoint.enabled ? "enabled" : "disabled"} />
          {endpoint.disabled_reason && <div className="muted">{endpoint.disabled_reason}</div>}
        </>
      ),
    },
    { id: "secret", header: "Secret", cell: (endpoint) => endpoint.secret_hint, className: "mono" },
    {
      id: "created",
      header: "Created",
      cell: (endpoint) => formatTime(endpoint.created_at),
      sortValue: (endpoint) => endpoint.created_at,
    },
  ];
  return (
    <DataTable
      label="Webhook endpoints"
      columns={columns}
      rows={endpoints}
      rowKey={(endpoint) => endpoint.id}
      rowAttributes={(endpoint) => ({
        "data-testid": "webhook-row",
        className: endpoint.id === selectedId ? "selected" : undefined,
      })}
      empty="No webhook endpoints yet: alerts are shown here but sent nowhere."
    />
  );
}
