import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Webhook signatures (spec "Webhook signatures"; CONTRACT.md section 6).
 *
 * The signed message is `<X-Service-Timestamp>.<body>`, the MAC is HMAC-SHA256 keyed with the
 * webhook secret's UTF-8 bytes, and the header value is `sha256=<lowercase hex>`.
 */

export const SIGNATURE_HEADER = "X-Service-Signature";
export const TIMESTAMP_HEADER = "X-Service-Timestamp";

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

export interface VerifyInput {
  secret: string;
  /** The X-Service-Timestamp header as received. */
  timestamp: string | undefined;
  /** The X-Service-Signature header as received. */
  signature: string | undefined;
  /** The raw request body, exactly as received (never a re-serialized object). */
  body: string | Buffer;
  /** When set, a timestamp further than this many seconds from `now` is rejected. */
  toleranceSeconds?: number;
  /** Unix seconds; defaults to the current time. */
  now?: number;
}

/**
 * Receiver-side check: recomputes the signature and compares it in constant time.
 * Returns false (never throws) on a missing or malformed header, a mismatch, or a timestamp
 * outside the tolerance window.
 */
export function verifySignature(input: VerifyInput): boolean {
  const { secret, timestamp, signature, body } = input;
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return false;
  if (input.toleranceSeconds !== undefined) {
    const now = input.now ?? Math.floor(Date.now() / 1000);
    if (Math.abs(now - Number(timestamp)) > input.toleranceSeconds) return false;
  }
  const expected = Buffer.from(signPayload(secret, timestamp, body), "utf8");
  const received = Buffer.from(signature, "utf8");
  return expected.length === received.length && timingSafeEqual(expected, received);
}
