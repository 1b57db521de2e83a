/**
 * The arguments of verify and verifyEvent other than the headers: the secret(s), the raw body and
 * the options, each checked here (a TypeError names what is wrong: a programming error, never a
 * request to refuse). Imports nothing from Node (`@mailhooks/verify/web` runs on edge runtimes).
 */

import type { SignatureScheme } from "./headers.js";

/** Default window, in seconds, on either side of the receiver's clock. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

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

const encoder = new TextEncoder();

/** The secrets as a list of at least one non-empty string. Throws a TypeError for anything else. */
export function secretList(secret: SecretInput): string[] {
  // unknown until checked: JavaScript callers may pass anything.
  const secrets: unknown[] = typeof secret === "string" ? [secret] : Array.isArray(secret) ? [...(secret as readonly unknown[])] : [];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s === "")) {
    throw new TypeError("verify(): `secret` must be a non-empty string or a non-empty array of non-empty strings (the webhook secret(s))");
  }
  return secrets as string[];
}

/** `options.scheme`, `service` when absent. Throws a TypeError for another value. */
export function schemeOf(options: VerifyOptions): SignatureScheme {
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

/** `options.now` in Unix seconds (default: the current time). Throws a TypeError for a value that is neither a finite number nor a Date. */
export function nowSeconds(now: number | Date | undefined): number {
  if (now === undefined) return Math.floor(Date.now() / 1000);
  if (now instanceof Date) return Math.floor(now.getTime() / 1000);
  if (typeof now === "number" && Number.isFinite(now)) return now;
  throw new TypeError("verify(): `now` must be Unix seconds (a finite number) or a Date");
}

/** `options.toleranceSeconds`, in seconds (default 300). Throws a TypeError for NaN, a negative number or a non-number. */
export function toleranceOf(options: VerifyOptions): number {
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (typeof tolerance !== "number" || Number.isNaN(tolerance) || tolerance < 0) {
    throw new TypeError("verify(): `toleranceSeconds` must be a number of seconds >= 0 (or Infinity)");
  }
  return tolerance;
}
