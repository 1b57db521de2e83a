import type { Keyring } from "@mailhooks/secrets";

/**
 * A webhook's own request headers (docs/api.md, "Webhooks"), stored as
 * `keyring.encrypt(JSON.stringify({"<Name>": "<value>", ...}))`. Their values are secrets: they
 * go into the request and nowhere else (no log, no job data, no error message).
 */

/** Stored headers that do not decrypt to a JSON object of strings: the message names no value. */
export class StoredHeadersError extends Error {
  override name = "StoredHeadersError";
  constructor() {
    super("the webhook's stored headers are not a JSON object of header names to strings");
  }
}

/**
 * The headers of `stored` (null: none), names lower-cased as Node sends them.
 * @throws SecretDecryptionError when no configured key opens them (the worker postpones: the
 *   operator's to fix), StoredHeadersError when they open to anything but an object of strings
 */
export function decryptWebhookHeaders(keyring: Keyring, stored: string | null): Record<string, string> {
  if (stored === null) return {};
  const text = keyring.decrypt(stored);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the text: it must not reach a log.
    throw new StoredHeadersError();
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new StoredHeadersError();
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed)) {
    if (typeof value !== "string") throw new StoredHeadersError();
    headers[name.toLowerCase()] = value;
  }
  return headers;
}
