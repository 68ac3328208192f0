// Who is signed in: the token's principal (GET /api/session) and what it may do.
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react";
import { api, errorMessage, type AuthConfig, type Principal } from "../api/client";
import { clearToken, onTokenCleared, readCsrf, readToken, storeCsrf, storeToken } from "./token";

type AuthState = {
  principal: Principal | null;
  checking: boolean;
  notice: string | null;
  signIn: (token: string) => Promise<string | null>;
  signOut: () => void;
  sso: AuthConfig | null;
};

const AuthContext = createContext<AuthState | null>(null);

async function whoIs(token: string): Promise<Principal | string> {
  const { data, error, response } = await api.GET("/api/session", {
    headers: { Authorization: `Bearer ${token}` },
  });
  if (data) return data;
  if (response.status === 401) return "That token is not valid.";
  return errorMessage(error, `the backend answered ${response.status}`);
}

async function signedInSession(): Promise<Principal | null> {
  const { data } = await api.GET("/api/session");
  return data && data.signed_in_with === "sso" ? data : null;
}

export function AuthProvider({ children }: { children: ReactNode }) {
  const [principal, setPrincipal] = useState<Principal | null>(null);
  const [checking, setChecking] = useState(true);
  const [notice, setNotice] = useState<string | null>(null);
  const [sso, setSso] = useState<AuthConfig | null>(null);

  useEffect(() => {
    const stored = readToken();
    if (stored) {
      void whoIs(stored).then((who) => {
        if (typeof who === "string") clearToken(who);
        else setPrincipal(who);
        setChecking(false);
      });
    } else {
      // No token: a single sign-on session's cookie, if the browser holds one.
      void signedInSession().then((who) => {
        if (who) {
          storeCsrf(who.csrf_token ?? null);
          setPrincipal(who);
        }
        setChecking(false);
      });
    }
    void api.GET("/auth/config").then(({ data }) => setSso(data ?? null));
    return onTokenCleared((reason) => {
      storeCsrf(null);
      setPrincipal(null);
      setNotice(reason);
    });
  }, []);

  const signIn = useCallback(async (token: string) => {
    const who = await whoIs(token.trim());
    if (typeof who === "string") return who;
    storeToken(token.trim());
    setNotice(null);
    setPrincipal(who);
    return null;
  }, []);

  const signOut = useCallback(() => {
    if (readToken() === null && readCsrf() !== null) {
      // The session ends on the server: the cookie alone would open it again.
      void api.POST("/auth/logout").then(() => clearToken(null));
      return;
    }
    clearToken(null);
  }, []);

  return (
    <AuthContext.Provider value={{ principal, checking, notice, signIn, signOut, sso }}>
      {children}
    </AuthContext.Provider>
  );
}

export function useAuth(): AuthState {
  const state = useContext(AuthContext);
  if (!state) throw new Error("useAuth outside AuthProvider");
  return state;
}

/** True when the signed-in token may use operator actions (resume, reconcile, edit). */
export function useIsOperator(): boolean {
  return useAuth().principal?.may.includes("operator") ?? false;
}
