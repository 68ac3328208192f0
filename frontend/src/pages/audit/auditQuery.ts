// The audit log's filters and page, all read from the URL so a link reproduces the view.
import { api, errorMessage } from "../../api/client";
import { rangeFromParams } from "../../lib/timeRange";
import { pageFromParams } from "../../lib/paging";

export const AUDIT_PAGE = { defaultLimit: 100, maxLimit: 1000 };

/** Every URL parameter the audit view reads: a change to any of them is another query. */
const AUDIT_PARAMS = ["actor", "action", "range", "since", "until", "limit", "offset"];

export function auditQueryKey(params: URLSearchParams): string {
  return AUDIT_PARAMS.map((name) => `${name}=${params.get(name) ?? ""}`).join("&");
}

/** A filter's value from the URL; blank means no filter. */
export function filterValue(params: URLSearchParams, name: "actor" | "action"): string | undefined {
  const value = params.get(name)?.trim();
  return value ? value : undefined;
}

/**
 * GET /api/audit for the view the URL describes. The time range is worked out when the
 * request is made, so "last hour" means the hour before each (re)load.
 */
export async function loadAudit(params: URLSearchParams) {
  const { since, until } = rangeFromParams(params);
  const answer = await api.GET("/api/audit", {
    params: {
      query: {
        actor: filterValue(params, "actor"),
        action: filterValue(params, "action"),
        since,
        until,
        ...pageFromParams(params, AUDIT_PAGE.defaultLimit, AUDIT_PAGE.maxLimit),
      },
    },
  });
  if (answer.response.status === 403) {
    return { ...answer, error: { detail: forbiddenMessage(answer.error) } };
  }
  return answer;
}

function forbiddenMessage(error: unknown): string {
  const reason = errorMessage(error, "");
  return `The audit log is for operators only; your token may not read it${reason ? ` (${reason})` : ""}.`;
}

/** The API's mutating operations, as the log names them: suggestions for the action filter. */
export const KNOWN_ACTIONS = [
  "createAlertRule",
  "createWebhook",
  "deleteAlertRule",
  "deleteWebhook",
  "ingestEvents",
  "reconcileRun",
  "reconcileTable",
  "redeliverWebhook",
  "replaceAlertRule",
  "resumeRun",
  "rotateWebhookSecret",
  "sendWebhookTest",
  "updateWebhook",
];
