import { isWebhookVerificationError, type WebhookVerificationErrorCode } from "./verification-error.js";

/**
 * The JSON the adapters answer with status 401, in the service's own error shape:
 * `{"error": {"code": "invalid_signature", "message": "..."}}`.
 */
export interface WebhookErrorBody {
  error: { code: WebhookVerificationErrorCode; message: string };
}

/** The 401 body for a verification error; undefined for anything else (a bug, to rethrow). */
export function unauthorizedBody(error: unknown): WebhookErrorBody | undefined {
  return isWebhookVerificationError(error) ? { error: { code: error.code, message: error.message } } : undefined;
}

/** The 401 answer as a fetch Response (Hono, Next.js and other fetch-style handlers). */
export function unauthorizedResponse(body: WebhookErrorBody): Response {
  return new Response(JSON.stringify(body), { status: 401, headers: { "content-type": "application/json" } });
}
