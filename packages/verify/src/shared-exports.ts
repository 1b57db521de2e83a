/**
 * What both variants of @mailhooks/verify export besides their own verify functions (index.ts:
 * node:crypto; web.ts: Web Crypto): the header names, the error class, the event types.
 */
export {
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  EVENT_ID_HEADER,
  STANDARD_ID_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  STANDARD_SIGNATURE_HEADER,
} from "./headers.js";
export { DEFAULT_TOLERANCE_SECONDS } from "./arguments.js";
export { WebhookVerificationError, isWebhookVerificationError } from "./verification-error.js";
export type { WebhookVerificationErrorCode } from "./verification-error.js";
export type { HeadersInput, HeadersLike, SignatureScheme } from "./headers.js";
export type { RawBody, SecretInput, VerifyOptions } from "./arguments.js";
export { EMAIL_EVENT_TYPES, OPERATIONAL_EVENT_TYPES } from "./events.js";
export type * from "./events.js";
