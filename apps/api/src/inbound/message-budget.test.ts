import {
  countLines,
  MAX_HEADER_BYTES,
  MAX_MESSAGE_HEAP_COST,
  MAX_MESSAGE_LINES,
  MAX_MIME_PARTS,
  measureMessage,
  messageHeapCost,
} from "./message-budget.js";
import { MessageTooLargeError } from "./mail.js";

const MIB = 1024 * 1024;
const head = (extra = "", contentType = "text/plain") =>
  `From: a@example.com\r\nTo: b@example.org\r\nSubject: s\r\n${extra}Content-Type: ${contentType}\r\n\r\n`;
const message = (text: string) => Buffer.from(text, "utf8");
const multipart = (parts: string[]) =>
  message(head("", 'multipart/mixed; boundary="b"') + parts.map((part) => `--b\r\n${part}\r\n`).join("") + "--b--\r\n");

describe("measureMessage: what a raw message may cost, known before mailparser sees it", () => {
  test("lines, bytes and the header bytes of every part", async () => {
    const raw = multipart(["Content-Type: text/plain\r\n\r\nhello", "Content-Type: text/html\r\n\r\n<p>hello</p>"]);
    const shape = await measureMessage(raw);
    expect(shape.bytes).toBe(raw.length);
    expect(shape.lines).toBe(countLines(raw));
    // The root's header section and each part's ("Content-Type: ...\r\n\r\n").
    expect(shape.headerBytes).toBeGreaterThan(head("", 'multipart/mixed; boundary="b"').length + 2 * "Content-Type: text/plain\r\n".length);
    expect(shape.headerBytes).toBeLessThan(raw.length);
  });

  test("more lines than MAX_MESSAGE_LINES (10 MiB of short lines would take hundreds of MB to parse) is refused", async () => {
    await expect(measureMessage(message(head() + "a\r\n".repeat(MAX_MESSAGE_LINES)))).rejects.toThrow(MessageTooLargeError);
    await expect(measureMessage(message(head() + "a\r\n".repeat(MAX_MESSAGE_LINES - 10)))).resolves.toMatchObject({
      lines: MAX_MESSAGE_LINES - 5,
    });
  });

  test("header sections over MAX_HEADER_BYTES, in one part or summed over many, are refused", async () => {
    const folds = (bytes: number) => `X-Long: a${"\r\n a".repeat(Math.floor(bytes / 4))}\r\n`;
    await expect(measureMessage(message(head(folds(MAX_HEADER_BYTES)) + "hi"))).rejects.toThrow(/header sections/);
    const part = `Content-Type: text/plain\r\n${folds(MAX_HEADER_BYTES / 8)}\r\nx`;
    await expect(measureMessage(multipart(Array.from({ length: 9 }, () => part)))).rejects.toThrow(/header sections/);
    await expect(measureMessage(multipart(Array.from({ length: 6 }, () => part)))).resolves.toBeDefined();
  });

  test("a header section that never ends (no blank line) counts whole", async () => {
    await expect(measureMessage(message(`Subject: x\r\n${"X: y\r\n".repeat(MAX_HEADER_BYTES / 6 + 1)}`))).rejects.toThrow(
      MessageTooLargeError,
    );
  });

  test("a returned message's headers (text/rfc822-headers) count as header bytes up to their blank line, embedded messages' twice", async () => {
    const headers = (bytes: number) => `X-Returned: ${"a,".repeat(bytes / 2)}\r\n`;
    const report = (contentType: string, content: string) =>
      multipart([`Content-Type: text/plain\r\n\r\nfailed`, `Content-Type: ${contentType}\r\n\r\n${content}`]);
    const plain = await measureMessage(report("text/plain", headers(MAX_HEADER_BYTES / 2)));
    const asHeaders = await measureMessage(report("text/rfc822-headers", headers(MAX_HEADER_BYTES / 2)));
    expect(asHeaders.headerBytes - plain.headerBytes).toBeGreaterThanOrEqual(MAX_HEADER_BYTES / 2);
    // Only up to the blank line: a long body after it is not headers.
    const withBody = await measureMessage(report("message/global", `${headers(1024)}\r\n${"body\r\n".repeat(MAX_HEADER_BYTES / 4)}`));
    expect(withBody.headerBytes).toBeLessThan(plain.headerBytes + 2048);
    const attached = await measureMessage(report("message/rfc822", `${headers(MAX_HEADER_BYTES * 0.3)}\r\nbody`));
    expect(attached.headerBytes - plain.headerBytes).toBeGreaterThanOrEqual(MAX_HEADER_BYTES * 0.3);
    const inline = await measureMessage(
      report("message/rfc822\r\nContent-Disposition: inline", `${headers(MAX_HEADER_BYTES * 0.3)}\r\nbody`),
    );
    expect(inline.headerBytes - plain.headerBytes).toBeGreaterThanOrEqual(MAX_HEADER_BYTES * 0.6);
    await expect(
      measureMessage(report("message/rfc822\r\nContent-Disposition: inline", `${headers(MAX_HEADER_BYTES * 0.6)}\r\nbody`)),
    ).rejects.toThrow(MessageTooLargeError);
  });

  test(`more than ${MAX_MIME_PARTS} MIME parts is refused`, async () => {
    const part = "Content-Type: text/plain\r\n\r\nx";
    await expect(measureMessage(multipart(Array.from({ length: MAX_MIME_PARTS + 1 }, () => part)))).rejects.toThrow(/MIME parts/);
  });

  test("what mailsplit cannot split is left to mailparser, which says why", async () => {
    await expect(measureMessage(Buffer.alloc(0))).resolves.toMatchObject({ bytes: 0, lines: 0 });
  });
});

describe("messageHeapCost: the per-request budget", () => {
  test("grows with bytes, lines and header bytes; the envelope's share stops at 10 MiB", () => {
    const base = { bytes: MIB, lines: 100, headerBytes: 1000 };
    expect(messageHeapCost({ ...base, bytes: 2 * MIB })).toBeGreaterThan(messageHeapCost(base));
    expect(messageHeapCost({ ...base, lines: 200 })).toBeGreaterThan(messageHeapCost(base));
    expect(messageHeapCost({ ...base, headerBytes: 2000 })).toBeGreaterThan(messageHeapCost(base));
    // A small message is charged little: many run at once.
    expect(messageHeapCost({ bytes: 20_000, lines: 400, headerBytes: 2_000 })).toBeLessThan(1.5 * MIB);
  });

  test("the costliest message the limits let through is charged 108 MiB", () => {
    expect(MAX_MESSAGE_HEAP_COST).toBe(messageHeapCost({ bytes: 10 * MIB, lines: MAX_MESSAGE_LINES, headerBytes: MAX_HEADER_BYTES }));
    expect(MAX_MESSAGE_HEAP_COST / MIB).toBe(108);
  });
});
