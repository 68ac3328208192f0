// A webhook endpoint's signing secret, shown once: when the endpoint is created and when
// its secret is rotated.
import { SecretBox } from "../../components/SecretBox";

export type ShownSecret = { endpointName: string; secret: string; why: "created" | "rotated" };

export function SigningSecretBox({ shown, onDismiss }: { shown: ShownSecret; onDismiss: () => void }) {
  const title = shown.why === "created" ? "Signing secret of the new endpoint" : "New signing secret";
  return (
    <SecretBox title={`${title} “${shown.endpointName}”`} secret={shown.secret} secretTestId="webhook-secret" onDismiss={onDismiss}>
      <strong>Shown once, copy it now:</strong> the backend never shows it again. Your receiver verifies every
      request's <code>webhook-signature</code> with it
      {shown.why === "rotated" ? "; deliveries from now on are signed with this one, not the old one" : ""}.
    </SecretBox>
  );
}
