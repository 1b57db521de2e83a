import { z } from "zod";
import { SUBSCRIBABLE_EVENT_TYPES } from "@mailhooks/events";
import { SIGNATURE_SCHEMES } from "@mailhooks/signing";
import { checkDestinationUrl, normalizeDestinationUrl } from "@mailhooks/url-policy";
import type { ApiDeps } from "../deps.js";
import { invalidInput } from "../errors.js";
import { WEBHOOK_MODES } from "../schemas/webhooks.js";
import { inboxIdsSchema, isVisibleText, rateLimitSchema, webhookHeadersSchema } from "./webhook-options.js";
import { ownSecretSchema } from "./webhook-secrets.js";

/**
 * The input of webhook registration and change (spec "Webhook registration"; docs/api.md,
 * "Webhooks"): the request bodies' schemas and the checks of a webhook URL. The service
 * functions that take this input are in webhooks.ts.
 */

/** The longest webhook URL, in characters (as given and as stored). */
const URL_MAX_LENGTH = 2048;

/**
 * The one validation of a webhook URL (and a replay's target_url), used by the JSON routes and the
 * dashboard's forms alike, which hand it the field exactly as sent: at most 2048 characters, no
 * control character (NUL cannot even be stored, and URL parsing would strip or percent-encode
 * them silently) and no invisible one (shown in the dashboard as it is, a bidi override or a
 * zero-width character would make it read as another URL; a leading BOM included), an absolute
 * https:// URL without credentials. Returns the URL as it is stored: normalized by WHATWG URL
 * parsing, its host in ASCII (normalizeDestinationUrl of @mailhooks/url-policy).
 */
export function validateWebhookUrl(value: string): { url: string } | { message: string } {
  if (value.length > URL_MAX_LENGTH) return { message: `must be at most ${URL_MAX_LENGTH} characters` };
  // eslint-disable-next-line no-control-regex -- the control characters are what it refuses
  if (/[\u0000-\u001f\u007f]/.test(value)) return { message: "must not contain control characters" };
  if (!isVisibleText(value))
    return { message: "must not contain invisible characters (bidirectional controls, zero-width, control or other invisible characters)" };
  const normalized = normalizeDestinationUrl(value);
  if ("problem" in normalized)
    return { message: normalized.problem === "credentials" ? "must not carry credentials" : "must be an absolute https:// URL" };
  if (normalized.url.length > URL_MAX_LENGTH) return { message: `must be at most ${URL_MAX_LENGTH} characters once normalized` };
  return normalized;
}

/** An absolute https:// URL (validateWebhookUrl): the only scheme ever delivered to; parsed into its stored, normalized form. */
export const httpsUrl = z
  .string({ message: "must be a string" })
  // Checked again by validateWebhookUrl; here for the OpenAPI document.
  .max(URL_MAX_LENGTH, `must be at most ${URL_MAX_LENGTH} characters`)
  .transform((value, ctx) => {
    const checked = validateWebhookUrl(value);
    if ("url" in checked) return checked.url;
    ctx.addIssue({ code: "custom", message: checked.message });
    return z.NEVER;
  })
  .meta({
    format: "uri",
    description:
      "an absolute https:// URL without credentials, at most 2048 characters; stored normalized (WHATWG URL parsing: the host in ASCII, e.g. `https://Example.COM` is `https://example.com/`)",
    example: "https://example.com/hooks/email",
  });

export const webhookEvents = z
  .array(z.enum(SUBSCRIBABLE_EVENT_TYPES, { message: `must be one of ${SUBSCRIBABLE_EVENT_TYPES.join(", ")}` }), {
    message: "must be an array of event types",
  })
  .min(1, "must list at least one event type")
  .transform((events) => [...new Set(events)])
  .meta({ description: "the event kinds to deliver (at least one; repeats are ignored)" });

/** `signature_scheme` (docs/receivers/standard-webhooks.md): how the webhook's requests are signed. */
export const signatureSchemeSchema = z.enum(SIGNATURE_SCHEMES, { message: "must be service or standard" }).meta({
  description:
    "how its requests are signed: `service` (the default: X-Service-Timestamp and X-Service-Signature) or `standard` (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature)",
  example: "standard",
});

/**
 * POST /v1/webhooks. The options' defaults (push, no limit, every inbox, no headers, a secret made
 * here, `service`) are applied by createWebhook, so that they stay optional in the OpenAPI
 * document. `url` is null exactly for a listen webhook (docs/develop-locally.md).
 */
export const createWebhookSchema = z
  .strictObject({
    url: httpsUrl.nullable().meta({ description: 'an absolute https:// URL; null for a listen webhook (`mode: "listen"`)' }),
    mode: z
      .enum(WEBHOOK_MODES, { message: "must be push or listen" })
      .optional()
      .meta({ description: "push (the default): deliveries are POSTed to `url`; listen: `url` is null and deliveries wait until pulled" }),
    events: webhookEvents,
    rate_limit: rateLimitSchema.optional(),
    inbox_ids: inboxIdsSchema.optional(),
    headers: webhookHeadersSchema.optional(),
    secret: ownSecretSchema.optional(),
    signature_scheme: signatureSchemeSchema.optional(),
  })
  .superRefine((input, ctx) => {
    const listen = input.mode === "listen";
    if (listen && input.url !== null)
      ctx.addIssue({ code: "custom", path: ["url"], message: 'must be null for a listen webhook (mode "listen")' });
    if (!listen && input.url === null)
      ctx.addIssue({ code: "custom", path: ["url"], message: 'must be an absolute https:// URL (null only with mode "listen")' });
  });
export type CreateWebhookInput = z.infer<typeof createWebhookSchema>;

/** PATCH /v1/webhooks/{id}: each field absent keeps its value; `rate_limit: null` lifts the limit, `inbox_ids: null` means every inbox again, `headers` replaces the whole set. */
export const updateWebhookSchema = z.strictObject({
  url: httpsUrl.optional(),
  events: webhookEvents.optional(),
  status: z.enum(["enabled", "paused", "disabled"], { message: "must be enabled, paused or disabled" }).optional(),
  rate_limit: rateLimitSchema.optional(),
  inbox_ids: inboxIdsSchema.optional(),
  headers: webhookHeadersSchema.optional(),
  signature_scheme: signatureSchemeSchema.optional(),
});
export type UpdateWebhookInput = z.infer<typeof updateWebhookSchema>;

/**
 * Refuses a URL whose host is an IP literal outside the public address space (unless
 * ALLOW_PRIVATE_TARGETS allows it: `true`, or one of its ranges); host names are checked again at
 * every connection by the dispatcher.
 * @throws AppError validation_error naming `path`
 */
export function assertDeliverableUrl(deps: ApiDeps, url: string, path: string): void {
  if (checkDestinationUrl(url, { allowPrivateTargets: deps.config.ALLOW_PRIVATE_TARGETS }) === "blocked_destination") {
    const message = "must not point to a loopback, private, link-local or reserved address";
    throw invalidInput([{ path, message }]);
  }
}
