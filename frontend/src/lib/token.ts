// The bearer token, kept for the browser session only (sessionStorage: closing the
// browser signs out; another tab signs in on its own).
const KEY = "onceover.token";
type Listener = (reason: string | null) => void;
const listeners = new Set<Listener>();

export function readToken(): string | null {
  return window.sessionStorage.getItem(KEY);
}

export function storeToken(token: string): void {
  window.sessionStorage.setItem(KEY, token);
}

/** Forget the token and tell the app why (null: the user signed out). */
export function clearToken(reason: string | null = null): void {
  window.sessionStorage.removeItem(KEY);
  for (const listener of listeners) listener(reason);
}

export function onTokenCleared(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

// A single sign-on session lives in an HttpOnly cookie the page cannot read; its writes
// carry the session's CSRF token (GET /api/session gives it), kept here in memory only.
let csrf: string | null = null;

export function readCsrf(): string | null {
  return csrf;
}

export function storeCsrf(token: string | null): void {
  csrf = token;
}
