// The frame of every signed-in page: navigation, who is signed in, whether live
// updates are flowing.
import { NavLink, Outlet } from "react-router";
import { useAuth } from "../lib/auth";
import { useLive } from "../lib/live";

const NAV = [
  { to: "/", label: "Overview", end: true }, // only "/" itself, not every page under it
  { to: "/runs", label: "Runs" },
  { to: "/tables", label: "Tables" },
  { to: "/alerts", label: "Alerts" },
  { to: "/audit", label: "Audit log", operator: true },
  { to: "/health", label: "Health" },
];

export function Layout() {
  const { principal, signOut } = useAuth();
  const { connected } = useLive();
  const operator = principal?.may.includes("operator") ?? false;
  return (
    <div className="app">
      <a className="skip-link" href="#content">
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">Onceover</span>
        <nav aria-label="Main">
          {NAV.filter((item) => !item.operator || operator).map((item) => (
            <NavLink key={item.to} to={item.to} end={item.end}>
              {item.label}
            </NavLink>
          ))}
        </nav>
        <span className={`live ${connected ? "live-on" : "live-off"}`} data-testid="live-status" role="status">
          {connected ? "● Live" : "○ Reconnecting…"}
        </span>
        <span className="who" data-testid="signed-in-as">
          {principal?.name} <span className="muted">({principal?.role})</span>
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="content" tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
