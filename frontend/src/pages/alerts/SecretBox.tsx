// A webhook endpoint's signing secret, in the one answer that holds it. It is kept in
// memory only (never in the URL or storage) and gone once dismissed.
import { useState } from "react";

export type ShownSecret = { endpointName: string; secret: string; why: "created" | "rotated" };

export function SecretBox({ shown, onDismiss }: { shown: ShownSecret; onDismiss: () => void }) {
  const [copied, setCopied] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(shown.secret);
      setCopied("Copied.");
    } catch {
      setCopied("The browser refused to copy: select the secret and copy it by hand.");
    }
  };
  return (
    <section className="secret-box" role="region" aria-labelledby="secret-title" data-testid="secret-box">
      <h2 id="secret-title">
        {shown.why === "created" ? "Signing secret of the new endpoint" : "New signing secret"} “{shown.endpointName}”
      </h2>
      <p>
        <strong>Shown once, copy it now:</strong> the backend never shows it again. Your receiver verifies every
        request's <code>webhook-signature</code> with it
        {shown.why === "rotated" ? "; deliveries from now on are signed with this one, not the old one" : ""}.
      </p>
      <code className="secret" data-testid="webhook-secret">
        {shown.secret}
      </code>
      <div className="actions">
        <button type="button" onClick={copy}>
          Copy secret
        </button>
        <button type="button" onClick={onDismiss}>
          I have stored it
        </button>
        {copied && (
          <span role="status" className="muted">
            {copied}
          </span>
        )}
      </div>
    </section>
  );
}
