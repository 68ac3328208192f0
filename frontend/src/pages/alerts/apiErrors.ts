// A failed change, split for a form: messages naming a field go next to it, the rest
// above the form. The backend answers FastAPI's 422 list (`loc` like ["body",
// "params", "threshold"], or ["body", "params.threshold"] from its own checks) or a
// `{"detail": "..."}` string.
import { errorMessage } from "../../api/client";
import type { FieldErrors } from "./ruleForm";

type Located = { loc?: unknown[]; msg?: string };

export type FormFailure = { fields: FieldErrors; general: string | null };

export function formFailure(error: unknown, status: number): FormFailure {
  const detail = (error as { detail?: unknown } | null | undefined)?.detail;
  if (!Array.isArray(detail)) {
    return { fields: {}, general: errorMessage(error, `the backend answered ${status}`) };
  }
  const fields: FieldErrors = {};
  for (const item of detail as Located[]) {
    const path = (item.loc ?? []).filter((part) => part !== "body").join(".");
    if (path && !(path in fields)) fields[path] = String(item.msg ?? "invalid");
  }
  // The whole list also goes above the form: a field the form does not show is then
  // still named where a reader sees it.
  return { fields, general: errorMessage({ detail }, `the backend answered ${status}`) };
}
