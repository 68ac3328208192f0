// Who is signed in: the token's principal (GET /api/session) and what it may do.
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react";
import { api, errorMessage, type Principal } from "../api/client";
import { clearToken, onTokenCleared, readToken, storeToken } from "./token";

type AuthState = {
  principal: Principal | null;
  checking: boolean;
  notice: string | null;
  signIn: (token: string) => Promise<string | null>;
  signOut: () => void;
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

export function AuthProvider({ children }: { children: ReactNode }) {
  const [principal, setPrincipal] = useState<Principal | null>(null);
  const [checking, setChecking] = useState(() => readToken() !== null);
  const [notice, setNotice] = useState<string | null>(null);

  useEffect(() => {
    const stored = readToken();
    if (stored) {
      void whoIs(stored).then((who) => {
        if (typeof who === "string") clearToken(who);
        else setPrincipal(who);
        setChecking(false);
      });
    }
    return onTokenCleared((reason) => {
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

  const signOut = useCallback(() => clearToken(null), []);

  return (
    <AuthContext.Provider value={{ principal, checking, notice, signIn, signOut }}>
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
