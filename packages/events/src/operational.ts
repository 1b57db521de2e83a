import { EVENT_TYPES, isOperationalEventType, type EventType, type OperationalEventType } from "./kinds.js";
import { buildTestEnvelope, unixSeconds, type Envelope } from "./envelope.js";
import { buildExampleEnvelope } from "./examples.js";

/**
 * Operational events (docs/api.md, "Operational events"): their `data` keys in the order the
 * envelope carries them, the envelope itself, and one example of each (the OpenAPI document's,
 * and what a test request of that kind sends).
 */

/** Each operational kind's `data` keys, in order. */
export const OPERATIONAL_DATA_KEYS: { [K in OperationalEventType]: readonly string[] } = {
  "webhook.failing": ["webhookId", "url", "failingSince", "consecutiveFailures", "lastStatus", "lastError"],
  "webhook.recovered": ["webhookId", "url", "failingSince", "recoveredAt"],
  "webhook.disabled": ["webhookId", "url", "reason"],
  "destination.failed": ["eventId", "eventType", "webhookId", "url", "attempts", "lastStatus", "lastError"],
};

/**
 * The envelope of an operational event: compact JSON `{"event","timestamp","data"}`, `data` in the
 * kind's key order (a key missing from `data` is written as null). Returns the exact bytes sent.
 */
export function buildOperationalEnvelope(kind: OperationalEventType, occurredAt: Date, data: Record<string, unknown>): string {
  const ordered: Record<string, unknown> = {};
  for (const key of OPERATIONAL_DATA_KEYS[kind]) ordered[key] = data[key] ?? null;
  const envelope: Envelope = { event: kind, timestamp: unixSeconds(occurredAt), data: ordered };
  return JSON.stringify(envelope);
}

/** One example `data` of each operational kind. */
export const OPERATIONAL_EXAMPLES: { [K in OperationalEventType]: Record<string, unknown> } = {
  "webhook.failing": {
    webhookId: "wh_0193a7c25b1e7c3d9f001a2b3c4d5e6f",
    url: "https://receiver.example.com/hooks",
    failingSince: "2026-11-22T10:00:00.000Z",
    consecutiveFailures: 5,
    lastStatus: 503,
    lastError: null,
  },
  "webhook.recovered": {
    webhookId: "wh_0193a7c25b1e7c3d9f001a2b3c4d5e6f",
    url: "https://receiver.example.com/hooks",
    failingSince: "2026-11-22T10:00:00.000Z",
    recoveredAt: "2026-11-22T10:20:00.000Z",
  },
  "webhook.disabled": {
    webhookId: "wh_0193a7c25b1e7c3d9f001a2b3c4d5e6f",
    url: "https://receiver.example.com/hooks",
    reason: "manual",
  },
  "destination.failed": {
    eventId: "evt_0193a7c25b1e7c3d9f001a2b3c4d5e70",
    eventType: "message.delivered",
    webhookId: "wh_0193a7c25b1e7c3d9f001a2b3c4d5e6f",
    url: "https://receiver.example.com/hooks",
    attempts: 4,
    lastStatus: null,
    lastError: "timeout",
  },
};

/**
 * The envelope of a test request (docs/api.md, "Test events"), built when it is sent (or pulled):
 * `webhook.test` (`eventType` null) with `data: {webhookId, url}`; for one of the six kinds, its
 * example with a fresh messageId; for an operational kind, its example about this webhook. `url`
 * is null for a listen webhook.
 * @throws Error for an `eventType` of no known kind
 */
export function buildTestDeliveryEnvelope(test: { eventType: string | null; webhookId: string; url: string | null }, at: Date): string {
  if (test.eventType === null) return buildTestEnvelope(test.webhookId, test.url, at);
  if ((EVENT_TYPES as readonly string[]).includes(test.eventType)) return buildExampleEnvelope(test.eventType as EventType, at);
  if (isOperationalEventType(test.eventType))
    return buildOperationalEnvelope(test.eventType, at, {
      ...OPERATIONAL_EXAMPLES[test.eventType],
      webhookId: test.webhookId,
      url: test.url,
    });
  throw new Error(`a test of an unknown event_type: ${JSON.stringify(test.eventType)}`);
}
