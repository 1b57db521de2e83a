import fc from "fast-check";
import { buildEnvelope, buildTestEnvelope, envelopeByteLength, EnvelopeTooLargeError, jsonByteLength, unixSeconds } from "./envelope.js";
import { ENVELOPE_MAX_BYTES } from "./kinds.js";

// 2026-11-22T10:00:00Z is 1795341600 (`date -u -d 2026-11-22T10:00:00Z +%s`). The .999 ms must be
// dropped, not rounded up.
const OCCURRED_AT = new Date("2026-11-22T10:00:00.999Z");

// Every input below lists its keys in an order different from the spec's (mostly reversed), so
// that only `buildEnvelope`'s own ordering can produce the expected bytes.
describe("buildEnvelope: exact bytes per kind", () => {
  it("message.sent", () => {
    const data = {
      status: "sent",
      subject: "Hello",
      to: ["bob@example.com", "carol@example.com"],
      from: "alice@example.com",
      inboxId: "inb_1",
      threadId: "thr_1",
      messageId: "<m1@example.com>",
    };
    expect(buildEnvelope("message.sent", OCCURRED_AT, data)).toBe(
      '{"event":"message.sent","timestamp":1795341600,"data":{"messageId":"<m1@example.com>","threadId":"thr_1","inboxId":"inb_1","from":"alice@example.com","to":["bob@example.com","carol@example.com"],"subject":"Hello","status":"sent"}}',
    );
  });

  it("message.delivered", () => {
    const data = {
      deliveredAt: "2026-11-22T10:00:05Z",
      status: "delivered",
      subject: "Hello",
      to: ["bob@example.com"],
      from: "alice@example.com",
      inboxId: "inb_1",
      threadId: "thr_1",
      messageId: "<m1@example.com>",
    };
    expect(buildEnvelope("message.delivered", OCCURRED_AT, data)).toBe(
      '{"event":"message.delivered","timestamp":1795341600,"data":{"messageId":"<m1@example.com>","threadId":"thr_1","inboxId":"inb_1","from":"alice@example.com","to":["bob@example.com"],"subject":"Hello","status":"delivered","deliveredAt":"2026-11-22T10:00:05Z"}}',
    );
  });

  it("message.opened", () => {
    const data = {
      openedAt: "2026-11-22T11:00:00Z",
      openCount: 2,
      subject: "Hello",
      to: ["bob@example.com"],
      from: "alice@example.com",
      inboxId: "inb_1",
      threadId: "thr_1",
      messageId: "<m1@example.com>",
    };
    expect(buildEnvelope("message.opened", OCCURRED_AT, data)).toBe(
      '{"event":"message.opened","timestamp":1795341600,"data":{"messageId":"<m1@example.com>","threadId":"thr_1","inboxId":"inb_1","from":"alice@example.com","to":["bob@example.com"],"subject":"Hello","openCount":2,"openedAt":"2026-11-22T11:00:00Z"}}',
    );
  });

  it("message.clicked", () => {
    const data = {
      clickedAt: "2026-11-22T11:30:00.250Z",
      clickCount: 1,
      url: "https://example.com/offer?a=1&b=2",
      subject: "Hello",
      to: ["bob@example.com"],
      from: "alice@example.com",
      inboxId: "inb_1",
      threadId: "thr_1",
      messageId: "<m1@example.com>",
    };
    expect(buildEnvelope("message.clicked", OCCURRED_AT, data)).toBe(
      '{"event":"message.clicked","timestamp":1795341600,"data":{"messageId":"<m1@example.com>","threadId":"thr_1","inboxId":"inb_1","from":"alice@example.com","to":["bob@example.com"],"subject":"Hello","url":"https://example.com/offer?a=1&b=2","clickCount":1,"clickedAt":"2026-11-22T11:30:00.250Z"}}',
    );
  });

  it("message.received, nested headers ordered messageId, inReplyTo, references", () => {
    const data = {
      headers: {
        references: "<m0@example.com> <m1@example.com>",
        inReplyTo: "<m1@example.com>",
        messageId: "<m2@example.com>",
      },
      body: "Thanks!\nSee you — Café ☕",
      subject: "Re: Hello",
      to: ["alice@example.com"],
      from: "bob@example.com",
      inboxId: "inb_1",
      threadId: "thr_1",
      messageId: "<m2@example.com>",
    };
    // JSON.stringify escapes the newline but leaves non-ASCII text as is (sent as UTF-8).
    expect(buildEnvelope("message.received", OCCURRED_AT, data)).toBe(
      '{"event":"message.received","timestamp":1795341600,"data":{"messageId":"<m2@example.com>","threadId":"thr_1","inboxId":"inb_1","from":"bob@example.com","to":["alice@example.com"],"subject":"Re: Hello","body":"Thanks!\\nSee you — Café ☕","headers":{"messageId":"<m2@example.com>","inReplyTo":"<m1@example.com>","references":"<m0@example.com> <m1@example.com>"}}}',
    );
  });

  it("message.bounced", () => {
    const data = {
      bouncedAt: "2026-11-22T10:01:00Z",
      bounceMessage: "550 5.1.1 User unknown",
      bounceCode: "5.1.1",
      bounceType: "hard",
      subject: "Hello",
      to: ["nobody@example.com"],
      from: "alice@example.com",
      inboxId: "inb_1",
      threadId: "thr_1",
      messageId: "<m1@example.com>",
    };
    expect(buildEnvelope("message.bounced", OCCURRED_AT, data)).toBe(
      '{"event":"message.bounced","timestamp":1795341600,"data":{"messageId":"<m1@example.com>","threadId":"thr_1","inboxId":"inb_1","from":"alice@example.com","to":["nobody@example.com"],"subject":"Hello","bounceType":"hard","bounceCode":"5.1.1","bounceMessage":"550 5.1.1 User unknown","bouncedAt":"2026-11-22T10:01:00Z"}}',
    );
  });
});

