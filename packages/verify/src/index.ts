import { createHmac, timingSafeEqual } from "node:crypto";
import { checkRequest, parseEnvelope, signatureMismatch, type HeadersInput, type RawBody, type VerifyOptions, type WebhookEnvelope } from "./core.js";

/**
 * @mailhooks/verify: checks that a request comes from the email event webhooks service.
 * Node variant (node:crypto, synchronous); `@mailhooks/verify/web` is the same on Web Crypto.
 *
 * The service sends `X-Service-Timestamp: <Unix seconds>` and
 * `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256>` over `<timestamp>.<raw body>`,
 * keyed with the webhook secret's UTF-8 bytes.
 */

export {
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  DEFAULT_TOLERANCE_SECONDS,
  WebhookVerificationError,
  isWebhookVerificationError,
} from "./core.js";
export type { WebhookVerificationErrorCode, WebhookEnvelope, HeadersInput, HeadersLike, RawBody, VerifyOptions } from "./core.js";

/**
 * Verifies a request and returns its parsed envelope `{event, timestamp, data}`.
 *
 * - `secret`: the webhook secret, or several (during a rotation, the old and the new one): the
 *   request passes when any one of them signed it.
 * - `headers`: Node's `req.headers`, a fetch `Headers` or a plain record (any case).
 * - `rawBody`: the body exactly as received (Buffer, Uint8Array, ArrayBuffer, or a string taken as UTF-8).
 * - `options.toleranceSeconds` (default 300) and `options.now` (Unix seconds or Date, default now).
 *
 * Throws WebhookVerificationError (`code`: missing_header, invalid_timestamp,
 * timestamp_out_of_tolerance, invalid_signature, invalid_payload) for a request to refuse, and
 * TypeError for wrong arguments, e.g. a body that was already parsed into an object.
 */
export function verify(secret: string | readonly string[], headers: HeadersInput, rawBody: RawBody, options: VerifyOptions = {}): WebhookEnvelope {
  const request = checkRequest(secret, headers, rawBody, options);
  const received = Buffer.from(request.signatureHex, "hex");
  let matched = false;
  // Every secret is tried, so the time taken does not tell which one matched.
  for (const key of request.secrets) {
    const expected = createHmac("sha256", Buffer.from(key, "utf8")).update(`${request.timestamp}.`, "utf8").update(request.body).digest();
    if (timingSafeEqual(expected, received)) matched = true;
  }
  if (!matched) throw signatureMismatch(request.secrets.length);
  return parseEnvelope(request.body);
}
