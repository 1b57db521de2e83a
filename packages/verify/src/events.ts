/**
 * The envelopes the service sends, typed by kind: a union discriminated on `event`, so that
 * `switch (webhook.event)` narrows `data` to that kind's fields. The six email kinds follow the
 * specification's tables ("data fields common to all six event kinds" and "Additional data
 * fields per event kind"); `webhook.test` is the test request of docs/api.md, "Test events".
 *
 * Declared here, where the service's own packages/events takes the kinds from, so that the
 * package keeps no dependency and the two cannot disagree. Types only: the
 * signature vouches for the sender, and `verify` checks the envelope's shape (`event` a string,
 * `timestamp` a number, `data` an object), not each field of `data`.
 */

/** The six email event kinds, in the specification's order. */
export const EMAIL_EVENT_TYPES = [
  "message.sent",
  "message.delivered",
  "message.opened",
  "message.clicked",
  "message.received",
  "message.bounced",
] as const;

/** One of the six email event kinds a webhook subscribes to. */
export type EmailEventType = (typeof EMAIL_EVENT_TYPES)[number];

/**
 * The operational event kinds: what the service tells a webhook subscribed to them about the
 * account's other webhooks (one failing, recovered or disabled; a destination that failed for good).
 */
export const OPERATIONAL_EVENT_TYPES = ["webhook.failing", "webhook.recovered", "webhook.disabled", "destination.failed"] as const;

/** One of the operational event kinds. */
export type OperationalEventType = (typeof OPERATIONAL_EVENT_TYPES)[number];

/** Every `event` a receiver gets: the six email kinds, the operational kinds, and `webhook.test`. */
export type WebhookEventType = EmailEventType | OperationalEventType | "webhook.test";

/** The fields every email event's `data` has. */
export interface CommonEventData {
  /** The message's Message-ID, angle-bracketed. Shared by every event of that message: not unique per event. */
  messageId: string;
  threadId: string;
  inboxId: string;
  /** An RFC 5322 address, bare or with a display name (`""` in a bounce that does not name the sender). */
  from: string;
  to: string[];
  subject: string;
}

export interface MessageSentData extends CommonEventData {
  status: "sent";
}

export interface MessageDeliveredData extends CommonEventData {
  status: "delivered";
  /** ISO 8601 UTC timestamp. */
  deliveredAt: string;
}

export interface MessageOpenedData extends CommonEventData {
  openCount: number;
  /** ISO 8601 UTC timestamp. */
  openedAt: string;
}

export interface MessageClickedData extends CommonEventData {
  /** The clicked link. */
  url: string;
  clickCount: number;
  /** ISO 8601 UTC timestamp. */
  clickedAt: string;
}

export interface MessageReceivedData extends CommonEventData {
  /** The message's text. */
  body: string;
  /** Angle-bracketed Message-IDs as the message's headers carry them; `""` when a header is absent. */
  headers: { messageId: string; inReplyTo: string; references: string };
}

export interface MessageBouncedData extends CommonEventData {
  /** `hard` (5.x.x) or `soft` (4.x.x); other values may come. */
  bounceType: string;
  /** The SMTP-style status, e.g. `5.1.1`. */
  bounceCode: string;
  bounceMessage: string;
  /** ISO 8601 UTC timestamp. */
  bouncedAt: string;
}

/** The test request sent when a webhook is created, or by `POST /v1/webhooks/{id}/test`. */
export interface WebhookTestData {
  webhookId: string;
  /** The webhook's URL (null for a listen webhook, whose requests are pulled). */
  url: string | null;
  /** Absent: a test request is about no message. Declared so that `data.messageId` reads on every kind. */
  messageId?: undefined;
}

/** webhook.failing: a webhook's attempts failed 5 times in a row (made once, until it recovers). */
export interface WebhookFailingData {
  webhookId: string;
  /** Its URL (null for a listen webhook). */
  url: string | null;
  /** ISO 8601 UTC timestamp: when its attempts started failing. */
  failingSince: string;
  consecutiveFailures: number;
  /** The last failed attempt's status (null when no response came) and error code (null when a response came). */
  lastStatus: number | null;
  lastError: string | null;
  messageId?: undefined;
}

/** webhook.recovered: the first 2xx of a webhook after its webhook.failing. */
export interface WebhookRecoveredData {
  webhookId: string;
  url: string | null;
  /** ISO 8601 UTC timestamps. */
  failingSince: string;
  recoveredAt: string;
  messageId?: undefined;
}

/** webhook.disabled: a webhook was disabled, by a person (`manual`), because every attempt failed (`failing`), or, a listen webhook, because nobody pulled it (`idle`). */
export interface WebhookDisabledData {
  webhookId: string;
  url: string | null;
  reason: "failing" | "manual" | "idle";
  messageId?: undefined;
}

/** destination.failed: an event's delivery to a webhook failed for good (its retries exhausted). */
export interface DestinationFailedData {
  eventId: string;
  /** The event's kind. */
  eventType: string;
  webhookId: string;
  url: string | null;
  /** Attempts made (the initial one and the retries). */
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  messageId?: undefined;
}

/** The `data` of each kind of `event`. */
export interface WebhookEventDataMap {
  "message.sent": MessageSentData;
  "message.delivered": MessageDeliveredData;
  "message.opened": MessageOpenedData;
  "message.clicked": MessageClickedData;
  "message.received": MessageReceivedData;
  "message.bounced": MessageBouncedData;
  "webhook.failing": WebhookFailingData;
  "webhook.recovered": WebhookRecoveredData;
  "webhook.disabled": WebhookDisabledData;
  "destination.failed": DestinationFailedData;
  "webhook.test": WebhookTestData;
}

/**
 * The body the service sends: compact JSON `{"event","timestamp","data"}`, `timestamp` the
 * event's Unix seconds. Without an argument, the union of every kind (narrow it on `event`);
 * `WebhookEnvelope<"message.bounced">` is one kind's.
 */
export type WebhookEnvelope<Event extends WebhookEventType = WebhookEventType> = {
  [E in Event]: { event: E; timestamp: number; data: WebhookEventDataMap[E] };
}[Event];

/**
 * A verified request as `verifyEvent` and the adapters give it: the envelope's fields and `id`,
 * the `X-Service-Event-Id` header (docs/receivers.md, "The request"). The id is the same on every retry and
 * replay of one event (a test request carries its own), so it is the key to process each event
 * once; `data.messageId` is not (every event of one message shares it).
 */
export type WebhookEvent<Event extends WebhookEventType = WebhookEventType> = WebhookEnvelope<Event> & { id: string };
