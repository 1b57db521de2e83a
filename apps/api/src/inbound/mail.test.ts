import fc from "fast-check";
import { MAX_STATUS_BLOCKS, parseFieldBlocks } from "./bounce.js";
import { collapseWhitespace, HTML_TO_TEXT_MAX_CHARS, MAX_THREAD_LOOKUP_IDS, MessageTooLargeError, threadLookupIds } from "./mail.js";
import { parseRawMessage } from "./parse-message.js";

const NOW = new Date("2026-12-01T08:00:00.000Z");
const htmlOnly = (chars: number) =>
  Buffer.from(`From: a@example.com\r\nContent-Type: text/html\r\n\r\n${"<b>x</b>".repeat(Math.ceil(chars / 8))}`, "latin1");

describe("HTML rendered to text has a bounded size (issue 17 item 1)", () => {
  test("HTML over HTML_TO_TEXT_MAX_CHARS is refused with MessageTooLargeError, never cut", async () => {
    await expect(parseRawMessage(htmlOnly(HTML_TO_TEXT_MAX_CHARS + 8), "inb_1", NOW)).rejects.toBeInstanceOf(MessageTooLargeError);
  });

  test("HTML within it is rendered whole", async () => {
    const parsed = await parseRawMessage(htmlOnly(64 * 1024), "inb_1", NOW);
    expect(parsed.eventType).toBe("message.received");
    const body = parsed.eventType === "message.received" ? parsed.data.body : "";
    expect(body.replace(/\s/g, "").length).toBe(8 * 1024);
  });
});

describe("header values are read in one pass, whatever they hold (issue 32 item 1)", () => {
  // Any UTF-16 unit, with every kind of JavaScript whitespace often.
  const spaces = [
    "\t",
    "\n",
    "\v",
    "\f",
    "\r",
    " ",
    "\u00a0",
    "\u1680",
    "\u2000",
    "\u200a",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
    "\ufeff",
  ];
  const unit = fc.oneof(
    fc.constantFrom(...spaces),
    fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
  );

  test("collapseWhitespace is replace(/\\s+/g, ' ').trim()", () => {
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 300 }), (text) => collapseWhitespace(text) === text.replace(/\s+/g, " ").trim()),
      { numRuns: 2000 },
    );
  });

  test("a long value collapses whole (past the 8192 units of one copy)", () => {
    const text = " a\r\n b".repeat(20_000);
    expect(collapseWhitespace(text)).toBe(text.replace(/\s+/g, " ").trim());
  });

  test("a thread is looked up by at most MAX_THREAD_LOOKUP_IDS ids: In-Reply-To's, the root and the nearest ancestors", () => {
    const references = Array.from({ length: 100_000 }, (_, i) => `<r${i}@x>`).join(" ");
    const ids = threadLookupIds("<parent@x>", references);
    expect(ids).toHaveLength(MAX_THREAD_LOOKUP_IDS);
    expect(ids.slice(0, 3)).toEqual(["<parent@x>", "<r0@x>", `<r${100_000 - (MAX_THREAD_LOOKUP_IDS - 2)}@x>`]);
    expect(ids.at(-1)).toBe("<r99999@x>");
    // Under the bound: every id, in order, once.
    expect(threadLookupIds("<b@x>", "<a@x> <b@x>", ["<own@x>"])).toEqual(["<own@x>", "<b@x>", "<a@x>"]);
  });
});

describe("a delivery report's fields are read in one pass, in bounded blocks (issue 32 item 1)", () => {
  test("first values, unfolded, names lowercased; blank lines (spaces and tabs too) separate blocks", () => {
    const text =
      "Reporting-MTA: dns; mx\r\n\r\nFinal-Recipient: rfc822; a@example.org\r\nAction: failed\r\n \t \r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550\r\n  user\r\n\tunknown\r\nSTATUS: 4.0.0\r\nnot a field\r\n";
    expect(parseFieldBlocks(Buffer.from(text)).map((block) => Object.fromEntries(block))).toEqual([
      { "reporting-mta": "dns; mx" },
      { "final-recipient": "rfc822; a@example.org", action: "failed" },
      { status: "5.1.1", "diagnostic-code": "smtp; 550 user unknown" },
    ]);
  });

  test("a block of many fields is read once (the first of each name kept)", () => {
    const fields = Array.from({ length: 50_000 }, (_, i) => `X-${i}: ${i}`).join("\r\n");
    const [block] = parseFieldBlocks(Buffer.from(`${fields}\r\nX-0: again`));
    expect(block.size).toBe(50_000);
    expect(block.get("x-0")).toBe("0");
  });

  test(`more than ${MAX_STATUS_BLOCKS} blocks is refused, never cut short; a report with that many is 413`, async () => {
    const blocks = (n: number) =>
      Array.from({ length: n }, (_, i) => `Final-Recipient: rfc822; r${i}@example.org\r\nAction: failed\r\nStatus: 5.1.1`);
    expect(parseFieldBlocks(Buffer.from(blocks(MAX_STATUS_BLOCKS).join("\r\n\r\n")))).toHaveLength(MAX_STATUS_BLOCKS);
    expect(() => parseFieldBlocks(Buffer.from(blocks(MAX_STATUS_BLOCKS + 1).join("\r\n\r\n")))).toThrow(MessageTooLargeError);
    // Tiny blocks, each of which a parse of its own once made a MailParser of: 100 KB took 150 MB of heap.
    const report = Buffer.from(
      `From: mailer@example.com\r\nContent-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\n${"X: y\r\n\r\n".repeat(20_000)}\r\n--b--\r\n`,
    );
    await expect(parseRawMessage(report, "inb_1", NOW)).rejects.toBeInstanceOf(MessageTooLargeError);
  });
});
