import { BrowserRouter, Route, Routes } from "react-router";
import { Layout } from "./components/Layout";
import { HealthPanel } from "./components/HealthPanel";
import { AuthProvider, useAuth } from "./lib/auth";
import { LiveProvider } from "./lib/live";
import { AlertsPage } from "./pages/AlertsPage";
import { AuditPage } from "./pages/AuditPage";
import { OverviewPage } from "./pages/OverviewPage";
import { RunPage } from "./pages/RunPage";
import { RunsPage } from "./pages/RunsPage";
import { SignInPage } from "./pages/SignInPage";
import { TablesPage } from "./pages/TablesPage";
import { Loading } from "./components/ui";

function SignedIn() {
  return (
    <LiveProvider>
      <Routes>
        <Route element={<Layout />}>
          <Route index element={<OverviewPage />} />
          <Route path="runs" element={<RunsPage />} />
          <Route path="runs/:runId" element={<RunPage />} />
          <Route path="tables" element={<TablesPage />} />
          <Route path="tables/:table" element={<TablesPage />} />
          <Route path="alerts" element={<AlertsPage />} />
          <Route path="audit" element={<AuditPage />} />
          <Route path="health" element={<HealthPanel />} />
          <Route path="*" element={<p>No such page. <a href="/">Go to the overview</a>.</p>} />
        </Route>
      </Routes>
    </LiveProvider>
  );
}

function Gate() {
  const { principal, checking } = useAuth();
  if (checking) return <Loading what="your session" />;
  return principal ? <SignedIn /> : <SignInPage />;
}

export function App() {
  return (
    <BrowserRouter>
      <AuthProvider>
        <Gate />
      </AuthProvider>
    </BrowserRouter>
  );
}
