// One labelled row of a `.form-grid` form: the label in the first column; the control,
// its help and the backend's message about it in the second.
import type { ReactElement } from "react";
import { cloneElement } from "react";

export function FormField({
  id,
  label,
  help,
  error,
  children,
}: {
  id: string;
  label: string;
  help?: string;
  error?: string;
  children: ReactElement<{ id?: string; "aria-describedby"?: string; "aria-invalid"?: boolean }>;
}) {
  const helpId = help ? `${id}-help` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  const describedBy = [errorId, helpId].filter(Boolean).join(" ") || undefined;
  return (
    <>
      <label htmlFor={id}>{label}</label>
      <div className="form-control">
        {cloneElement(children, { id, "aria-describedby": describedBy, "aria-invalid": error ? true : undefined })}
        {error && (
          <span id={errorId} className="field-error" data-testid={`${id}-error`}>
            {error}
          </span>
        )}
        {help && (
          <span id={helpId} className="muted field-help">
            {help}
          </span>
        )}
      </div>
    </>
  );
}
