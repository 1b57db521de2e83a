/**
 * The error a refused request throws, its codes and a guard that works across copies of the
 * package. Imports nothing from Node (`@mailhooks/verify/web` runs on edge runtimes).
 */

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
