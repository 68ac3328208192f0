// Alerts: what is firing and what fired before; the rules that make alerts; the
// webhook endpoints they are sent to, with each endpoint's deliveries. The tab and
// every filter or selection are in the URL (?tab=rules, ?tab=webhooks&endpoint=3,
// ?state=firing), so any view can be linked to.
import { Link } from "react-router";
import { api } from "../api/client";
import { useIsOperator } from "../lib/auth";
import { useQuery } from "../lib/useQuery";
import { AlertsSection } from "./alerts/AlertsSection";
import { RulesSection } from "./alerts/RulesSection";
import { useUrlState } from "./alerts/urlState";
import { WebhooksSection } from "./alerts/WebhooksSection";
import "./alerts/alerts.css";

const TABS = [
  { id: "alerts", label: "Alerts" },
  { id: "rules", label: "Rules" },
  { id: "webhooks", label: "Webhooks" },
] as const;
type Tab = (typeof TABS)[number]["id"];

function tabOf(value: string | null): Tab {
  return TABS.find((tab) => tab.id === value)?.id ?? "alerts";
}

export function AlertsPage() {
  const [params] = useUrlState();
  const tab = tabOf(params.get("tab"));
  const operator = useIsOperator();
  // Every tab names rules (filters, the rules list, which rules an endpoint gets).
  const rules = useQuery(() => api.GET("/api/alert-rules", { params: { query: { limit: 500 } } }), "alert-rules");
  const ruleList = rules.data?.data ?? [];

  return (
    <>
      <div className="page-header">
        <h1>Alerts</h1>
        {!operator && <span className="muted">Read only: changing rules and endpoints needs an operator token.</span>}
      </div>
      <nav className="alerts-tabs" aria-label="Alerts sections">
        {TABS.map(({ id, label }) => (
          // Each tab drops the other tabs' selections: only `tab` carries over.
          <Link key={id} to={{ search: id === "alerts" ? "" : `?tab=${id}` }} aria-current={tab === id ? "page" : undefined}>
            {label}
          </Link>
        ))}
      </nav>
      {tab === "alerts" && <AlertsSection rules={ruleList} />}
      {tab === "rules" && <RulesSection rules={rules} operator={operator} />}
      {tab === "webhooks" && <WebhooksSection rules={ruleList} operator={operator} />}
    </>
  );
}
