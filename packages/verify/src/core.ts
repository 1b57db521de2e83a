/**
 * What the Node and the Web Crypto variants share: the error type, reading the headers of either
 * signature scheme, taking the raw body as bytes, the timestamp window, the signature's format,
 * the HMAC keys and the envelope. Everything here runs before or after the MAC, never instead of
 * it, and imports nothing from Node, so that `@mailhooks/verify/web` runs on edge runtimes.
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

import type { WebhookEnvelope, WebhookEvent } from "./events.js";

export type { WebhookEnvelope, WebhookEvent } from "./events.js";

/** The header carrying `sha256=<64 lowercase hex digits>`. */
export const SIGNATURE_HEADER = "X-Service-Signature";
/** The header carrying the Unix seconds at sending, part of the signed message. */
export const TIMESTAMP_HEADER = "X-Service-Timestamp";
/**
 * The header carrying the event's id (docs/receivers.md, "The request"): the same on every retry and replay
 * of one event, so the key to de-duplicate on. Not part of the signed message.
 */
export const EVENT_ID_HEADER = "X-Service-Event-Id";
/** Standard Webhooks' headers (`scheme: "standard"`): the message id (the event id), Unix seconds, the signatures. */
export const STANDARD_ID_HEADER = "webhook-id";
export const STANDARD_TIMESTAMP_HEADER = "webhook-timestamp";
export const STANDARD_SIGNATURE_HEADER = "webhook-signature";

/**
 * How the webhook's requests are signed, its `signature_scheme`: `service` (X-Service-*
 * headers) or `standard` (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature).
 */
export type SignatureScheme = "service" | "standard";

/** Default window, in seconds, on either side of the receiver's clock. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * Why a request was refused:
 * - `missing_header`: X-Service-Signature or X-Service-Timestamp absent or empty (for
 *   `verifyEvent` and the adapters, X-Service-Event-Id too); under `standard`, webhook-id,
 *   webhook-timestamp or webhook-signature;
 * - `invalid_timestamp`: the timestamp header is not 1 to 12 ASCII digits;
 * - `timestamp_out_of_tolerance`: further than `toleranceSeconds` from now, in the past or the future;
 * - `invalid_signature`: not `sha256=` + 64 lowercase hex digits (under `standard`: no
 *   `v1,<base64 of 32 bytes>` among the space-separated signatures), or made with none of the
 *   secrets (or the body, timestamp or id changed after signing);
 * - `invalid_payload`: the signature is valid but the body is not a UTF-8 JSON object with
 *   `event` (string), `timestamp` (number) and `data` (object).
 */
export type WebhookVerificationErrorCode =
  "missing_header" | "invalid_timestamp" | "timestamp_out_of_tolerance" | "invalid_signature" | "invalid_payload";

/** Every code, in the order the checks run. */
export const ERROR_CODES: readonly WebhookVerificationErrorCode[] = [
  "missing_header",
  "invalid_timestamp",
  "timestamp_out_of_tolerance",
  "invalid_signature",
  "invalid_payload",
];

/** A request that must not be processed; answer it with 401 (the adapters do). */
export class WebhookVerificationError extends Error {
  readonly code: WebhookVerificationErrorCode;

  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.code = code;
  }
}

/**
 * True for a WebhookVerificationError from any copy of this package: `instanceof` fails when
 * the ESM and the CJS builds are both loaded (each has its own class).
 */
export function isWebhookVerificationError(error: unknown): error is WebhookVerificationError {
  return (
    error instanceof Error &&
    error.name === "WebhookVerificationError" &&
    ERROR_CODES.includes((error as { code?: unknown }).code as WebhookVerificationErrorCode)
  );
}

/** A fetch `Headers` (or anything with a case-insensitive `get`). */
export interface HeadersLike {
  get(name: string): string | null;
}

/**
 * The request headers: a fetch `Headers`, Node's `IncomingHttpHeaders` (lowercase keys,
 * values string or string[]), or a plain record whose keys may be in any case.
 */
export type HeadersInput = HeadersLike | Record<string, string | readonly string[] | undefined | null>;

/**
 * The webhook's signing secret (`whsec_...`), or several: during a rotation
 * (docs/receivers/standard-webhooks.md) a request signed with any of them is accepted. Under
 * `standard` each must be `whsec_` (optional) and standard base64, which is what the service's
 * secrets are (those made before that rule, in the URL-safe alphabet, sign under `service` only).
 */
export type SecretInput = string | readonly string[];

/** The request body exactly as received: bytes (Buffer, Uint8Array, ArrayBuffer) or text. */
export type RawBody = string | Uint8Array | ArrayBuffer;

export interface VerifyOptions {
  /**
   * Largest distance, in seconds, between X-Service-Timestamp and `now`, either way (default
   * 300). It bounds the replay of a captured request. `Infinity` turns the check off, which is
   * only for checking stored requests.
   */
  toleranceSeconds?: number;
  /** The receiver's clock: Unix seconds or a Date (default: the current time). */
  now?: number | Date;
  /**
   * The webhook's `signature_scheme`: `service` (the default) or `standard` (Standard Webhooks).
   * Under `standard` the timestamp is webhook-timestamp and the event id webhook-id.
   */
  scheme?: SignatureScheme;
}

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

function secretList(secret: SecretInput): string[] {
  // unknown until checked: JavaScript callers may pass anything.
  const secrets: unknown[] = typeof secret === "string" ? [secret] : Array.isArray(secret) ? [...(secret as readonly unknown[])] : [];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s === "")) {
    throw new TypeError("verify(): `secret` must be a non-empty string or a non-empty array of non-empty strings (the webhook secret(s))");
  }
  return secrets as string[];
}

