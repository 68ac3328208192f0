// The dashboard's home: what needs a look now (failed and stalled runs, firing alerts)
// and every table at a glance, each item linking to its page. Re-read live when runs
// change, and every 15 s for what changes without a run (alert rounds, the clock).
import { useEffect } from "react";
import { Link } from "react-router";
import { api } from "../api/client";
import { QueryState } from "../components/ui";
import { useLiveReload } from "../lib/live";
import { useQuery } from "../lib/useQuery";
import { AttentionRuns } from "./overview/AttentionRuns";
import { FiringAlerts } from "./overview/FiringAlerts";
import { Headline } from "./overview/Headline";
import { TableGlance } from "./overview/TableGlance";
import type { Overview } from "./overview/types";
import "./overview/overview.css";

// Alert rules are evaluated every 15 s by default; staleness moves with the clock.
const REFRESH_MS = 15_000;

function NothingYet() {
  return (
    <section aria-label="Getting started" data-testid="overview-empty">
      <h2>Nothing loaded yet</h2>
      <p>
        Start a job that writes with the onceover sink (<code>df.write.format("onceover")</code>, or{" "}
        <code>python -m onceover_jobs.load_files</code>) with this control plane as its monitor: its run appears here
        as it loads, with its table.
      </p>
      <p>
        Then say what should wake someone on the <Link to="/alerts?tab=rules">alert rules</Link> page.
      </p>
    </section>
  );
}

function OverviewBody({ overview }: { overview: Overview }) {
  const now = overview.generated_at;
  if (overview.tables_count === 0 && overview.runs_count === 0 && overview.alerts_count === 0) {
    return <NothingYet />;
  }
  return (
    <>
      <Headline overview={overview} />
      <div className="grid-2 ov-grid">
        <AttentionRuns runs={overview.runs} count={overview.runs_count} now={now} />
        <FiringAlerts alerts={overview.alerts} count={overview.alerts_count} now={now} />
      </div>
      <TableGlance tables={overview.tables} count={overview.tables_count} now={now} staleAfterS={overview.stale_after_s} />
    </>
  );
}

export function OverviewPage() {
  const overview = useQuery(() => api.GET("/api/overview"), "overview");
  useLiveReload(overview.reload);
  useEffect(() => {
    const timer = window.setInterval(overview.reload, REFRESH_MS);
    return () => window.clearInterval(timer);
  }, [overview.reload]);

  return (
    <>
      <div className="page-header ov-header">
        <h1>Overview</h1>
        {overview.loading && overview.data && <span className="muted">Refreshing…</span>}
      </div>
      <QueryState query={overview} what="the overview">
        {(answer) => <OverviewBody overview={answer} />}
      </QueryState>
    </>
  );
}
