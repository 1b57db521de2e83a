import { randomBytes } from "node:crypto";
import { z } from "zod";
import { newId, type Webhook } from "@mailhooks/db";
import { EVENT_TYPES } from "@mailhooks/events";
import { checkDestinationUrl } from "@mailhooks/url-policy";
import { requireQueue, type ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import { afterCursor, newestFirst, toPage, type Cursor, type Page } from "../http/pagination.js";

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
  }, "must not carry credentials");

export const webhookEvents = z
  .array(z.enum(EVENT_TYPES, { message: `must be one of ${EVENT_TYPES.join(", ")}` }), { message: "must be an array of event types" })
  .min(1, "must list at least one event type")
  .transform((events) => [...new Set(events)]);

export const createWebhookSchema = z.strictObject({ url: httpsUrl, events: webhookEvents });
export type CreateWebhookInput = z.infer<typeof createWebhookSchema>;

export interface WebhookView {
  id: string;
  url: string;
  events: string[];
  status: string;
  created_at: string;
  updated_at: string;
}

export function toWebhookView(w: Webhook): WebhookView {
  return { id: w.id, url: w.url, events: w.events, status: w.status, created_at: w.createdAt.toISOString(), updated_at: w.updatedAt.toISOString() };
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
 * Registers a webhook and queues its test event. Redis is checked first so that a webhook is not
 * created whose test event could not be queued.
 * @throws AppError validation_error (blocked address), conflict (MAX_WEBHOOKS_PER_ACCOUNT reached)
 */
export async function createWebhook(deps: ApiDeps, accountId: string, input: CreateWebhookInput): Promise<WebhookView & { secret: string }> {
  assertDeliverableUrl(deps, input.url, "url");
  requireQueue(deps);
  const live = await deps.prisma.webhook.count({ where: { accountId, deletedAt: null } });
  if (live >= deps.config.MAX_WEBHOOKS_PER_ACCOUNT) {
    throw new AppError("conflict", `the account already has the maximum of ${deps.config.MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one first`);
  }
  const webhook = await deps.prisma.webhook.create({
    data: { id: newId("wh"), accountId, url: input.url, events: input.events, secret: generateSecret() },
  });
  await deps.queue.addTestDelivery({ webhookId: webhook.id, accountId });
  const view = toWebhookView(webhook);
  return { id: view.id, url: view.url, events: view.events, secret: webhook.secret, status: view.status, created_at: view.created_at, updated_at: view.updated_at };
}

/** A live (not deleted) webhook of the account. @throws AppError not_found */
export async function findWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<Webhook> {
  const webhook = await deps.prisma.webhook.findFirst({ where: { id: webhookId, accountId, deletedAt: null } });
  if (!webhook) throw notFound("webhook");
  return webhook;
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
 * Changes url, events or status. The secret is kept and no test event is sent. A disabled
 * webhook gets no new deliveries, and its scheduled retries are dropped when they come due.
 * @throws AppError not_found
 */
export async function updateWebhook(deps: ApiDeps, accountId: string, webhookId: string, input: UpdateWebhookInput): Promise<WebhookView> {
  if (input.url !== undefined) assertDeliverableUrl(deps, input.url, "url");
  const result = await deps.prisma.webhook.updateManyAndReturn({
    where: { id: webhookId, accountId, deletedAt: null },
    data: { ...input, updatedAt: new Date() },
  });
  if (result.length === 0) throw notFound("webhook");
  return toWebhookView(result[0]);
}

/** Soft-deletes: the webhook answers 404 from now on; its history stays readable. @throws AppError not_found */
export async function deleteWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<void> {
  const result = await deps.prisma.webhook.updateMany({
    where: { id: webhookId, accountId, deletedAt: null },
    data: { deletedAt: new Date(), status: "disabled" },
  });
  if (result.count === 0) throw notFound("webhook");
}
