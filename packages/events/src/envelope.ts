import { eventDataSchemas } from "./schemas.js";
import { TEST_EVENT_TYPE, type EventType } from "./kinds.js";

/**
 * The webhook request envelope (spec "Webhook request envelope"; CONTRACT.md section 6):
 * compact JSON `{"event","timestamp","data"}` in that order, `timestamp` in Unix seconds.
 * `data` keys are emitted in the specification's order whatever order the caller used,
 * because receivers verify signatures over these exact bytes.
 */
export interface Envelope {
  event: string;
  timestamp: number;
  data: Record<string, unknown>;
}

/** Unix seconds (integer) of a Date. */
export function unixSeconds(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

/** Copies `data` with its keys in the order of `shapeKeys`, nested objects included. */
function ordered(data: Record<string, unknown>, shapeKeys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of shapeKeys) if (key in data) out[key] = data[key];
  return out;
}

/** Orders validated email event data as the specification's tables list the fields. */
export function orderEventData(eventType: EventType, data: Record<string, unknown>): Record<string, unknown> {
  const schema = eventDataSchemas[eventType];
  const result = ordered(data, Object.keys(schema.shape));
  if (eventType === "message.received" && result.headers && typeof result.headers === "object") {
    result.headers = ordered(result.headers as Record<string, unknown>, ["messageId", "inReplyTo", "references"]);
  }
  return result;
}

/**
 * Serializes the envelope of an email event. `data` must already be valid for `eventType`.
 * Returns the exact body that is stored, signed and sent.
 */
export function buildEnvelope(eventType: EventType, occurredAt: Date, data: Record<string, unknown>): string {
  const envelope: Envelope = { event: eventType, timestamp: unixSeconds(occurredAt), data: orderEventData(eventType, data) };
  return JSON.stringify(envelope);
}

/** Serializes the test event envelope sent once when a webhook is created (CONTRACT.md 6). */
export function buildTestEnvelope(webhookId: string, url: string, at: Date): string {
  const envelope: Envelope = { event: TEST_EVENT_TYPE, timestamp: unixSeconds(at), data: { webhookId, url } };
  return JSON.stringify(envelope);
}
