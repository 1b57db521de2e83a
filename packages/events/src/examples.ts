import { randomUUID } from "node:crypto";
import { buildEnvelope } from "./envelope.js";
import type { EventType } from "./kinds.js";
import type { EventData } from "./schemas.js";

/**
 * One example `data` per event kind (docs/api.md, "Test events", "POST /v1/webhooks/{id}/test"): what
 * the OpenAPI document shows for each kind's outbound request, and what a test request of that
 * kind sends, with a fresh messageId. Each is valid against its kind's schema (examples.test.ts).
 */

/** The domain of an example's messageId: reserved (RFC 2606), so it names no real message. */
export const EXAMPLE_MESSAGE_DOMAIN = "example.invalid";

const common = {
  messageId: `0193a7c2-5b1e-7c3d-9f00-1a2b3c4d5e6f@${EXAMPLE_MESSAGE_DOMAIN}`,
  threadId: "thr_0193a7c25b1e7c3d",
  inboxId: "support@inbox.example.net",
  from: "Alice Example <alice@example.com>",
  to: ["bob@example.org"],
  subject: "Your order has shipped",
};

export const EVENT_EXAMPLES: { [K in EventType]: EventData<K> } = {
  "message.sent": { ...common, status: "sent" },
  "message.delivered": { ...common, status: "delivered", deliveredAt: "2026-11-22T10:00:02Z" },
  "message.opened": { ...common, openCount: 1, openedAt: "2026-11-22T10:05:00Z" },
  "message.clicked": { ...common, url: "https://shop.example.com/orders/1042", clickCount: 1, clickedAt: "2026-11-22T10:06:00Z" },
  "message.received": {
    ...common,
    from: "bob@example.org",
    to: ["support@inbox.example.net"],
    subject: "Re: Your order has shipped",
    body: "Thanks, it arrived today.\n",
    headers: {
      messageId: `<${common.messageId}>`,
      inReplyTo: "<0193a7c2-0000-7000-8000-000000000001@example.invalid>",
      references: "<0193a7c2-0000-7000-8000-000000000001@example.invalid>",
    },
  },
  "message.bounced": {
    ...common,
    to: ["nobody@example.org"],
    bounceType: "hard",
    bounceCode: "5.1.1",
    bounceMessage: "550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown",
    bouncedAt: "2026-11-22T10:00:03Z",
  },
};

/** The example data of `kind` with a fresh messageId `<uuid>@example.invalid` (message.received: its headers.messageId too, angle-bracketed). */
export function exampleData(kind: EventType, messageId = `${randomUUID()}@${EXAMPLE_MESSAGE_DOMAIN}`): Record<string, unknown> {
  const data: Record<string, unknown> = { ...EVENT_EXAMPLES[kind], messageId };
  if (kind === "message.received") data.headers = { ...EVENT_EXAMPLES["message.received"].headers, messageId: `<${messageId}>` };
  return data;
}

/** The envelope of a test request of `kind`: its example data with a fresh messageId, `timestamp` `at`. */
export function buildExampleEnvelope(kind: EventType, at: Date): string {
  return buildEnvelope(kind, at, exampleData(kind));
}
