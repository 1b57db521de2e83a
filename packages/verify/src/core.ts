/**
 * What the Node and the Web Crypto variants share around the MAC: every check that comes before
 * it (checkRequest) and the ones after it (verifiedEnvelope, verifiedEvent), with the `service`
 * signature's format here and the rest in their own modules: the error type
 * (verification-error.ts), reading the headers of either scheme (headers.ts), the secret, raw body
 * and options (arguments.ts), the Standard Webhooks keys and signatures (standard-scheme.ts).
 * Everything runs before or after the MAC, never instead of it, and imports nothing from Node,
 * so that `@mailhooks/verify/web` runs on edge runtimes.
 *
 * Two schemes (a webhook's `signature_scheme`):
 * - `service` (the default): X-Service-Timestamp and X-Service-Signature, `sha256=<hex>` over
 *   `<timestamp>.<body>`, keyed with the secret's UTF-8 bytes;
 * - `standard` (Standard Webhooks, https://www.standardwebhooks.com): webhook-id,
 *   webhook-timestamp and webhook-signature, one or more space-separated `v1,<base64>` over
 *   `<id>.<timestamp>.<body>`, keyed with the bytes the secret's base64 after `whsec_` decodes to.
 *
 * Order of the checks (the same in every implementation and both schemes, so that
 * test-vectors.json has one answer per request): headers present, timestamp well-formed,
 * timestamp within the window, signature well-formed and matching one of the secrets, body a
 * JSON envelope.
 */

import { bodyBytes, nowSeconds, schemeOf, secretList, toleranceOf } from "./arguments.js";
import type { RawBody, SecretInput, VerifyOptions } from "./arguments.js";
import type { WebhookEnvelope, WebhookEvent } from "./events.js";
import { headerNames, readHeader } from "./headers.js";
import type { HeadersInput, SignatureScheme } from "./headers.js";
import { standardKey, standardSignatures } from "./standard-scheme.js";
import { WebhookVerificationError } from "./verification-error.js";

export type { WebhookEnvelope, WebhookEvent } from "./events.js";

/** What both variants need to compute and compare the MAC, once everything else has passed. */
export interface SignedRequest {
  scheme: SignatureScheme;
  /** The HMAC keys, one per secret: its UTF-8 bytes (`service`) or its decoded base64 (`standard`). */
  keys: Uint8Array[];
  /** X-Service-Event-Id (webhook-id under `standard`); undefined when absent (only `verify` under `service` allows that). */
  eventId: string | undefined;
  /** What the MAC covers before the body: `<timestamp>.` or, under `standard`, `<id>.<timestamp>.`. */
  signedPrefix: string;
  /** The received MACs (format already checked): one under `service`, one per `v1` signature under `standard`. */
  signatures: Uint8Array[];
  body: Uint8Array;
}

const encoder = new TextEncoder();
// fatal: a body that is not UTF-8 is refused rather than repaired; ignoreBOM: a BOM stays in
// the text and JSON.parse refuses it, as Python's json and Go's encoding/json do.
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const TIMESTAMP_FORMAT = /^[0-9]{1,12}$/;
const SIGNATURE_FORMAT = /^sha256=([0-9a-f]{64})$/;

