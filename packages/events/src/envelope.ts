import { eventDataSchemas } from "./schemas.js";
import { ENVELOPE_MAX_BYTES, TEST_EVENT_TYPE, type EventType } from "./kinds.js";

/**
 * The webhook request envelope (spec "Webhook request envelope"; docs/receivers.md):
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

/** An envelope over ENVELOPE_MAX_BYTES (docs/api.md, "Limits": refused with 413, never cut). */
export class EnvelopeTooLargeError extends Error {
  override name = "EnvelopeTooLargeError";
  constructor(readonly bytes: number) {
    super(`the event's envelope would take ${bytes} bytes, over the limit of ${ENVELOPE_MAX_BYTES} bytes (10 MiB)`);
  }
}

function envelopeOf(eventType: EventType, occurredAt: Date, data: Record<string, unknown>): Envelope {
  return { event: eventType, timestamp: unixSeconds(occurredAt), data: orderEventData(eventType, data) };
}

/**
 * The exact byte length (UTF-8) of the envelope `buildEnvelope` would make, computed without
 * making it: a message body of control characters grows six-fold in JSON (`\u0001`), so the
 * serialized envelope can be far larger than the input, and building it to measure it is the
 * cost to avoid. `data` need not be valid yet.
 */
export function envelopeByteLength(eventType: EventType, occurredAt: Date, data: Record<string, unknown>): number {
  return jsonByteLength(envelopeOf(eventType, occurredAt, data));
}

/**
 * Serializes the envelope of an email event. `data` must already be valid for `eventType`.
 * Returns the exact body that is stored, signed and sent.
 * @throws EnvelopeTooLargeError when it would take more than ENVELOPE_MAX_BYTES (checked before
 *   it is built; ingest refuses such an event earlier with 413)
 */
export function buildEnvelope(eventType: EventType, occurredAt: Date, data: Record<string, unknown>): string {
  const envelope = envelopeOf(eventType, occurredAt, data);
  const bytes = jsonByteLength(envelope);
  if (bytes > ENVELOPE_MAX_BYTES) throw new EnvelopeTooLargeError(bytes);
  return JSON.stringify(envelope);
}

/** UTF-8 bytes of `JSON.stringify(value)` for a JSON value (undefined members left out, as JSON.stringify does). */
export function jsonByteLength(value: unknown): number {
  if (typeof value === "string") return jsonStringByteLength(value);
  if (value === null || typeof value === "number" || typeof value === "boolean") return JSON.stringify(value).length;
  if (Array.isArray(value)) {
    let bytes = 2 + Math.max(0, value.length - 1);
    for (const item of value) bytes += item === undefined || typeof item === "function" ? 4 : jsonByteLength(item);
    return bytes;
  }
  if (typeof value === "object") {
    if (typeof (value as { toJSON?: unknown }).toJSON === "function") return jsonByteLength((value as { toJSON: () => unknown }).toJSON());
    let bytes = 2;
    let members = 0;
    for (const [key, member] of Object.entries(value)) {
      if (member === undefined || typeof member === "function") continue;
      bytes += (members++ > 0 ? 1 : 0) + jsonStringByteLength(key) + 1 + jsonByteLength(member);
    }
    return bytes;
  }
  return 0;
}

// Characters JSON.stringify writes as themselves in one UTF-8 byte.
const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** UTF-8 bytes of `JSON.stringify(text)`: quotes, escapes (`\n`, `\u0001`, lone surrogates `\ud800`) included. */
function jsonStringByteLength(text: string): number {
  if (PLAIN_ASCII.test(text)) return text.length + 2;
  let bytes = 2;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x20) bytes += unit === 0x08 || unit === 0x09 || unit === 0x0a || unit === 0x0c || unit === 0x0d ? 2 : 6;
    else if (unit === 0x22 || unit === 0x5c) bytes += 2;
    else if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4;
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

/** Serializes the test event envelope sent once when a webhook is created (docs/api.md, "Test events"); `url` null for a listen webhook. */
export function buildTestEnvelope(webhookId: string, url: string | null, at: Date): string {
  const envelope: Envelope = { event: TEST_EVENT_TYPE, timestamp: unixSeconds(at), data: { webhookId, url } };
  return JSON.stringify(envelope);
}
