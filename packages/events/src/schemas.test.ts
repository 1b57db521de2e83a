import { ENVELOPE_MAX_BYTES, EVENT_TYPES, type EventType } from "./kinds.js";
import { EVENT_EXAMPLES } from "./examples.js";
import { eventDataSchemas } from "./schemas.js";

/** One valid `data` per kind, from the spec's tables: the documentation's examples (examples.ts). */
const samples: Record<EventType, Record<string, unknown>> = EVENT_EXAMPLES;

/** The kind's own ISO 8601 UTC timestamp field, when it has one. */
const timestampField: Partial<Record<EventType, string>> = {
  "message.delivered": "deliveredAt",
  "message.opened": "openedAt",
  "message.clicked": "clickedAt",
  "message.bounced": "bouncedAt",
};

function accepts(kind: EventType, data: unknown): boolean {
  return eventDataSchemas[kind].safeParse(data).success;
}

describe.each(EVENT_TYPES)("%s data", (kind) => {
  const sample = samples[kind];

  it("accepts a valid sample", () => {
    expect(eventDataSchemas[kind].safeParse(sample).error).toBeUndefined();
  });

  it("rejects an unknown field", () => {
    expect(accepts(kind, { ...sample, extra: "x" })).toBe(false);
  });

  it("rejects a missing common field", () => {
    const { subject: _subject, ...withoutSubject } = sample;
    expect(accepts(kind, withoutSubject)).toBe(false);
  });

  it.each([
    "alice@example.com",
    "Alice Example <alice@example.com>",
    '"john doe"@example.com',
    '"Doe, John" <john@example.com>',
    "John Q. Public <john.q.public@example.com>",
    "<alice@example.com>",
    "Zoë Ébert <zoë@exämple.com>",
  ])("accepts the address %p in from and to, unchanged", (address) => {
    const result = eventDataSchemas[kind].safeParse({ ...sample, from: address, to: [address, "bob@example.org"] });
    expect(result.error).toBeUndefined();
    expect(result.data).toMatchObject({ from: address, to: [address, "bob@example.org"] });
  });

  it.each([
    ["two addresses in one string", "alice@example.com, bob@example.com"],
    ["two named addresses in one string", '"Doe, John" <john@example.com>, Alice <alice@example.com>'],
    ["a group", "Friends: alice@example.com, bob@example.com;"],
    ["an empty group", "undisclosed-recipients:;"],
    ["garbage", "not an address"],
    ["a display name without angle brackets", "Alice alice@example.com"],
    ["text after the address", "Alice <alice@example.com> trailing"],
    ["a missing domain", "alice@"],
    ["a newline", "Alice Example\n<alice@example.com>"],
    ["a folded line", "Alice Example\r\n <alice@example.com>"],
    ["an unclosed quote", '"Doe, John <john@example.com>'],
    ["an over-long line", `${"N".repeat(990)} <alice@example.com>`],
  ])("refuses %s in from and in to", (_label, address) => {
    expect(accepts(kind, { ...sample, from: address })).toBe(false);
    expect(accepts(kind, { ...sample, to: ["bob@example.org", address] })).toBe(false);
  });

  it("names the first invalid recipient", () => {
    const result = eventDataSchemas[kind].safeParse({ ...sample, to: ["bob@example.org", "not an address", "alice@"] });
    expect(result.error?.issues).toEqual([expect.objectContaining({ path: ["to", 1] })]);
  });

  it("refuses to that is not an array of strings", () => {
    expect(accepts(kind, { ...sample, to: "bob@example.com" })).toBe(false);
    expect(accepts(kind, { ...sample, to: ["bob@example.com", 7] })).toBe(false);
  });

  const field = timestampField[kind];
  if (field) {
    it.each(["2026-11-22 10:00:00", "2026-11-22T10:00:00+02:00", "2026-11-22T10:00:00", "2026-11-22", "yesterday"])(
      `rejects ${field} = %p (not ISO 8601 UTC)`,
      (value) => {
        expect(accepts(kind, { ...sample, [field]: value })).toBe(false);
      },
    );
  }
});

describe("kind-specific rules", () => {
  it("status is the literal of its kind", () => {
    expect(accepts("message.sent", { ...samples["message.sent"], status: "delivered" })).toBe(false);
    expect(accepts("message.delivered", { ...samples["message.delivered"], status: "sent" })).toBe(false);
  });

  it("opened and clicked carry no status field", () => {
    expect(accepts("message.opened", { ...samples["message.opened"], status: "sent" })).toBe(false);
    expect(accepts("message.clicked", { ...samples["message.clicked"], status: "sent" })).toBe(false);
  });

  it.each([-1, 1.5, "2"])("openCount and clickCount reject %p", (value) => {
    expect(accepts("message.opened", { ...samples["message.opened"], openCount: value })).toBe(false);
    expect(accepts("message.clicked", { ...samples["message.clicked"], clickCount: value })).toBe(false);
  });

  it("openCount accepts zero", () => {
    expect(accepts("message.opened", { ...samples["message.opened"], openCount: 0 })).toBe(true);
  });

  it("received headers are strict and all three are required", () => {
    const received = samples["message.received"];
    const headers = received.headers as Record<string, string>;
    expect(accepts("message.received", { ...received, headers: { ...headers, subject: "x" } })).toBe(false);
    const { references: _references, ...withoutReferences } = headers;
    expect(accepts("message.received", { ...received, headers: withoutReferences })).toBe(false);
  });

  it("a received body is bounded by the envelope it travels in (at most 10 MiB: one byte per character at least)", () => {
    const received = samples["message.received"];
    expect(accepts("message.received", { ...received, body: "a".repeat(ENVELOPE_MAX_BYTES) })).toBe(true);
    expect(accepts("message.received", { ...received, body: "a".repeat(ENVELOPE_MAX_BYTES + 1) })).toBe(false);
  });

  it("only a bounce may have an empty sender (a DSN does not always carry it)", () => {
    expect(accepts("message.bounced", { ...samples["message.bounced"], from: "" })).toBe(true);
    expect(accepts("message.sent", { ...samples["message.sent"], from: "" })).toBe(false);
  });
});
