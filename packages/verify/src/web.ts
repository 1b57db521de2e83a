import { checkRequest, verifiedEnvelope, verifiedEvent } from "./core.js";
import type { HeadersInput, RawBody, SecretInput, SignedRequest, VerifyOptions } from "./core.js";
import type { WebhookEnvelope, WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify/web: the same verification on Web Crypto (`crypto.subtle`), for edge
 * runtimes (Cloudflare Workers, Vercel Edge, Deno, Bun, browsers) and Node 20+. Imports nothing
 * from Node. Same arguments, checks and error codes as the Node variant, but asynchronous.
 */

export * from "./shared-exports.js";

const encoder = new TextEncoder();

// Not exported, and typed by inference: Web Crypto wants ArrayBuffer-backed views, and the
// public declarations stay readable by TypeScript versions without generic typed arrays.
function hexBytes(hex: string) {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** The signed message: the timestamp header's exact text, a period, then the body's bytes. */
function signedMessage(timestamp: string, body: Uint8Array) {
  const prefix = encoder.encode(`${timestamp}.`);
  const message = new Uint8Array(prefix.length + body.length);
  message.set(prefix, 0);
  message.set(body, prefix.length);
  return message;
}

/** Whether one of the request's secrets produced its signature (Web Crypto). */
async function macMatches(request: SignedRequest): Promise<boolean> {
  const message = signedMessage(request.timestamp, request.body);
  const signature = hexBytes(request.signatureHex);
  let matched = false;
  // subtle.verify compares in constant time; every secret is tried so that timing does not tell which matched.
  for (const key of request.secrets) {
    const hmacKey = await crypto.subtle.importKey("raw", encoder.encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
    if (await crypto.subtle.verify("HMAC", hmacKey, signature, message)) matched = true;
  }
  return matched;
}

/**
 * Verifies a request and resolves to its parsed envelope `{event, timestamp, data}`, typed by
 * `event`. Arguments as in the Node `verify` (secret or secrets, headers, raw body,
 * `{toleranceSeconds, now}`). Rejects with WebhookVerificationError (missing_header,
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
 * `X-Service-Event-Id` header (docs/receivers.md), the key to process each event once. A
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