/** Canonical standard base64: the A-Z a-z 0-9 + / alphabet, `=` padding to a multiple of 4. */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The bytes of canonical standard base64 `text` (encoding them again gives `text`), else undefined. */
function base64Bytes(text: string): Uint8Array | undefined {
  if (!STANDARD_BASE64.test(text)) return undefined;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  // atob ignores bits past the last byte; the canonical text is the only one accepted.
  let again = "";
  for (const byte of bytes) again += String.fromCharCode(byte);
  return btoa(again) === text ? bytes : undefined;
}

/**
 * The HMAC key of a secret under `standard`: the bytes its base64 (after an optional `whsec_`)
 * decodes to. Throws a TypeError for a secret that is not standard base64, e.g. one made by the
 * service before secrets were (URL-safe alphabet): such a webhook signs under `service` only.
 */
function standardKey(secret: string): Uint8Array {
  const bytes = base64Bytes(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret);
  if (bytes === undefined || bytes.length === 0) {
    throw new TypeError(
      'verify(): with scheme "standard", each secret must be whsec_ followed by standard base64 (A-Z, a-z, 0-9, + and /, padded with =); ' +
        "a secret in the URL-safe alphabet (made before the service's secrets were standard base64) signs only under the service scheme: rotate it",
    );
  }
  return bytes;
}

function schemeOf(options: VerifyOptions): SignatureScheme {
  const scheme = options.scheme ?? "service";
  if (scheme !== "service" && scheme !== "standard") throw new TypeError('verify(): `scheme` must be "service" or "standard"');
  return scheme;
}

// Object.prototype.toString and ArrayBuffer.isView rather than instanceof: a Buffer made in
// another realm (a vm context, a jest test) is not an instance of this realm's Uint8Array.
function isArrayBuffer(value: unknown): value is ArrayBuffer {
  return Object.prototype.toString.call(value) === "[object ArrayBuffer]";
}

/**
 * The raw body as bytes (a string is taken as UTF-8). Throws a TypeError for anything else,
 * above all for an object: a body already parsed as JSON cannot be turned back into the bytes
 * that were signed.
 */
export function bodyBytes(rawBody: unknown): Uint8Array {
  if (typeof rawBody === "string") return encoder.encode(rawBody);
  if (ArrayBuffer.isView(rawBody)) return new Uint8Array(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  if (isArrayBuffer(rawBody)) return new Uint8Array(rawBody);
  const what =
    rawBody === null ? "null" : rawBody === undefined ? "undefined" : `a parsed ${Array.isArray(rawBody) ? "array" : typeof rawBody}`;
  throw new TypeError(
    `verify() needs the raw request body (Buffer, Uint8Array, ArrayBuffer or string) exactly as received, but got ${what}. ` +
      "The signature covers the bytes sent; a body parsed as JSON (express.json(), a framework's default JSON parser) " +
      'cannot be serialized back into them. Read the body raw, e.g. express.raw({ type: "application/json" }), ' +
      "then parse it, or use one of the adapters (@mailhooks/verify/express, /fastify, /hono, /next).",
  );
}

/** One header's value, whatever the shape of `headers`; undefined when absent. */
export function readHeader(headers: HeadersInput, name: string): string | undefined {
  if (headers === null || typeof headers !== "object") {
    throw new TypeError("verify(): `headers` must be a fetch Headers, Node's req.headers or a plain object");
  }
  if (typeof (headers as HeadersLike).get === "function") return (headers as HeadersLike).get(name) ?? undefined;
  const record = headers as Record<string, string | readonly string[] | undefined | null>;
  const lower = name.toLowerCase();
  let value = record[lower];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === lower);
    value = key === undefined ? undefined : record[key];
  }
  if (value === null || value === undefined) return undefined;
  // A repeated header is joined as Node and fetch join it, which then fails the format check.
  return typeof value === "string" ? value : value.join(", ");
}

function nowSeconds(now: number | Date | undefined): number {
  if (now === undefined) return Math.floor(Date.now() / 1000);
  if (now instanceof Date) return Math.floor(now.getTime() / 1000);
  if (typeof now === "number" && Number.isFinite(now)) return now;
  throw new TypeError("verify(): `now` must be Unix seconds (a finite number) or a Date");
}

function toleranceOf(options: VerifyOptions): number {
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (typeof tolerance !== "number" || Number.isNaN(tolerance) || tolerance < 0) {
    throw new TypeError("verify(): `toleranceSeconds` must be a number of seconds >= 0 (or Infinity)");
  }
  return tolerance;
}

const TIMESTAMP_FORMAT = /^[0-9]{1,12}$/;
const SIGNATURE_FORMAT = /^sha256=([0-9a-f]{64})$/;
/** One Standard Webhooks signature of HMAC-SHA256: `v1,` and the standard base64 of its 32 bytes. */
const STANDARD_SIGNATURE_FORMAT = /^v1,([A-Za-z0-9+/]{43}=)$/;

function hexBytes(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** The header names of a scheme: [timestamp, signature, id]. */
function headerNames(scheme: SignatureScheme): [string, string, string] {
  return scheme === "standard"
    ? [STANDARD_TIMESTAMP_HEADER, STANDARD_SIGNATURE_HEADER, STANDARD_ID_HEADER]
    : [TIMESTAMP_HEADER, SIGNATURE_HEADER, EVENT_ID_HEADER];
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
    // Space-separated; signatures of other versions (e.g. v1a, asymmetric) are skipped, as the
    // specification asks, and so is a v1 signature that cannot be one (it could match nothing).
    const signatures: Uint8Array[] = [];
    for (const entry of signatureHeader.split(" ")) {
      const match = STANDARD_SIGNATURE_FORMAT.exec(entry);
      const bytes = match ? base64Bytes(match[1]) : undefined;
      if (bytes) signatures.push(bytes);
    }
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
