// The figures over every table, in one row: what is wrong first, then what was loaded.
import { Link } from "react-router";
import { Stat } from "../../components/ui";
import { formatCount } from "../../lib/format";
import { Sparkline, sparkLabel } from "./Sparkline";
import type { Overview } from "./types";
import { VerdictLink } from "../../components/TableFigures";

export function Headline({ overview }: { overview: Overview }) {
  const { totals } = overview;
  const stale = overview.tables.filter((table) => table.freshness === "stale").length;
  const now = overview.generated_at;
  const hours = (code: "already_exists" | "out_of_range") =>
    totals.hours.map((hour) => ({ start: hour.start, count: hour[code] }));
  return (
    <section aria-label="At a glance" className="ov-headline">
      <dl className="stats">
        <Stat
          label="Failed or stalled runs"
          testId="overview-runs-count"
          value={
            <Link to="/runs?status=failed" className={overview.runs_count ? "ov-bad" : undefined}>
              {formatCount(overview.runs_count)}
            </Link>
          }
        />
        <Stat
          label="Alerts firing"
          testId="overview-alerts-count"
          value={
            <Link to="/alerts?state=firing" className={overview.alerts_count ? "ov-bad" : undefined}>
              {formatCount(overview.alerts_count)}
            </Link>
          }
        />
        <Stat
          label="Stale tables"
          testId="overview-stale-count"
          value={
            <span className={stale ? "ov-warn" : undefined}>
              {formatCount(stale)} <span className="muted ov-of">of {formatCount(overview.tables_count)}</span>
            </span>
          }
        />
        <Stat label="Rows today (UTC)" testId="overview-rows-today" value={formatCount(totals.rows_committed_today)} />
        <Stat
          label={"ALREADY_EXISTS 24\u00a0h"}
          value={
            <Sparkline
              values={totals.hours.map((hour) => hour.already_exists)}
              label={sparkLabel("ALREADY_EXISTS over every table", hours("already_exists"))}
              tone="info"
              testId="overview-already-exists"
            />
          }
        />
        <Stat
          label={"OUT_OF_RANGE 24\u00a0h"}
          value={
            <Sparkline
              values={totals.hours.map((hour) => hour.out_of_range)}
              label={sparkLabel("OUT_OF_RANGE over every table", hours("out_of_range"))}
              tone="bad"
              testId="overview-out-of-range"
            />
          }
        />
        <Stat label="Rows set aside 24 h" testId="overview-dead-lettered" value={formatCount(totals.rows_dead_lettered)} />
        <Stat label="Latest check" value={<VerdictLink verdict={overview.reconciliation} now={now} />} />
      </dl>
    </section>
  );
}
