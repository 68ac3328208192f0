// Webhook endpoints: the list, a new one (its secret shown once), and the selected
// one's actions and deliveries. The selection (?endpoint=) and the form (?edit=new)
// are in the URL; the secret never is.
import { useState } from "react";
import { Link } from "react-router";
import { api, type AlertRule, type Webhook, type WebhookCreate } from "../../api/client";
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
          {({ data }) =>
            data.length === 0 ? (
              <Empty>No webhook endpoints yet: alerts are shown here but sent nowhere.</Empty>
            ) : (
              <EndpointsTable endpoints={data} rules={rules} selectedId={selectedId} params={params} />
            )
          }
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
  return (
    <div className="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">URL</th>
            <th scope="col">Format</th>
            <th scope="col">Sends</th>
            <th scope="col">State</th>
            <th scope="col">Secret</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {endpoints.map((endpoint) => {
            const selected = endpoint.id === selectedId;
            const to = `?${withParams(params, { endpoint: endpoint.id, deliveries_offset: null, edit: null })}`;
            return (
              <tr key={endpoint.id} className={selected ? "selected" : undefined} data-testid="webhook-row">
                <td>
                  <Link to={to} aria-current={selected ? "true" : undefined}>
                    {endpoint.name}
                  </Link>
                </td>
                <td className="mono">{endpoint.url}</td>
                <td>{endpoint.format}</td>
                <td>
                  {endpoint.severities.length ? endpoint.severities.join(", ") : "all severities"};{" "}
                  {endpoint.rule_ids.length ? endpoint.rule_ids.map(ruleName).join(", ") : "all rules"}
                  {endpoint.send_resolved ? "" : "; not resolved"}
                </td>
                <td>
                  <StatusBadge
                    status={endpoint.enabled ? "ok" : "inactive"}
                    label={endpoint.enabled ? "enabled" : "disabled"}
                  />
                  {endpoint.disabled_reason && <div className="muted">{endpoint.disabled_reason}</div>}
                </td>
                <td className="mono">{endpoint.secret_hint}</td>
                <td>{formatTime(endpoint.created_at)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
