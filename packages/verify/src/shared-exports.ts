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
  DEFAULT_TOLERANCE_SECONDS,
  WebhookVerificationError,
  isWebhookVerificationError,
} from "./core.js";
export type {
  WebhookVerificationErrorCode,
  HeadersInput,
  HeadersLike,
  RawBody,
  SecretInput,
  SignatureScheme,
  VerifyOptions,
} from "./core.js";
export { EMAIL_EVENT_TYPES, OPERATIONAL_EVENT_TYPES } from "./events.js";
export type * from "./events.js";
