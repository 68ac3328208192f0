import { HealthPanel } from "./HealthPanel";

export function App() {
  return (
    <main>
      <header>
        <h1>Onceover</h1>
        <p className="tagline">Exactly-once Spark → BigQuery loads you can watch, reconcile and resume.</p>
      </header>
      <HealthPanel />
    </main>
  );
}
