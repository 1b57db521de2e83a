import type { AppError, ErrorReason } from "../errors.js";

/**
 * Refusals in the dashboard's words, by reason (CONTRIBUTING.md, Habits 4: a page maps a reason to words
 * and never reads another layer's message). The API's messages name request fields
 * (`webhook_id`, `target_url`); on a page the same refusal names the form's fields. Every reason
 * has words here, so a new reason cannot reach a page without them (the type says so).
 */

type Words = string | ((error: AppError) => string);

/** A validation error's problems as a sentence: "Id: must be ...". */
const problems = (error: AppError) =>
  sentence((error.details ?? []).map((d) => (d.path ? `${d.path}: ${d.message}` : d.message)).join("; ") || "some input is not valid");

const retryAfter = (error: AppError) => error.headers?.["Retry-After"];

export const NOT_FOUND_WORDS = "There is nothing here for your account: it may have been deleted, or the link may be mistyped.";

const WORDS: Record<ErrorReason, Words> = {
  body_not_json: "The request could not be read.",
  body_not_utf8: "The form is not valid UTF-8.",
  body_unreadable: "The form could not be read.",
  api_key_missing: "You are not signed in.",
  api_key_invalid: "You are not signed in.",
  not_authenticated: "You are not signed in.",
  resource_not_found: NOT_FOUND_WORDS,
  route_not_found: NOT_FOUND_WORDS,
  path_not_decodable: NOT_FOUND_WORDS,
  no_destination: "This event went to no webhook: there is no webhook to replay it to, nor a secret to sign a replay with.",
  several_destinations:
    "This event went to several webhooks: under Webhook, choose the one whose secret signs the replay to the override URL.",
  webhook_not_a_destination: "The chosen webhook did not receive this event: choose one of the webhooks it went to.",
  destinations_disabled: "Every webhook that received this event is disabled: enable one under Webhooks, or replay to an override URL.",
  webhook_disabled: "The webhook is disabled: enable it to send it a test event.",
  webhook_paused: "The webhook is paused: resume it to send it a test event.",
  webhook_limit_reached: "This account already has as many webhooks as it may have: delete one first.",
  idempotency_key_reused: "This request repeats an earlier one's idempotency key with other content.",
  idempotent_webhook_deleted: "This request repeats the creation of a webhook that has since been deleted.",
  secret_not_standard:
    "This webhook's secret was made before secrets were standard base64, so Standard Webhooks receivers cannot use it: rotate the secret first, then choose Standard Webhooks.",
  listen_webhook: "A listen webhook has no URL: its deliveries are pulled by `npm run listen`. Add a webhook with a URL instead.",
  not_a_listen_webhook: "This webhook's deliveries are sent to its URL, not pulled.",
  pull_expired: "This pulled delivery was not answered within 60 seconds and was handed out again.",
  waiting_pulls: (error) => `Too many waiting pulls for this account: try again in ${retryAfter(error) ?? "a few"} seconds.`,
  payload_purged: "The event's payload is past retention and can no longer be replayed.",
  body_idle: "The request did not arrive in time.",
  body_too_large: "The form is too large.",
  envelope_too_large: "The event is too large: its envelope would pass 10 MiB.",
  message_too_large: "The message is too large to accept.",
  content_type_not_json: "The request's format is not supported.",
  content_type_not_message: "The request's format is not supported.",
  charset_not_utf8: "The request's character set is not supported: send UTF-8.",
  encoding_unsupported: "The form's encoding or character set is not supported.",
  invalid_input: problems,
  unparseable_message: "The message is not an RFC 5322 message.",
  unstorable_value: "Some input contains a value that cannot be stored (a NUL character, a date out of range or an oversized identifier).",
  account_rate_limit: (error) => `Too many requests for this account: try again in ${retryAfter(error) ?? "a few"} seconds.`,
  unauthenticated_rate_limit: (error) =>
    `Too many requests without a valid sign-in came from your network: try again in ${retryAfter(error) ?? "a few"} seconds.`,
  headers_too_large: "The request's headers are too large.",
  unexpected: "Something went wrong on our side.",
  dependency_unavailable: "The database or the queue is unreachable right now; try again in a moment.",
  parse_capacity: "Too many messages are being read right now; try again in a moment.",
};

/** `error` in the dashboard's words (a sentence). */
export function refusalInWords(error: AppError): string {
  const words = WORDS[error.reason];
  return typeof words === "function" ? words(error) : words;
}

/** `text` with a capital first letter and a closing full stop. */
function sentence(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1) + (/[.!?]$/.test(text) ? "" : ".");
}
