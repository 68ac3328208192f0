// A secret in the one answer that holds it, with a button to copy it and one to say it
// is stored. The caller keeps it in memory only (never in the URL or storage) and drops
// it on dismissal, so it is gone for good once dismissed.
import { useId, useState, type ReactNode } from "react";

export function SecretBox({
  title,
  secret,
  secretTestId,
  onDismiss,
  children,
}: {
  title: ReactNode;
  secret: string;
  secretTestId?: string;
  onDismiss: () => void;
  /** What the secret is for and why it must be copied now. */
  children: ReactNode;
}) {
  const titleId = useId();
  const [copied, setCopied] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied.");
    } catch {
      setCopied("The browser refused to copy: select the secret and copy it by hand.");
    }
  };
  return (
    <section className="secret-box" role="region" aria-labelledby={titleId} data-testid="secret-box">
      <h2 id={titleId}>{title}</h2>
      <p>{children}</p>
      <code className="secret" data-testid={secretTestId}>
        {secret}
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
