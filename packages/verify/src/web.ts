import { anyMatch, checkRequest, verifiedEnvelope, verifiedEvent } from "./core.js";
import type { RawBody, SecretInput, VerifyOptions } from "./arguments.js";
import type { SignedRequest } from "./core.js";
import type { HeadersInput } from "./headers.js";
import type { WebhookEnvelope, WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify/web: the same verification on Web Crypto (`crypto.subtle`), for edge
 * runtimes (Cloudflare Workers, Vercel Edge, Deno, Bun, browsers) and Node 20+. Imports nothing
 * from Node. Same arguments, checks and error codes as the Node variant, but asynchronous.
 */

export * from "./shared-exports.js";

const encoder = new TextEncoder();

/** The signed message: the prefix (`<timestamp>.`, or `<id>.<timestamp>.`), then the body's bytes. */
function signedMessage(prefix: string, body: Uint8Array) {
  const head = encoder.encode(prefix);
  const message = new Uint8Array(head.length + body.length);
  message.set(head, 0);
  message.set(body, head.length);
  return message;
}

/** Whether one of the request's secrets produced one of its signatures (Web Crypto; compared in constant time). */
async function macMatches(request: SignedRequest): Promise<boolean> {
  const message = signedMessage(request.signedPrefix, request.body);
  const computed: Uint8Array[] = [];
  for (const key of request.keys) {
    // A copy: Web Crypto wants an ArrayBuffer-backed view.
    const hmacKey = await crypto.subtle.importKey("raw", new Uint8Array(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    computed.push(new Uint8Array(await crypto.subtle.sign("HMAC", hmacKey, message)));
  }
  return anyMatch(computed, request.signatures);
}

/**
 * Verifies a request and resolves to its parsed envelope `{event, timestamp, data}`, typed by
 * `event`. Arguments as in the Node `verify` (secret or secrets, headers, raw body,
 * `{toleranceSeconds, now, scheme}`). Rejects with WebhookVerificationError (missing_header,
 * invalid_timestamp, timestamp_out_of_tolerance, invalid_signature, invalid_payload) or
 * TypeError for wrong arguments.
 */
export async function verify(
  secret: SecretInput,
  headers: HeadersInput,
  rawBody: RawBody,
  options: VerifyOptions = {},
): Promise<WebhookEnvelope> {
  const request = checkRequest(secret, headers, rawBody, options);
  return verifiedEnvelope(request, await macMatches(request));
}

/**
 * `verify`, plus the event id: resolves to `{id, event, timestamp, data}`, `id` being the
 * `X-Service-Event-Id` header (webhook-id under `standard`), the key to process each event once. A
 * request without that header is refused with `missing_header`.
 */
export async function verifyEvent(
  secret: SecretInput,
  headers: HeadersInput,
  rawBody: RawBody,
  options: VerifyOptions = {},
): Promise<WebhookEvent> {
  const request = checkRequest(secret, headers, rawBody, options, true);
  return verifiedEvent(request, await macMatches(request));
}
