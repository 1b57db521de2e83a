import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Webhook } from "@mailhooks/db";
import { changeWebhook, deleteWebhook as deleteWebhookState, registerWebhook, rotateSecret, type WebhookRow } from "@mailhooks/delivery-state";
import { EVENT_TYPES } from "@mailhooks/events";
import { checkDestinationUrl } from "@mailhooks/url-policy";
import type { ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import { afterCursor, newestFirst, toPage, type Cursor, type Page } from "../http/pagination.js";
import type { RotatedSecretView, WebhookView, WebhookWithSecretView } from "../views/webhooks.js";

/** Webhook registration (spec "Webhook registration"; CONTRACT.md section 4). */

/** An absolute https:// URL: the only scheme ever delivered to. */
export const httpsUrl = z
  .string({ message: "must be a string" })
  .max(2048, "must be at most 2048 characters")
  // Stored as given: no control character (NUL cannot even be stored), which URL parsing
  // would otherwise strip or percent-encode silently.
  .refine((value) => !/[\u0000-\u001f\u007f]/.test(value), "must not contain control characters")
  .refine((value) => {
    try {
      const url = new URL(value);
      return url.protocol === "https:" && value.toLowerCase().startsWith("https://") && url.hostname.length > 0;
    } catch {
      return false;
    }
  }, "must be an absolute https:// URL")
  .refine((value) => {
    try {
      const url = new URL(value);
      return !url.username && !url.password;
    } catch {
      return true;
    }
  }, "must not carry credentials")
  .meta({ format: "uri", description: "an absolute https:// URL without credentials, at most 2048 characters", example: "https://example.com/hooks/email" });

export const webhookEvents = z
  .array(z.enum(EVENT_TYPES, { message: `must be one of ${EVENT_TYPES.join(", ")}` }), { message: "must be an array of event types" })
  .min(1, "must list at least one event type")
  .transform((events) => [...new Set(events)])
  .meta({ description: "the event kinds to deliver (at least one; repeats are ignored)" });

export const createWebhookSchema = z.strictObject({ url: httpsUrl, events: webhookEvents });
export type CreateWebhookInput = z.infer<typeof createWebhookSchema>;

export type { WebhookView };

/** `secret_activates_at` of a view: only a pending rotation is shown. */
const pendingActivation = (at: Date | null) => (at && at.getTime() > Date.now() ? at.toISOString() : null);

export function toWebhookView(w: Pick<Webhook, "id" | "url" | "events" | "status" | "disabledReason" | "secretActivatesAt" | "createdAt" | "updatedAt">): WebhookView {
  return {
    id: w.id,
    url: w.url,
    events: w.events as WebhookView["events"],
    status: w.status,
    disabled_reason: w.status === "disabled" ? ((w.disabledReason as WebhookView["disabled_reason"]) ?? "manual") : null,
    secret_activates_at: pendingActivation(w.secretActivatesAt),
    created_at: w.createdAt.toISOString(),
    updated_at: w.updatedAt.toISOString(),
  };
}

/** The view of a row written by @mailhooks/delivery-state. */
function rowView(w: WebhookRow): WebhookView {
  return toWebhookView({
    id: w.id,
    url: w.url,
    events: w.events as WebhookView["events"],
    status: w.status,
    disabledReason: w.disabled_reason,
    secretActivatesAt: w.secret_activates_at,
    createdAt: w.created_at,
    updatedAt: w.updated_at,
  });
}

/** A webhook secret: 32 bytes from the CSPRNG, base64url, with a recognizable prefix. */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

/**
 * Refuses a URL whose host is an IP literal outside the public address space (unless
 * ALLOW_PRIVATE_TARGETS); host names are checked again at every connection by the dispatcher.
 * @throws AppError validation_error naming `path`
 */
export function assertDeliverableUrl(deps: ApiDeps, url: string, path: string): void {
  if (checkDestinationUrl(url, { allowPrivateTargets: deps.config.ALLOW_PRIVATE_TARGETS }) === "blocked_destination") {
    const message = "must not point to a loopback, private, link-local or reserved address";
    throw new AppError("validation_error", `${path}: ${message}`, [{ path, message }]);
  }
}

/**
 * Registers a webhook with its test event: both committed in one transaction (with the test
 * delivery's outbox row), so the answer that shows the secret follows a webhook that will get
 * its test event, whatever Redis is doing.
 * @throws AppError validation_error (blocked address), conflict (MAX_WEBHOOKS_PER_ACCOUNT reached)
 */
export async function createWebhook(deps: ApiDeps, accountId: string, input: CreateWebhookInput): Promise<WebhookWithSecretView> {
  assertDeliverableUrl(deps, input.url, "url");
  const secret = generateSecret();
  const registered = await registerWebhook(deps.pool, {
    accountId,
    queuePrefix: deps.config.QUEUE_PREFIX,
    url: input.url,
    events: input.events,
    secret: deps.keyring.encrypt(secret),
    maxWebhooks: deps.config.MAX_WEBHOOKS_PER_ACCOUNT,
  });
  if (!registered) {
    throw new AppError("conflict", `the account already has the maximum of ${deps.config.MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one first`);
  }
  const view = rowView(registered.webhook);
  return { ...view, secret };
}

/** A live (not deleted) webhook of the account. @throws AppError not_found */
export async function findWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<Webhook> {
  const webhook = await deps.prisma.webhook.findFirst({ where: { id: webhookId, accountId, deletedAt: null } });
  if (!webhook) throw notFound("webhook");
  return webhook;
}

/**
 * The secret of a live webhook of the account (GET /v1/webhooks/{id}/secret): the newest one,
 * which signs from `secret_activates_at` on after a rotation. Stored encrypted; decrypted here
 * only. @throws AppError not_found
 */
export async function getWebhookSecret(deps: ApiDeps, accountId: string, webhookId: string): Promise<string> {
  return deps.keyring.decrypt((await findWebhook(deps, accountId, webhookId)).secret);
}

/** The longest grace period of a rotation, in seconds (7 days). */
export const MAX_GRACE_SECONDS = 604_800;

export const rotateSecretSchema = z.strictObject({
  grace_seconds: z
    .number({ message: "must be a number of seconds" })
    .int("must be a whole number of seconds")
    .min(0, `must be from 0 to ${MAX_GRACE_SECONDS}`)
    .max(MAX_GRACE_SECONDS, `must be from 0 to ${MAX_GRACE_SECONDS}`)
    .default(86_400)
    .meta({ description: "seconds during which the previous secret goes on signing (default one day; 0 switches at once)" }),
});

/**
 * Rotates a webhook's secret (CONTRACT.md section 4): a new secret signs every request from
 * `activates_at` (now + `grace_seconds`) on; until then the previous one goes on signing, so a
 * receiver can install the new one first. The wire format stays one `sha256=` signature.
 * @throws AppError not_found
 */
export async function rotateWebhookSecret(deps: ApiDeps, accountId: string, webhookId: string, graceSeconds: number): Promise<RotatedSecretView> {
  const secret = generateSecret();
  const activatesAt = await rotateSecret(deps.pool, accountId, webhookId, deps.keyring.encrypt(secret), graceSeconds);
  if (!activatesAt) throw notFound("webhook");
  return { secret, activates_at: activatesAt.toISOString() };
}

export const updateWebhookSchema = z.strictObject({
  url: httpsUrl.optional(),
  events: webhookEvents.optional(),
  status: z.enum(["enabled", "disabled"], { message: "must be enabled or disabled" }).optional(),
});
export type UpdateWebhookInput = z.infer<typeof updateWebhookSchema>;

/** The account's live webhooks, newest first; never their secrets. */
export async function listWebhooks(deps: ApiDeps, accountId: string, page: { limit: number; cursor?: Cursor }): Promise<Page<WebhookView>> {
  const rows = await deps.prisma.webhook.findMany({
    where: { accountId, deletedAt: null, ...afterCursor("createdAt", page.cursor) },
    orderBy: newestFirst("createdAt"),
    take: page.limit + 1,
  });
  return toPage(rows, page.limit, (w) => w.createdAt, toWebhookView);
}

/**
 * Changes url, events or status. The secret is kept and no test event is sent. Disabling ends
 * the webhook's pending destinations as `cancelled`: they get no further attempt.
 * @throws AppError not_found
 */
export async function updateWebhook(deps: ApiDeps, accountId: string, webhookId: string, input: UpdateWebhookInput): Promise<WebhookView> {
  if (input.url !== undefined) assertDeliverableUrl(deps, input.url, "url");
  const row = await changeWebhook(deps.pool, accountId, webhookId, input);
  if (!row) throw notFound("webhook");
  return rowView(row);
}

/** Soft-deletes: the webhook answers 404 from now on; its history stays readable; its pending destinations are cancelled. @throws AppError not_found */
export async function deleteWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<void> {
  if (!(await deleteWebhookState(deps.pool, accountId, webhookId))) throw notFound("webhook");
}
