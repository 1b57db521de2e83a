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
