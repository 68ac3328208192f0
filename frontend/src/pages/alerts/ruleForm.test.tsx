// The rule form's logic: which params are sent for a kind, and where a 422 is shown.
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { AlertRule } from "../../api/client";
import { formFailure } from "./apiErrors";
import { RuleForm } from "./RuleForm";
import { buildRule, describeParams, NEW_RULE, PARAM_FIELDS, valuesOfRule } from "./ruleForm";
import { withParams } from "./urlState";

afterEach(cleanup);

describe("buildRule", () => {
  it("sends only the params the kind takes", () => {
    const built = buildRule({
      ...NEW_RULE,
      name: " rate ",
      kind: "error_rate",
      threshold: "0.2",
      per: "share",
      codes: "unavailable, INTERNAL",
      older_than_s: "99", // typed while another kind was chosen: not sent
      silent_s: "5",
    });
    expect(built.errors).toBeNull();
    expect(built.body?.name).toBe("rate");
    expect(built.body?.params).toEqual({ threshold: 0.2, per: "share", codes: ["UNAVAILABLE", "INTERNAL"] });
  });

  it("leaves a missing threshold to the backend, which names it", () => {
    const built = buildRule({ ...NEW_RULE, name: "r", kind: "already_exists_rate" });
    expect(built.body?.params).toEqual({});
  });

  it("sends a rows_dead_lettered rule's window and threshold, and nothing of other kinds", () => {
    const values = { ...NEW_RULE, name: "set aside", kind: "rows_dead_lettered" as const, window_s: "600", threshold: "10", silent_s: "5" };
    const built = buildRule(values);
    expect(built.body?.kind).toBe("rows_dead_lettered");
    expect(built.body?.params).toEqual({ window_s: 600, threshold: 10 });
    expect(PARAM_FIELDS.threshold.help("rows_dead_lettered")).toBe(
      "fires above this many rows set aside in the window; default 0 (any)",
    );
  });

  it("sends no scope value for scope all, and none when it is left empty", () => {
    expect(buildRule({ ...NEW_RULE, name: "r", scope_value: "x" }).body?.scope_value).toBeNull();
    expect(buildRule({ ...NEW_RULE, name: "r", scope: "job", scope_value: " " }).body?.scope_value).toBeNull();
    expect(buildRule({ ...NEW_RULE, name: "r", scope: "job", scope_value: "billing" }).body?.scope_value).toBe("billing");
  });

  it("sends true booleans only, and refuses an empty for_s", () => {
    const orphan = buildRule({ ...NEW_RULE, name: "o", kind: "orphan_streams", include_succeeded: false, older_than_s: "60" });
    expect(orphan.body?.params).toEqual({ older_than_s: 60 });
    const recon = buildRule({ ...NEW_RULE, name: "r", kind: "reconciliation", duplicates_only: true });
    expect(recon.body?.params).toEqual({ duplicates_only: true });
    expect(buildRule({ ...NEW_RULE, name: "r", for_s: "" }).errors).toEqual({ for_s: "enter a number of seconds" });
  });

  it("round-trips a stored rule through the form", () => {
    const rule: AlertRule = {
      id: 4, name: "n", kind: "error_rate", scope: "table", scope_value: "p.d.t", severity: "critical",
      params: { threshold: 3, codes: ["UNAVAILABLE"], window_s: 600 }, for_s: 30, repeat_interval_s: 0,
      enabled: false, description: "d", created_at: "", updated_at: "",
    };
    const { id: _id, created_at: _c, updated_at: _u, ...create } = rule;
    expect(buildRule(valuesOfRule(rule)).body).toEqual(create);
    expect(describeParams(rule)).toBe("threshold=3 · window_s=600 · codes=UNAVAILABLE");
  });
});

describe("formFailure", () => {
  it("places FastAPI's and the backend's own locations on fields", () => {
    const failure = formFailure(
      {
        detail: [
          { loc: ["body", "params.threshold"], msg: "error_rate rules need a threshold" },
          { loc: ["body", "name"], msg: "String should have at least 1 character" },
        ],
      },
      422,
    );
    expect(failure.fields).toEqual({
      "params.threshold": "error_rate rules need a threshold",
      name: "String should have at least 1 character",
    });
    expect(failure.general).toContain("params.threshold: error_rate rules need a threshold");
  });

  it("shows a string detail above the form", () => {
    expect(formFailure({ detail: "no alert rule 9" }, 404)).toEqual({ fields: {}, general: "no alert rule 9" });
    expect(formFailure(undefined, 500).general).toBe("the backend answered 500");
  });
});

describe("withParams", () => {
  it("sets, keeps and removes keys", () => {
    const next = withParams(new URLSearchParams("tab=webhooks&endpoint=3&edit=new"), { endpoint: 4, edit: null });
    expect(next.toString()).toBe("tab=webhooks&endpoint=4");
  });
});

describe("RuleForm", () => {
  it("shows the kind's params and the backend's 422 next to the field it names", async () => {
    const onSubmit = vi.fn().mockResolvedValue(
      formFailure({ detail: [{ loc: ["body", "params.threshold"], msg: "error_rate rules need a threshold" }] }, 422),
    );
    render(<RuleForm title="New rule" initial={NEW_RULE} submitLabel="Create rule" onSubmit={onSubmit} onCancel={() => {}} />);
    expect(screen.queryByLabelText("Threshold")).toBeNull(); // run_failed takes none
    fireEvent.change(screen.getByLabelText("Name"), { target: { value: "errors" } });
    fireEvent.change(screen.getByLabelText("Kind"), { target: { value: "error_rate" } });
    expect(screen.getByLabelText("Codes")).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "Create rule" }));

    await waitFor(() => expect(screen.getByTestId("rule-params-threshold-error").textContent).toBe("error_rate rules need a threshold"));
    expect(screen.getByLabelText("Threshold").getAttribute("aria-invalid")).toBe("true");
    expect(onSubmit).toHaveBeenCalledWith(expect.objectContaining({ name: "errors", kind: "error_rate", params: {} }));
  });
});
