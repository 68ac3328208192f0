// The audit log against a stubbed API: filters from the URL reach the request, a 403
// reads as such, and an empty result says so.
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AuditEntry } from "../../api/client";
import { AuditPage } from "../AuditPage";

const mocks = vi.hoisted(() => ({ GET: vi.fn(), operator: true }));

vi.mock("../../api/client", async (importActual) => ({
  ...(await importActual<typeof import("../../api/client")>()),
  api: { GET: mocks.GET },
}));
vi.mock("../../lib/auth", () => ({ useIsOperator: () => mocks.operator }));

const entry: AuditEntry = {
  id: 7,
  time: "2024-01-03T10:00:00Z",
  actor: "ann",
  role: "operator",
  action: "reconcileTable",
  method: "POST",
  path: "/api/tables/p.d.t/reconcile",
  target: "table p.d.t",
  request_id: "abc123",
  status_code: 200,
  outcome: "ok: ok",
};

const answer = (data: unknown, status = 200) =>
  Promise.resolve(
    status < 400
      ? { data, response: new Response(null, { status }) }
      : { error: data, response: new Response(null, { status }) },
  );

function renderAt(url: string) {
  render(
    <MemoryRouter initialEntries={[url]}>
      <Routes>
        <Route path="/audit" element={<AuditPage />} />
      </Routes>
    </MemoryRouter>,
  );
}

beforeEach(() => {
  mocks.GET.mockReset();
  mocks.operator = true;
});
afterEach(cleanup);

describe("/audit", () => {
  it("sends the URL's filters and page, and lists the entries", async () => {
    mocks.GET.mockReturnValue(answer({ data: [entry], count: 1 }));
    renderAt("/audit?actor=ann&action=reconcileTable&since=2024-01-01T00:00:00Z&offset=100&limit=50");
    expect(await screen.findByTestId("audit-row")).toBeTruthy();
    expect(mocks.GET).toHaveBeenCalledWith("/api/audit", {
      params: {
        query: {
          actor: "ann",
          action: "reconcileTable",
          since: "2024-01-01T00:00:00.000Z",
          until: undefined,
          limit: 50,
          offset: 100,
        },
      },
    });
  });

  it("applies a typed filter from the first page", async () => {
    mocks.GET.mockReturnValue(answer({ data: [entry], count: 1 }));
    renderAt("/audit?offset=100");
    await screen.findByTestId("audit-row");
    fireEvent.change(screen.getByTestId("audit-actor"), { target: { value: "bob" } });
    fireEvent.click(screen.getByRole("button", { name: "Apply" }));
    await waitFor(() =>
      expect(mocks.GET).toHaveBeenLastCalledWith("/api/audit", {
        params: { query: expect.objectContaining({ actor: "bob", offset: 0 }) },
      }),
    );
  });

  it("says when nothing matches", async () => {
    mocks.GET.mockReturnValue(answer({ data: [], count: 0 }));
    renderAt("/audit?actor=nobody");
    expect(await screen.findByText("No audit entries match.")).toBeTruthy();
  });

  it("explains a 403", async () => {
    mocks.GET.mockReturnValue(answer({ detail: "role viewer may not do this" }, 403));
    renderAt("/audit");
    expect((await screen.findByRole("alert")).textContent).toContain("for operators only");
  });

  it("does not ask for the log without the operator role", () => {
    mocks.operator = false;
    renderAt("/audit");
    expect(screen.getByTestId("audit-forbidden").textContent).toContain("operators only");
    expect(mocks.GET).not.toHaveBeenCalled();
  });
});
