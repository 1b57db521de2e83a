import { buildExampleEnvelope, EVENT_EXAMPLES, exampleData } from "./examples.js";
import { EVENT_TYPES } from "./kinds.js";
import { eventDataSchemas } from "./schemas.js";

describe("example data of each kind", () => {
  test.each(EVENT_TYPES)(
    "%s: the example and a fresh copy are valid for the kind's schema; the copy's messageId ends @example.invalid",
    (kind) => {
      expect(eventDataSchemas[kind].safeParse(EVENT_EXAMPLES[kind]).success).toBe(true);
      const fresh = exampleData(kind);
      expect(eventDataSchemas[kind].parse(fresh)).toEqual(fresh);
      expect(fresh.messageId).toMatch(/^[0-9a-f-]{36}@example\.invalid$/);
      expect(exampleData(kind).messageId).not.toBe(fresh.messageId);
      if (kind === "message.received") expect((fresh.headers as { messageId: string }).messageId).toBe(`<${fresh.messageId as string}>`);
    },
  );

  test("the envelope has the kind, the time in Unix seconds, and the example's data in the specification's order", () => {
    const envelope = JSON.parse(buildExampleEnvelope("message.opened", new Date("2026-11-22T10:05:00Z")));
    expect(envelope.event).toBe("message.opened");
    expect(envelope.timestamp).toBe(1795341900);
    expect(Object.keys(envelope.data)).toEqual(["messageId", "threadId", "inboxId", "from", "to", "subject", "openCount", "openedAt"]);
    expect({ ...envelope.data, messageId: EVENT_EXAMPLES["message.opened"].messageId }).toEqual(EVENT_EXAMPLES["message.opened"]);
  });
});
