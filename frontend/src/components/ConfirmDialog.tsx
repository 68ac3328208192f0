// "Are you sure?" before something that cannot be undone (a delete, a secret rotation).
// It is open while mounted: mount it to ask and unmount it to close, so each question
// starts without the last one's error.
import { useState, type ReactNode } from "react";
import { Dialog } from "./Dialog";
import { ErrorNote } from "./ui";

export function ConfirmDialog({
  title,
  confirmLabel,
  busyLabel,
  children,
  act,
  onClose,
}: {
  title: string;
  confirmLabel: string;
  busyLabel: string;
  children: ReactNode;
  /** Does it; resolves to an error message, or null when done (the caller closes). */
  act: () => Promise<string | null>;
  onClose: () => void;
}) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const confirm = async () => {
    setBusy(true);
    const failure = await act();
    setBusy(false);
    setError(failure);
  };
  return (
    <Dialog open title={title} onClose={onClose}>
      {children}
      {error && <ErrorNote message={error} />}
      <div className="actions">
        <button type="button" className="danger" onClick={confirm} disabled={busy}>
          {busy ? busyLabel : confirmLabel}
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}
