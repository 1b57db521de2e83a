import { HTML_TO_TEXT_MAX_CHARS, MessageTooLargeError } from "./mail.js";
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
