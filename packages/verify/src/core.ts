/**
 * What the Node and the Web Crypto variants share: the error type, reading the two headers,
 * taking the raw body as bytes, the timestamp window, the signature's format and the envelope.
 * Everything here runs before or after the MAC, never instead of it, and imports nothing from
 * Node, so that `@mailhooks/verify/web` runs on edge runtimes.
 *
 * Order of the checks (the same in every implementation, so that test-vectors.json has one
 * answer per request): headers present, timestamp well-formed, timestamp within the window,
 * signature well-formed and matching one of the secrets, body a JSON envelope.
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
/** Default window, in seconds, on either side of the receiver's clock. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * Why a request was refused:
 * - `missing_header`: X-Service-Signature or X-Service-Timestamp absent or empty (for
 *   `verifyEvent` and the adapters, X-Service-Event-Id too);
 * - `invalid_timestamp`: X-Service-Timestamp is not 1 to 12 ASCII digits;
 * - `timestamp_out_of_tolerance`: further than `toleranceSeconds` from now, in the past or the future;
 * - `invalid_signature`: not `sha256=` + 64 lowercase hex digits, or made with none of the secrets
 *   (or the body or timestamp changed after signing);
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
 * The webhook's signing secret (`whsec_...`), or several: during a rotation (docs/api.md, "Webhooks")
 * a request signed with any of them is accepted.
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
}

/** What both variants need to compute and compare the MAC, once everything else has passed. */
export interface SignedRequest {
  secrets: string[];
  /** X-Service-Event-Id; undefined when absent (only `verify`, which does not need it, allows that). */
  eventId: string | undefined;
  timestamp: string;
  /** The received signature's 64 lowercase hex digits (format already checked). */
  signatureHex: string;
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

/**
 * Every check that comes before the MAC, in the documented order. Returns what the MAC needs;
 * throws TypeError for a programming error (bad secret, headers, body or options) and
 * WebhookVerificationError for a request to refuse.
 */
export function checkRequest(
  secret: SecretInput,
  headers: HeadersInput,
  rawBody: RawBody,
  options: VerifyOptions = {},
  needsEventId = false,
): SignedRequest {
  const secrets = secretList(secret);
  const body = bodyBytes(rawBody);
  const tolerance = toleranceOf(options);
  const now = nowSeconds(options.now);
  const signatureHeader = readHeader(headers, SIGNATURE_HEADER);
  const timestamp = readHeader(headers, TIMESTAMP_HEADER);
  if (!timestamp) throw new WebhookVerificationError("missing_header", `missing ${TIMESTAMP_HEADER} header`);
  if (!signatureHeader) throw new WebhookVerificationError("missing_header", `missing ${SIGNATURE_HEADER} header`);
  const eventId = readHeader(headers, EVENT_ID_HEADER) || undefined;
  if (needsEventId && !eventId) throw new WebhookVerificationError("missing_header", `missing ${EVENT_ID_HEADER} header`);
  if (!TIMESTAMP_FORMAT.test(timestamp)) {
    throw new WebhookVerificationError("invalid_timestamp", `${TIMESTAMP_HEADER} must be Unix seconds (digits only)`);
  }
  const age = now - Number(timestamp);
  if (Math.abs(age) > tolerance) {
    const where = age > 0 ? `${age} s in the past` : `${-age} s in the future`;
    throw new WebhookVerificationError(
      "timestamp_out_of_tolerance",
      `${TIMESTAMP_HEADER} is ${where}, beyond the tolerance of ${tolerance} s`,
    );
  }
  const match = SIGNATURE_FORMAT.exec(signatureHeader);
  if (!match) {
    throw new WebhookVerificationError("invalid_signature", `${SIGNATURE_HEADER} must be "sha256=" followed by 64 lowercase hex digits`);
  }
  return { secrets, eventId, timestamp, signatureHex: match[1], body };
}

/** The `invalid_signature` error for a well-formed signature that none of `count` secrets produced. */
function signatureMismatch(count: number): WebhookVerificationError {
  const which = count === 1 ? "the secret" : `any of the ${count} secrets`;
  return new WebhookVerificationError(
    "invalid_signature",
    `${SIGNATURE_HEADER} does not match ${which} (wrong secret, or the body or timestamp changed)`,
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
  if (!matched) throw signatureMismatch(request.secrets.length);
  return parseEnvelope(request.body);
}

/**
 * `verifiedEnvelope` plus the event id (`{id, event, timestamp, data}`), as `verifyEvent` and
 * the adapters hand it over. The request must come from checkRequest(…, needsEventId = true),
 * which has refused one without X-Service-Event-Id.
 */
export function verifiedEvent(request: SignedRequest, matched: boolean): WebhookEvent {
  return { id: request.eventId!, ...verifiedEnvelope(request, matched) };
}
