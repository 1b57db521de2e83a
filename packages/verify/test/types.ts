import { verify, verifyEvent, type WebhookEnvelope, type WebhookEvent, type WebhookEventType } from "../src/index.js";
import * as web from "../src/web.js";

/**
 * Compiled, never run (test/typecheck.integration.test.ts runs tsc on it): the verified envelope's `data` is
 * typed by `event`, a union discriminated on it (the six kinds and webhook.test), and each
 * `@ts-expect-error` below proves that a field of another kind does not type-check.
 */

declare const secret: string;
declare const headers: Record<string, string>;
declare const body: Buffer;

export function describe(webhook: WebhookEnvelope): string {
  switch (webhook.event) {
    case "message.sent":
      return webhook.data.status satisfies "sent";
    case "message.delivered":
      return `${webhook.data.status satisfies "delivered"} at ${webhook.data.deliveredAt}`;
    case "message.opened":
      // @ts-expect-error an open has no status
      void webhook.data.status;
      return `opened ${webhook.data.openCount satisfies number} times, last at ${webhook.data.openedAt}`;
    case "message.clicked":
      return `${webhook.data.url} clicked ${webhook.data.clickCount satisfies number} times at ${webhook.data.clickedAt}`;
    case "message.received":
      return `${webhook.data.body} in reply to ${webhook.data.headers.inReplyTo} (${webhook.data.headers.references})`;
    case "message.bounced":
      return `${webhook.data.bounceType} ${webhook.data.bounceCode} ${webhook.data.bounceMessage} at ${webhook.data.bouncedAt}`;
    case "webhook.test":
      // @ts-expect-error a test request is about no message
      void webhook.data.subject;
      return `test of ${webhook.data.webhookId} at ${webhook.data.url}`;
    case "webhook.failing":
      return `${webhook.data.webhookId} failing since ${webhook.data.failingSince}: ${webhook.data.consecutiveFailures satisfies number} in a row`;
    case "webhook.recovered":
      return `${webhook.data.webhookId} recovered at ${webhook.data.recoveredAt}`;
    case "webhook.disabled":
      return `${webhook.data.webhookId} disabled (${webhook.data.reason satisfies "failing" | "manual" | "idle"})`;
    case "destination.failed":
      return `${webhook.data.eventType} ${webhook.data.eventId} failed after ${webhook.data.attempts satisfies number} attempts`;
    default:
      // Every kind is handled above.
      return webhook satisfies never;
  }
}

export function common(webhook: WebhookEnvelope): string | undefined {
  // messageId reads on every kind (undefined for webhook.test and the operational kinds); the other common fields need a narrowing.
  const messageId: string | undefined = webhook.data.messageId;
  // @ts-expect-error webhook.test has no subject
  void webhook.data.subject;
  return webhook.event.startsWith("message.") && "subject" in webhook.data
    ? `${webhook.data.subject} from ${webhook.data.from} to ${webhook.data.to.join(", ")}`
    : messageId;
}

export async function ids(): Promise<string[]> {
  const event: WebhookEvent = verifyEvent(secret, headers, body);
  const fromWeb: WebhookEvent<"message.sent" | "message.bounced"> | WebhookEvent = await web.verifyEvent(secret, headers, body);
  const envelope: WebhookEnvelope = verify(secret, headers, body);
  // @ts-expect-error verify returns the body as sent, without the event id
  void envelope.id;
  // An event is an envelope too.
  const asEnvelope: WebhookEnvelope = event;
  const kind: WebhookEventType = asEnvelope.event;
  if (event.event === "message.bounced") void (event.data.bounceCode satisfies string);
  // @ts-expect-error the event id is a string, never absent
  const missing: undefined = event.id;
  void missing;
  return [event.id, fromWeb.id, kind];
}

/** One kind's envelope. */
export const bounced: WebhookEnvelope<"message.bounced">["data"]["bounceType"] = "hard";
