// The API client, typed by schema.d.ts (generated from the backend's OpenAPI schema
// by scripts/generate-client.sh; never edited by hand). Every request carries the
// signed-in token; a 401 signs the browser out.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";
import { clearToken, readCsrf, readToken } from "../lib/token";

export const api = createClient<paths>({ baseUrl: "" });

const auth: Middleware = {
  onRequest({ request }) {
    const token = readToken();
    if (token && !request.headers.has("Authorization")) {
      request.headers.set("Authorization", `Bearer ${token}`);
    }
    // Signed in through single sign-on: the cookie goes by itself; writes show the CSRF token.
    const csrf = readCsrf();
    if (!token && csrf && !["GET", "HEAD", "OPTIONS"].includes(request.method)) {
      request.headers.set("X-CSRF-Token", csrf);
    }
    return request;
  },
  onResponse({ response }) {
    // Only a stored token signs out: a token being tried at sign-in is not one yet.
    if (response.status === 401 && readToken()) {
      clearToken("Your token was refused (401): sign in again.");
    } else if (response.status === 401 && readCsrf()) {
      clearToken("Your session has ended: sign in again.");
    }
    return response;
  },
};
api.use(auth);

type Schemas = components["schemas"];
export type Health = Schemas["HealthPublic"];
export type DependencyHealth = Schemas["DependencyHealth"];
export type Principal = Schemas["PrincipalPublic"];
export type AuthConfig = Schemas["AuthConfigPublic"];
export type Run = Schemas["RunPublic"];
export type RunDetail = Schemas["RunDetailPublic"];
export type RunStatus = Run["status"];
export type Attempt = Schemas["AttemptPublic"];
export type Batch = Schemas["BatchPublic"];
export type Stream = Schemas["StreamPublic"];
export type WriteErrors = Schemas["WriteErrorsPublic"];
export type Reconciliation = Schemas["ReconciliationPublic"];
export type Verdict = Schemas["VerdictPublic"];
export type ResumePlan = Schemas["ResumePlanPublic"];
export type PendingIntent = Schemas["PendingIntentPublic"];
export type ResumeAccepted = Schemas["ResumeAcceptedPublic"];
export type RedrivePlan = Schemas["RedrivePlanPublic"];
export type RedriveAccepted = Schemas["RedriveAcceptedPublic"];
export type RunRedrives = Schemas["RunRedrivesPublic"];
export type RunSpec = Schemas["RunSpecPublic"];
export type AttemptLog = Schemas["AttemptLogPublic"];
export type TableTotals = Schemas["TablePublic"];
export type AuditEntry = Schemas["AuditEntryPublic"];
export type Alert = Schemas["AlertPublic"];
export type AlertTransition = Schemas["AlertTransitionPublic"];
export type AlertRule = Schemas["AlertRulePublic"];
export type AlertRuleCreate = Schemas["AlertRuleCreate"];
export type Webhook = Schemas["WebhookPublic"];
export type WebhookCreate = Schemas["WebhookCreate"];
export type WebhookCreated = Schemas["WebhookCreatedPublic"];
export type Delivery = Schemas["DeliveryPublic"];

/** The message of an API error body (`{"detail": "..."}` or FastAPI's 422 list). */
export function errorMessage(error: unknown, fallback = "the request failed"): string {
  if (!error) return fallback;
  if (typeof error === "string") return error;
  if (error instanceof Error) return error.message;
  const detail = (error as { detail?: unknown }).detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d: { loc?: unknown[]; msg?: string }) => {
        const where = (d.loc ?? []).filter((p) => p !== "body").join(".");
        return where ? `${where}: ${d.msg}` : String(d.msg);
      })
      .join("; ");
  }
  return fallback;
}
