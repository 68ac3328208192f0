import { describe, expect, it } from "vitest";
import { describePage, pageFromParams, paramsAtOffset } from "./paging";

describe("pageFromParams", () => {
  it("uses the default page when the URL names none", () => {
    expect(pageFromParams(new URLSearchParams(), 50, 500)).toEqual({ limit: 50, offset: 0 });
  });
  it("clamps the limit to what the backend accepts and ignores junk", () => {
    expect(pageFromParams(new URLSearchParams("limit=9999&offset=100"), 50, 500)).toEqual({ limit: 500, offset: 100 });
    expect(pageFromParams(new URLSearchParams("limit=0"), 50, 500).limit).toBe(1);
    expect(pageFromParams(new URLSearchParams("limit=abc&offset=-5"), 50, 500)).toEqual({ limit: 50, offset: 0 });
  });
});

describe("paramsAtOffset", () => {
  it("keeps the other parameters and drops offset=0", () => {
    const params = new URLSearchParams("actor=ann&offset=100");
    expect(paramsAtOffset(params, 200).toString()).toBe("actor=ann&offset=200");
    expect(paramsAtOffset(params, 0).toString()).toBe("actor=ann");
  });
});

describe("describePage", () => {
  it("reads 1-based positions", () => {
    expect(describePage({ limit: 50, offset: 50 }, 20, 70)).toBe("51–70 of 70");
    expect(describePage({ limit: 50, offset: 0 }, 0, 0)).toBe("none");
  });
});
