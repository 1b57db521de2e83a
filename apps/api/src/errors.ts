import { z } from "zod";

/**
 * The API's one error type (CONTRIBUTING.md, Habits 4): a `code`, one per HTTP status of
 * docs/api.md, "Errors", and a machine `reason` that tells apart the refusals sharing a code
 * (four kinds of 409 `conflict` for a replay alone). The JSON answer carries the code, the
 * message and the details only: docs/api.md, "Errors" fixes that shape, and the project's
 * black-box tests hold it to exactly those keys (tests/support/hooks.ts `expectError`); the
 * reason is for the code that shares this process (the dashboard's words, the error handlers'
 * logs), and the message is for the people who read the JSON answer.
 */

export const ERROR_STATUS = {
  invalid_json: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  payload_expired: 410,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  rate_limited: 429,
  headers_too_large: 431,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The reasons of each code; a reason belongs to one code only. */
export const ERROR_REASONS = {
  invalid_json: [
    "body_not_json", // not parseable JSON
    "body_not_utf8",
    "body_unreadable", // aborted, of a size other than announced, or not decodable (Content-Encoding)
  ],
  unauthorized: [
    "api_key_missing", // no `Authorization: Bearer <API_KEY>`, or a malformed one
    "api_key_invalid", // unknown or revoked: not told apart, on purpose
    "not_authenticated", // a route reached without the authentication middleware (a bug)
  ],
  not_found: [
    "resource_not_found", // no such resource for this account (another account's included)
    "route_not_found",
    "path_not_decodable", // a path that is not valid percent-encoding names no resource
  ],
  conflict: [
    "no_destination", // replay: the event went to no webhook
    "several_destinations", // replay to a target_url: several destinations and no webhook_id
    "webhook_not_a_destination", // replay: webhook_id did not receive the event
    "destinations_disabled", // replay without target_url: every destination's webhook is disabled or deleted
    "webhook_disabled", // test request to a disabled webhook
    "webhook_paused", // test request to a paused webhook
    "webhook_limit_reached", // MAX_WEBHOOKS_PER_ACCOUNT
    "idempotency_key_reused", // an Idempotency-Key repeated with another body
    "idempotent_webhook_deleted", // a repeated webhook creation whose webhook was deleted since
    "secret_not_standard", // signature_scheme "standard" for a secret made in the URL-safe alphabet
    "listen_webhook", // a url for a listen webhook, which has none
    "not_a_listen_webhook", // pending deliveries of a webhook that is pushed to
    "pull_expired", // the answer to a pulled delivery whose 60 s had passed: it was handed out again
  ],
  payload_expired: ["payload_purged"],
  request_timeout: ["body_idle"],
  payload_too_large: [
    "body_too_large", // over the body parser's limit
    "envelope_too_large", // the event's envelope would pass 10 MiB
    "message_too_large", // a raw message past what is parsed: HTML rendered to text, lines, header bytes, MIME parts
  ],
  unsupported_media_type: [
    "content_type_not_json",
    "content_type_not_message", // not message/rfc822
    "charset_not_utf8", // a JSON body declared in a charset other than UTF-8
    "encoding_unsupported", // a Content-Encoding or charset the parser does not know
  ],
  validation_error: [
    "invalid_input", // `details` name each field and its problem
    "unparseable_message", // a raw message that is not RFC 5322
    "unstorable_value", // input PostgreSQL refused to store (see classify-error.ts)
  ],
  rate_limited: [
    "account_rate_limit", // RATE_LIMIT_PER_MINUTE of the account
    "unauthenticated_rate_limit", // requests without a valid key from one address
    "waiting_pulls", // more waiting pulls of pending deliveries than an account or the process may have
  ],
  headers_too_large: ["headers_too_large"],
  internal_error: ["unexpected"],
  unavailable: [
    "dependency_unavailable", // PostgreSQL (or Redis, where it is needed) unreachable
    "parse_capacity", // raw messages being parsed use up the process's budget
  ],
} as const satisfies Record<ErrorCode, readonly string[]>;

/** A reason of code `C` (of any code by default). */
export type ErrorReason<C extends ErrorCode = ErrorCode> = (typeof ERROR_REASONS)[C][number];

export interface ErrorDetail {
  path: string;
  message: string;
}

export interface AppErrorOptions {
  /** For validation errors: one item per problem (docs/api.md, "Errors"). */
  details?: ErrorDetail[];
  /** Headers of the answer (`Retry-After`, `WWW-Authenticate`). */
  headers?: Record<string, string>;
}

/**
 * A refusal: `code` (the status and the JSON answer's `code`), `reason` (which refusal, for code),
 * `message` (for people; it may change and nothing branches on it).
 */
export class AppError<C extends ErrorCode = ErrorCode> extends Error {
  override name = "AppError";
  readonly details?: ErrorDetail[];
  readonly headers?: Record<string, string>;

  constructor(
    readonly code: C,
    readonly reason: ErrorReason<C>,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message);
    if (options.details) this.details = options.details;
    if (options.headers) this.headers = options.headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/**
 * `error instanceof AppError`, and of `code` when given. Use it rather than instanceof, which
 * narrows to AppError<any> and lets any reason through unchecked.
 */
export function isAppError<C extends ErrorCode = ErrorCode>(error: unknown, code?: C): error is AppError<C> {
  return error instanceof AppError && (code === undefined || error.code === code);
}

/** 404 `resource_not_found`: `what` is the resource's name ("event", "webhook"). */
export const notFound = (what: string) => new AppError("not_found", "resource_not_found", `${what} not found`);

/** 422 `invalid_input` whose details are `details`; the message names the first. */
export function invalidInput(details: ErrorDetail[]): AppError<"validation_error"> {
  const first = details[0];
  return new AppError("validation_error", "invalid_input", first ? `${first.path || "body"}: ${first.message}` : "invalid input", {
    details,
  });
}

/** A 422 from a zod error; `prefix` names where the input came from (e.g. "query"). */
export function validationError(error: z.ZodError, prefix?: string): AppError<"validation_error"> {
  // zod reports unknown fields on their parent object: name each of them instead.
  const details = error.issues.flatMap((issue) => {
    const base = [prefix, ...issue.path.map(String)];
    const join = (parts: (string | undefined)[]) => parts.filter(Boolean).join(".");
    if (issue.code === "unrecognized_keys")
      return issue.keys.map((key) => ({ path: join([...base, key]), message: "is not a recognized field" }));
    return [{ path: join(base), message: issue.message }];
  });
  return invalidInput(details);
}
