/**
 * The six email event kinds of the specification ("Events" table). The order is the
 * specification's and is used wherever kinds are listed.
 */
export const EVENT_TYPES = [
  "message.sent",
  "message.delivered",
  "message.opened",
  "message.clicked",
  "message.received",
  "message.bounced",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** The envelope `event` of the test event sent when a webhook is created (CONTRACT.md 6). */
export const TEST_EVENT_TYPE = "webhook.test";

/**
 * The most bytes the envelope of any event may take (CONTRACT.md section 5): 10 MiB. Ingest
 * refuses an event whose envelope would be larger (413 payload_too_large); it never cuts one.
 */
export const ENVELOPE_MAX_BYTES = 10 * 1024 * 1024;
