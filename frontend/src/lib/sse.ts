// A Server-Sent Events parser for fetch bodies. EventSource cannot send an
// Authorization header, so the stream is read with fetch and parsed here.
export type ServerEvent = { event: string; data: string; id: string | null };

/** Feed chunks of text; complete events come out, partial ones wait for more. */
export class SseParser {
  private buffer = "";
  private event = "message";
  private data: string[] = [];
  private id: string | null = null;

  push(chunk: string): ServerEvent[] {
    this.buffer += chunk;
    const out: ServerEvent[] = [];
    let newline: number;
    while ((newline = this.buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = this.buffer.slice(0, newline);
      const width = this.buffer.startsWith("\r\n", newline) ? 2 : 1;
      this.buffer = this.buffer.slice(newline + width);
      if (line === "") {
        if (this.data.length) out.push({ event: this.event, data: this.data.join("\n"), id: this.id });
        this.event = "message";
        this.data = [];
        continue;
      }
      if (line.startsWith(":")) continue; // a comment (keep-alive)
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.event = value;
      else if (field === "data") this.data.push(value);
      else if (field === "id") this.id = value;
    }
    return out;
  }
}
