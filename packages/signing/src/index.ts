import { createHmac } from "node:crypto";

/**
 * Webhook signatures (spec "Webhook signatures"; docs/receivers/standard-webhooks.md), in the
 * two schemes a webhook chooses between (`signature_scheme`):
 *
 * - `service`: the signed message is `<X-Service-Timestamp>.<body>`, the MAC is HMAC-SHA256
 *   keyed with the webhook secret's UTF-8 bytes, and the header value is `sha256=<lowercase hex>`.
 * - `standard` (Standard Webhooks, https://www.standardwebhooks.com): the signed message is
 *   `<webhook-id>.<webhook-timestamp>.<body>`, the MAC is HMAC-SHA256 keyed with the bytes the
 *   secret's base64 (after `whsec_`) decodes to, and the header value is one `v1,<base64 MAC>`
 *   per signing secret, separated by spaces.
 *
 * Receivers (and tests acting as one) verify with @mailhooks/verify, or, for `standard`, with the
 * official `standardwebhooks` libraries.
 */

export const SIGNATURE_HEADER = "X-Service-Signature";
export const TIMESTAMP_HEADER = "X-Service-Timestamp";
/**
 * The event's id on every request (docs/receivers/standard-webhooks.md): the same on each retry
 * and replay of one event, so receivers de-duplicate on it; a test request carries its delivery
 * row's id. Sent under both schemes.
 */
export const EVENT_ID_HEADER = "X-Service-Event-Id";

/** Standard Webhooks' headers, lower-case as the specification writes them. */
export const STANDARD_ID_HEADER = "webhook-id";
export const STANDARD_TIMESTAMP_HEADER = "webhook-timestamp";
export const STANDARD_SIGNATURE_HEADER = "webhook-signature";

/** How a webhook's requests can be signed: its `signature_scheme`. */
export const SIGNATURE_SCHEMES = ["service", "standard"] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

/** The prefix of every webhook secret. */
export const SECRET_PREFIX = "whsec_";

/** Canonical standard base64: the A-Z a-z 0-9 + / alphabet, `=` padding to a multiple of 4. */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The HMAC key of a secret under the `standard` scheme: the bytes that the canonical standard
 * base64 after `whsec_` decodes to; null for any other secret (no prefix, the URL-safe alphabet
 * of secrets made before the rule, missing padding, nothing after the prefix). Canonical means
 * that encoding the bytes again gives the same text, so every decoder reads the same bytes.
 */
export function standardSecretKey(secret: string): Buffer | null {
  if (!secret.startsWith(SECRET_PREFIX)) return null;
  const text = secret.slice(SECRET_PREFIX.length);
  if (text === "" || !STANDARD_BASE64.test(text)) return null;
  const key = Buffer.from(text, "base64");
  return key.toString("base64") === text ? key : null;
}

/** Whether `secret` can sign under the `standard` scheme (see standardSecretKey). */
export function isStandardSecret(secret: string): boolean {
  return standardSecretKey(secret) !== null;
}

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

/**
 * The Standard Webhooks signature of `body` (the exact bytes sent) with `id` (webhook-id) and
 * `timestamp` (webhook-timestamp, Unix seconds): `v1,<base64>` per secret of `secrets` that is a
 * standard secret (standardSecretKey), in their order, separated by one space. A secret that is
 * not one is left out: it can make no signature a Standard Webhooks receiver could check.
 * @throws Error when none of `secrets` is a standard secret
 */
export function signStandard(secrets: readonly string[], id: string, timestamp: string | number, body: string | Buffer): string {
  const signatures: string[] = [];
  for (const secret of secrets) {
    const key = standardSecretKey(secret);
    if (key === null) continue;
    const mac = createHmac("sha256", key);
    mac.update(`${id}.${timestamp}.`, "utf8");
    mac.update(body);
    signatures.push(`v1,${mac.digest("base64")}`);
  }
  if (signatures.length === 0) throw new Error("no secret of this webhook is a standard secret (whsec_ and standard base64)");
  return signatures.join(" ");
}

/**
 * What signs one request: under `service` the one secret that signs at that moment; under
 * `standard` every secret that signs at that moment (both during a rotation's grace, the previous
 * one first).
 */
export type RequestSigning = { scheme: "service"; secret: string } | { scheme: "standard"; secrets: readonly string[] };

/**
 * The signature headers of one request, besides X-Service-Event-Id (sent under both schemes):
 * `service`: X-Service-Timestamp and X-Service-Signature; `standard`: webhook-id (`eventId`),
 * webhook-timestamp and webhook-signature. `timestamp` is Unix seconds at sending.
 * @throws Error from signStandard when no secret of a `standard` signing is a standard secret
 */
export function signatureHeaders(
  signing: RequestSigning,
  eventId: string,
  timestamp: string | number,
  body: string | Buffer,
): Record<string, string> {
  if (signing.scheme === "service") {
    return { [TIMESTAMP_HEADER]: String(timestamp), [SIGNATURE_HEADER]: signPayload(signing.secret, timestamp, body) };
  }
  return {
    [STANDARD_ID_HEADER]: eventId,
    [STANDARD_TIMESTAMP_HEADER]: String(timestamp),
    [STANDARD_SIGNATURE_HEADER]: signStandard(signing.secrets, eventId, timestamp, body),
  };
}

/** The User-Agent of every delivery request. */
export const USER_AGENT = "mailhooks-dispatcher/1";

/**
 * Every header of one delivery request of `body` (docs/receivers.md), names lower-case: the
 * webhook's own headers (`own`, decrypted), then the service's, which win over an own header of
 * the same name (the API refuses those names anyway): Content-Type, X-Service-Event-Id
 * (`eventId`) and the signature headers of `signing`'s scheme over `timestamp` (Unix seconds).
 * The same set whether the dispatcher sends the request or a listen webhook's developer pulls it
 * (docs/develop-locally.md). Content-Length is the sender's.
 * @throws Error from signStandard (see signatureHeaders)
 */
export function deliveryHeaders(input: {
  signing: RequestSigning;
  eventId: string;
  body: string | Buffer;
  own?: Record<string, string>;
  timestamp: number;
}): Record<string, string> {
  const headers: Record<string, string> = { "user-agent": USER_AGENT };
  for (const [name, value] of Object.entries(input.own ?? {})) headers[name.toLowerCase()] = value;
  headers["content-type"] = "application/json";
  headers[EVENT_ID_HEADER.toLowerCase()] = input.eventId;
  for (const [name, value] of Object.entries(signatureHeaders(input.signing, input.eventId, input.timestamp, input.body)))
    headers[name.toLowerCase()] = value;
  return headers;
}
