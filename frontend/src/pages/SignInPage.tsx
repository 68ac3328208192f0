// Signing in with a token (as `onceover up` prints them); the token is kept for this
// browser session only.
import { useState, type FormEvent } from "react";
import { HealthPanel } from "../components/HealthPanel";
import { useAuth } from "../lib/auth";

export function SignInPage() {
  const { signIn, notice, sso } = useAuth();
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!token.trim()) {
      setError("Enter a token.");
      return;
    }
    setBusy(true);
    const failure = await signIn(token);
    setBusy(false);
    setError(failure);
  };

  return (
    <main className="sign-in">
      <header>
        <h1>Onceover</h1>
        <p className="tagline">Exactly-once Spark → BigQuery loads you can watch, reconcile and resume.</p>
      </header>
      <section aria-labelledby="sign-in-title">
        <h2 id="sign-in-title">Sign in</h2>
        {notice && <p role="alert">{notice}</p>}
        {sso?.sso && sso.login_path && (
          <p>
            <a
              className="button sso-button"
              href={`${sso.login_path}?next=${encodeURIComponent(window.location.pathname + window.location.search)}`}
            >
              Sign in with {sso.provider}
            </a>
          </p>
        )}
        {sso?.sso && <p className="muted">or with a token:</p>}
        <form onSubmit={submit}>
          <label htmlFor="token">Token</label>
          <input
            id="token"
            name="token"
            type="password"
            autoComplete="off"
            value={token}
            onChange={(event) => setToken(event.target.value)}
            aria-describedby="token-help"
            aria-invalid={error ? true : undefined}
          />
          <p id="token-help" className="muted">
            A viewer or operator token, as <code>onceover up</code> prints them. It is kept until this browser
            session ends.
          </p>
          {error && (
            <p role="alert" className="field-error">
              {error}
            </p>
          )}
          <button type="submit" disabled={busy}>
            {busy ? "Signing in…" : "Sign in"}
          </button>
        </form>
      </section>
      <HealthPanel />
    </main>
  );
}
