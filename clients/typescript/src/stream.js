// The live history of GET /v1/events/stream: Server-Sent Events, each
// "id: <index>", "event: event" and one data line holding a history item
// (api.HistoryItem) as JSON; ": keep-alive" comments while idle; an
// "event: error" (its data a quoted message) ends it. Read as the Go
// client's readEvents reads it (client/stream.go).

import { AnnalError } from "./client.js";

/** The longest line the reader takes (the Go client's scanner buffer). */
const MAX_LINE = 1 << 20;

/** The stream ended before the server closed it on purpose: reopen it. */
export class StreamCut extends Error {}

/**
 * Yields the history items of an event stream's body, in order, until it
 * ends: an "event: error" throws its AnnalError, a stream that stops
 * throws StreamCut (the server never ends one on purpose otherwise).
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<import("./client.js").HistoryItem>}
 */
export async function* streamItems(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  let buffered = "";
  let data = "";
  let kind = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) throw new StreamCut("the event stream ended");
      buffered += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl).replace(/\r$/, "");
        buffered = buffered.slice(nl + 1);
        if (line.startsWith("data: ")) data = line.slice(6);
        else if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line === "" && data !== "") {
          if (kind === "error") throw new AnnalError(500, { error: unquote(data) }, data, undefined);
          let item;
          try {
            item = JSON.parse(data);
          } catch (e) {
            throw new AnnalError(502, { error: `a stream event is not a history item: ${/** @type {Error} */ (e).message}` }, data, undefined);
          }
          if (!item || typeof item !== "object" || !Number.isSafeInteger(item.index)) {
            throw new AnnalError(502, { error: "a stream event is not a history item: it has no index" }, data, undefined);
          }
          data = "";
          kind = "";
          yield item;
        }
      }
      if (buffered.length > MAX_LINE) throw new StreamCut(`an event stream line is longer than ${MAX_LINE} bytes`);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** The text of a Go-quoted string (strconv.Quote), or the data as it is. */
function unquote(/** @type {string} */ s) {
  try {
    const v = JSON.parse(s.replace(/\\x([0-9a-f]{2})/gi, "\\u00$1").replace(/\\a/g, "\\u0007").replace(/\\v/g, "\\u000b"));
    return typeof v === "string" ? v : s;
  } catch {
    return s;
  }
}
