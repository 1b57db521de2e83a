import { createHmac } from "node:crypto";

/**
 * Webhook signatures (spec "Webhook signatures"; docs/receivers.md).
 *
 * The signed message is `<X-Service-Timestamp>.<body>`, the MAC is HMAC-SHA256 keyed with the
 * webhook secret's UTF-8 bytes, and the header value is `sha256=<lowercase hex>`. Receivers
 * (and tests acting as one) verify with @mailhooks/verify, the one verifier this project ships.
 */

export const SIGNATURE_HEADER = "X-Service-Signature";
export const TIMESTAMP_HEADER = "X-Service-Timestamp";
/**
 * The event's id on every request (docs/receivers.md, "The request"): the same on each retry and replay of
 * one event, so receivers de-duplicate on it; a test request carries its delivery row's id.
 */
export const EVENT_ID_HEADER = "X-Service-Event-Id";

/**
 * Signs `body` (the exact bytes sent) for `timestamp` (the exact X-Service-Timestamp value,
 * Unix seconds). Returns the X-Service-Signature header value.
 */
export function signPayload(secret: string, timestamp: string | number, body: string | Buffer): string {
  const mac = createHmac("sha256", Buffer.from(secret, "utf8"));
  mac.update(`${timestamp}.`, "utf8");
  mac.update(body);
  return `sha256=${mac.digest("hex")}`;
}
