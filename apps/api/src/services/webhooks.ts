import { randomBytes } from "node:crypto";
import { z } from "zod";
import { newId, type Webhook } from "@mailhooks/db";
import { EVENT_TYPES } from "@mailhooks/events";
import type { ApiDeps } from "../deps.js";
import { notFound } from "../errors.js";

/** Webhook registration (spec "Webhook registration"; CONTRACT.md section 4). */

/** An absolute https:// URL: the only scheme ever delivered to. */
export const httpsUrl = z
  .string({ message: "must be a string" })
  .max(2048, "must be at most 2048 characters")
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
 * Registers a webhook and queues its test event. Redis is checked first so that a webhook is not
 * created whose test event could not be queued.
 */
export async function createWebhook(deps: ApiDeps, accountId: string, input: CreateWebhookInput): Promise<WebhookView & { secret: string }> {
  await deps.redis.ping();
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