function hexBytes(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/**
 * Every check that comes before the MAC, in the documented order, for `options.scheme`.
 * Returns what the MAC needs; throws TypeError for a programming error (bad secret, headers,
 * body or options) and WebhookVerificationError for a request to refuse. Under `standard` the id
 * (webhook-id) is part of the signed message, so it is always needed.
 */
export function checkRequest(
  secret: SecretInput,
  headers: HeadersInput,
  rawBody: RawBody,
  options: VerifyOptions = {},
  needsEventId = false,
): SignedRequest {
  const scheme = schemeOf(options);
  const secrets = secretList(secret);
  const keys = secrets.map((s) => (scheme === "standard" ? standardKey(s) : encoder.encode(s)));
  const body = bodyBytes(rawBody);
  const tolerance = toleranceOf(options);
  const now = nowSeconds(options.now);
  const [timestampName, signatureName, idName] = headerNames(scheme);
  const signatureHeader = readHeader(headers, signatureName);
  const timestamp = readHeader(headers, timestampName);
  if (!timestamp) throw new WebhookVerificationError("missing_header", `missing ${timestampName} header`);
  if (!signatureHeader) throw new WebhookVerificationError("missing_header", `missing ${signatureName} header`);
  const eventId = readHeader(headers, idName) || undefined;
  if ((needsEventId || scheme === "standard") && !eventId) throw new WebhookVerificationError("missing_header", `missing ${idName} header`);
  if (!TIMESTAMP_FORMAT.test(timestamp)) {
    throw new WebhookVerificationError("invalid_timestamp", `${timestampName} must be Unix seconds (digits only)`);
  }
  const age = now - Number(timestamp);
  if (Math.abs(age) > tolerance) {
    const where = age > 0 ? `${age} s in the past` : `${-age} s in the future`;
    throw new WebhookVerificationError(
      "timestamp_out_of_tolerance",
      `${timestampName} is ${where}, beyond the tolerance of ${tolerance} s`,
    );
  }
  if (scheme === "standard") {
    const signatures = standardSignatures(signatureHeader);
    if (signatures.length === 0) {
      throw new WebhookVerificationError(
        "invalid_signature",
        `${signatureName} must hold "v1," followed by the base64 of an HMAC-SHA256 (space-separated when several)`,
      );
    }
    return { scheme, keys, eventId, signedPrefix: `${eventId}.${timestamp}.`, signatures, body };
  }
  const match = SIGNATURE_FORMAT.exec(signatureHeader);
  if (!match) {
    throw new WebhookVerificationError("invalid_signature", `${signatureName} must be "sha256=" followed by 64 lowercase hex digits`);
  }
  return { scheme, keys, eventId, signedPrefix: `${timestamp}.`, signatures: [hexBytes(match[1])], body };
}

/** Whether two MACs are equal, in time that depends on their length only. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

/**
 * Whether any of `computed` (one MAC per secret) is among `received`. Every pair is compared,
 * so that the time taken does not tell which secret or which signature matched.
 */
export function anyMatch(computed: readonly Uint8Array[], received: readonly Uint8Array[], equal = sameBytes): boolean {
  let matched = false;
  for (const mac of computed) for (const signature of received) if (equal(mac, signature)) matched = true;
  return matched;
}

/** The `invalid_signature` error for a well-formed signature that none of `count` secrets produced. */
function signatureMismatch(scheme: SignatureScheme, count: number): WebhookVerificationError {
  const which = count === 1 ? "the secret" : `any of the ${count} secrets`;
  const changed = scheme === "standard" ? "body, timestamp or id" : "body or timestamp";
  return new WebhookVerificationError(
    "invalid_signature",
    `${headerNames(scheme)[1]} does not match ${which} (wrong secret, or the ${changed} changed)`,
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Parses a verified body; throws `invalid_payload` unless it is a UTF-8 JSON envelope. Its
 * `data` is typed by `event` (events.ts) but not checked field by field.
 */
function parseEnvelope(body: Uint8Array): WebhookEnvelope {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(body));
  } catch {
    throw new WebhookVerificationError("invalid_payload", "the signature is valid but the body is not UTF-8 JSON");
  }
  if (!isPlainObject(parsed) || typeof parsed.event !== "string" || typeof parsed.timestamp !== "number" || !isPlainObject(parsed.data)) {
    throw new WebhookVerificationError(
      "invalid_payload",
      'the signature is valid but the body is not an envelope {"event","timestamp","data"}',
    );
  }
  return parsed as unknown as WebhookEnvelope;
}

/**
 * What `verify` returns once the MAC was compared: `matched` tells whether one of the request's
 * secrets produced its signature. Throws `invalid_signature` when none did, then
 * `invalid_payload` unless the body is an envelope: the last two checks, in this order in both
 * variants.
 */
export function verifiedEnvelope(request: SignedRequest, matched: boolean): WebhookEnvelope {
  if (!matched) throw signatureMismatch(request.scheme, request.keys.length);
  return parseEnvelope(request.body);
}

/**
 * `verifiedEnvelope` plus the event id (`{id, event, timestamp, data}`), as `verifyEvent` and
 * the adapters hand it over. The request must come from checkRequest(…, needsEventId = true),
 * which has refused one without X-Service-Event-Id (webhook-id under `standard`).
 */
export function verifiedEvent(request: SignedRequest, matched: boolean): WebhookEvent {
  return { id: request.eventId!, ...verifiedEnvelope(request, matched) };
}
