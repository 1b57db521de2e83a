import { createHmac, timingSafeEqual } from "node:crypto";
import { anyMatch, checkRequest, verifiedEnvelope, verifiedEvent } from "./core.js";
import type { RawBody, SecretInput, VerifyOptions } from "./arguments.js";
import type { SignedRequest } from "./core.js";
import type { HeadersInput } from "./headers.js";
import type { WebhookEnvelope, WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify: checks that a request comes from the email event webhooks service.
 * Node variant (node:crypto, synchronous); `@mailhooks/verify/web` is the same on Web Crypto.
 *
 * The service sends `X-Service-Timestamp: <Unix seconds>` and
 * `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256>` over `<timestamp>.<raw body>`,
 * keyed with the webhook secret's UTF-8 bytes, and `X-Service-Event-Id: <event id>`; or, for a
 * webhook whose `signature_scheme` is `standard` (verify with `{scheme: "standard"}`), the
 * Standard Webhooks headers webhook-id, webhook-timestamp and webhook-signature.
 */

export * from "./shared-exports.js";

/** Whether one of the request's secrets produced one of its signatures (node:crypto, constant time). */
function macMatches(request: SignedRequest): boolean {
  const computed = request.keys.map((key) => createHmac("sha256", key).update(request.signedPrefix, "utf8").update(request.body).digest());
  // Every pair is compared, so the time taken does not tell which one matched.
  return anyMatch(computed, request.signatures, (a, b) => a.length === b.length && timingSafeEqual(a, b));
}

/**
 * Verifies a request and returns its parsed envelope `{event, timestamp, data}`: the body
 * exactly as sent, typed by `event` (switch on it to narrow `data`).
 *
 * - `secret`: the webhook secret, or several (during a rotation, the old and the new one): the
 *   request passes when any one of them signed it.
 * - `headers`: Node's `req.headers`, a fetch `Headers` or a plain record (any case).
 * - `rawBody`: the body exactly as received (Buffer, Uint8Array, ArrayBuffer, or a string taken as UTF-8).
 * - `options.toleranceSeconds` (default 300) and `options.now` (Unix seconds or Date, default now).
 * - `options.scheme`: the webhook's `signature_scheme`, `"service"` (default) or `"standard"`
 *   (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature; the secret's base64 is the key).
 *
 * Throws WebhookVerificationError (`code`: missing_header, invalid_timestamp,
 * timestamp_out_of_tolerance, invalid_signature, invalid_payload) for a request to refuse, and
 * TypeError for wrong arguments, e.g. a body that was already parsed into an object.
 * To de-duplicate, use `verifyEvent`, which also returns the event id.
 */
export function verify(secret: SecretInput, headers: HeadersInput, rawBody: RawBody, options: VerifyOptions = {}): WebhookEnvelope {
  const request = checkRequest(secret, headers, rawBody, options);
  return verifiedEnvelope(request, macMatches(request));
}

/**
 * `verify`, plus the event id: returns `{id, event, timestamp, data}`, `id` being the
 * `X-Service-Event-Id` header (webhook-id under `standard`, the same value), the same on every
 * retry and replay of the event. Process each `id` once: deliveries are at least once. Same
 * arguments and errors as `verify`; a request without that header is refused with `missing_header`.
 */
export function verifyEvent(secret: SecretInput, headers: HeadersInput, rawBody: RawBody, options: VerifyOptions = {}): WebhookEvent {
  const request = checkRequest(secret, headers, rawBody, options, true);
  return verifiedEvent(request, macMatches(request));
}
