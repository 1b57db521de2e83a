/**
 * The headers of both signature schemes and reading them from any shape of request headers.
 * Imports nothing from Node (`@mailhooks/verify/web` runs on edge runtimes).
 */

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

/** A fetch `Headers` (or anything with a case-insensitive `get`). */
export interface HeadersLike {
  get(name: string): string | null;
}

/**
 * The request headers: a fetch `Headers`, Node's `IncomingHttpHeaders` (lowercase keys,
 * values string or string[]), or a plain record whose keys may be in any case.
 */
export type HeadersInput = HeadersLike | Record<string, string | readonly string[] | undefined | null>;

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

/** The header names of a scheme: [timestamp, signature, id]. */
export function headerNames(scheme: SignatureScheme): [string, string, string] {
  return scheme === "standard"
    ? [STANDARD_TIMESTAMP_HEADER, STANDARD_SIGNATURE_HEADER, STANDARD_ID_HEADER]
    : [TIMESTAMP_HEADER, SIGNATURE_HEADER, EVENT_ID_HEADER];
}
