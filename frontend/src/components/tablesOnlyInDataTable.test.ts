// Every table of the dashboard goes through DataTable, so its markup, sorting, empty state
// and keyboard behaviour are decided in one place: no other source file writes a <table>.
import { describe, expect, it } from "vitest";

// Every source file but DataTable's (and this one: a glob never lists the file it is in).
const SOURCES = import.meta.glob<string>(["/src/**/*.{ts,tsx,js,jsx}", "!/src/components/DataTable.tsx"], {
  query: "?raw",
  import: "default",
  eager: true,
});

describe("tables", () => {
  it("are looked for in the whole source tree, tests included", () => {
    expect(Object.keys(SOURCES)).toContain("/src/pages/RunsPage.tsx");
    expect(Object.keys(SOURCES)).toContain("/src/pages/run/StreamsTable.test.tsx");
  });

  it("are drawn by DataTable only", () => {
    const writers = Object.entries(SOURCES)
      .filter(([, text]) => text.includes("<table"))
      .map(([path]) => path);
    expect(writers).toEqual([]);
  });
});