describe("buildTestEnvelope", () => {
  it("is webhook.test with data {webhookId, url} and an integer timestamp", () => {
    // 2026-11-22T10:05:00Z is 1795341900.
    expect(buildTestEnvelope("wh_123", "https://example.com/hooks", new Date("2026-11-22T10:05:00.500Z"))).toBe(
      '{"event":"webhook.test","timestamp":1795341900,"data":{"webhookId":"wh_123","url":"https://example.com/hooks"}}',
    );
  });
});

describe("unixSeconds", () => {
  it("drops fractional seconds instead of rounding", () => {
    expect(unixSeconds(new Date("2026-11-22T10:00:00.000Z"))).toBe(1795341600);
    expect(unixSeconds(new Date("2026-11-22T10:00:00.999Z"))).toBe(1795341600);
    expect(unixSeconds(new Date("2026-11-22T10:00:01.000Z"))).toBe(1795341601);
  });
});

describe("the envelope's size (docs/api.md, 'Limits': at most 10 MiB)", () => {
  const received = (body: string) => ({
    messageId: "<m@example.com>",
    threadId: "thr_1",
    inboxId: "inb_1",
    from: "bob@example.com",
    to: ["alice@example.com"],
    subject: "Hi",
    body,
    headers: { messageId: "<m@example.com>", inReplyTo: "", references: "" },
  });

  // Any UTF-16 code unit: control characters, quotes, backslashes, non-ASCII, lone surrogates.
  const anyText = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)), maxLength: 200 });
  const json: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small" },
      anyText,
      fc.double(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie("value"), { maxLength: 5 }),
      fc.dictionary(anyText, tie("value"), { maxKeys: 5 }),
    ),
  })).value;

  it("jsonByteLength is the UTF-8 length of JSON.stringify, for any JSON value", () => {
    fc.assert(
      fc.property(json, (value) => jsonByteLength(value) === Buffer.byteLength(JSON.stringify(value), "utf8")),
      { numRuns: 2000 },
    );
  });

  it("envelopeByteLength is the length of the bytes buildEnvelope makes", () => {
    fc.assert(
      fc.property(
        anyText,
        (body) =>
          envelopeByteLength("message.received", OCCURRED_AT, received(body)) ===
          Buffer.byteLength(buildEnvelope("message.received", OCCURRED_AT, received(body))),
      ),
    );
  });

  it("an envelope over 10 MiB is refused before it is built: a control character takes six bytes", () => {
    // 2 MiB of U+0001 is 12 MiB of JSON; 9 MiB of plain text fits.
    const control = "\u0001".repeat(2 * 1024 * 1024);
    expect(envelopeByteLength("message.received", OCCURRED_AT, received(control))).toBeGreaterThan(12 * 1024 * 1024);
    expect(() => buildEnvelope("message.received", OCCURRED_AT, received(control))).toThrow(EnvelopeTooLargeError);
    const text = "a".repeat(9 * 1024 * 1024);
    expect(Buffer.byteLength(buildEnvelope("message.received", OCCURRED_AT, received(text)))).toBeLessThanOrEqual(ENVELOPE_MAX_BYTES);
  });
});
