import { describe, expect, it } from "vitest";
import { SseParser } from "./sse";

describe("SseParser", () => {
  it("yields whole events however the bytes are split", () => {
    const parser = new SseParser();
    expect(parser.push("event: ready\nid: 1\nda")).toEqual([]);
    expect(parser.push('ta: {"a":1}\n\n: keep-alive\n\nevent: runs\r\ndata: x\r\ndata: y\r\n\r\n')).toEqual([
      { event: "ready", data: '{"a":1}', id: "1" },
      { event: "runs", data: "x\ny", id: "1" },
    ]);
  });
});
