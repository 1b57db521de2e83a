import { EMAIL_EVENT_TYPES, OPERATIONAL_EVENT_TYPES, type EmailEventType, type OperationalEventType } from "@mailhooks/verify";

/**
 * The six email event kinds of the specification ("Events" table), in its order, used wherever
 * kinds are listed. Declared once, by @mailhooks/verify (which receivers install and which keeps no
 * dependency), so that the service and its receivers' library cannot disagree.
 */
export const EVENT_TYPES = EMAIL_EVENT_TYPES;

export type EventType = EmailEventType;

/**
 * The operational kinds (docs/api.md, "Operational events"): events of the account about its
 * webhooks, which a webhook subscribes to like the six kinds. Declared by @mailhooks/verify too.
 */
export { OPERATIONAL_EVENT_TYPES };
export type { OperationalEventType };

/** Every kind a webhook may subscribe to: the six email kinds, then the operational ones. */
export const SUBSCRIBABLE_EVENT_TYPES = [...EMAIL_EVENT_TYPES, ...OPERATIONAL_EVENT_TYPES] as const;
export type SubscribableEventType = EventType | OperationalEventType;

/** Whether `kind` is an operational kind. */
export function isOperationalEventType(kind: string): kind is OperationalEventType {
  return (OPERATIONAL_EVENT_TYPES as readonly string[]).includes(kind);
}

/** The envelope `event` of the test event sent when a webhook is created (docs/api.md, "Test events"). */
export const TEST_EVENT_TYPE = "webhook.test";

/**
 * The most bytes the envelope of any event may take (docs/api.md, "Limits"): 10 MiB. Ingest
 * refuses an event whose envelope would be larger (413 payload_too_large); it never cuts one.
 */
export const ENVELOPE_MAX_BYTES = 10 * 1024 * 1024;
