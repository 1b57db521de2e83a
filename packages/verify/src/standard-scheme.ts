/**
 * The Standard Webhooks scheme (`standard`, https://www.standardwebhooks.com): its keys (the bytes
 * a secret's base64 after `whsec_` decodes to) and its signatures (space-separated `v1,<base64>`).
 * The checks' order and errors are checkRequest's (core.ts). Imports nothing from Node
 * (`@mailhooks/verify/web` runs on edge runtimes).
 */

/** Canonical standard base64: the A-Z a-z 0-9 + / alphabet, `=` padding to a multiple of 4. */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** One Standard Webhooks signature of HMAC-SHA256: `v1,` and the standard base64 of its 32 bytes. */
const STANDARD_SIGNATURE_FORMAT = /^v1,([A-Za-z0-9+/]{43}=)$/;

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
export function standardKey(secret: string): Uint8Array {
  const bytes = base64Bytes(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret);
  if (bytes === undefined || bytes.length === 0) {
    throw new TypeError(
      'verify(): with scheme "standard", each secret must be whsec_ followed by standard base64 (A-Z, a-z, 0-9, + and /, padded with =); ' +
        "a secret in the URL-safe alphabet (made before the service's secrets were standard base64) signs only under the service scheme: rotate it",
    );
  }
  return bytes;
}

/**
 * The received MACs of a webhook-signature header: one per well-formed `v1` signature, possibly
 * none (the caller refuses the request then).
 */
export function standardSignatures(signatureHeader: string): Uint8Array[] {
  // Space-separated; signatures of other versions (e.g. v1a, asymmetric) are skipped, as the
  // specification asks, and so is a v1 signature that cannot be one (it could match nothing).
  const signatures: Uint8Array[] = [];
  for (const entry of signatureHeader.split(" ")) {
    const match = STANDARD_SIGNATURE_FORMAT.exec(entry);
    const bytes = match ? base64Bytes(match[1]) : undefined;
    if (bytes) signatures.push(bytes);
  }
  return signatures;
}
