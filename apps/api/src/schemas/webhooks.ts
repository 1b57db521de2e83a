import { z } from "zod";
import { SUBSCRIBABLE_EVENT_TYPES } from "@mailhooks/events";
import { SIGNATURE_SCHEMES } from "@mailhooks/signing";
import { prefixedId, timestamp } from "./common.js";

/** How a webhook gets its deliveries: sent to its URL, or pulled by its developer (docs/develop-locally.md). */
export const WEBHOOK_MODES = ["push", "listen"] as const;

/** The webhook object (docs/api.md, "Webhooks"). The secret appears only in `webhookWithSecretSchema`. */

export const webhookId = prefixedId("wh", "webhook id");

export const webhookSchema = z
  .object({
    id: webhookId,
    url: z
      .string()
      .nullable()
      .meta({ description: "the https:// endpoint, as registered; null for a listen webhook", example: "https://example.com/hooks/email" }),
    mode: z.enum(WEBHOOK_MODES).meta({
      description:
        "push: the service POSTs to `url`; listen: nothing is sent, its deliveries wait until pulled (GET /v1/webhooks/{id}/pending; docs/develop-locally.md)",
      example: "push",
    }),
    events: z
      .array(z.enum(SUBSCRIBABLE_EVENT_TYPES))
      .meta({ description: 'the event kinds delivered to it: email kinds and operational kinds (docs/api.md, "Operational events")' }),
    status: z
      .enum(["enabled", "paused", "disabled"])
      .meta({ description: "paused: events still become its destinations and wait; disabled: no new deliveries" }),
    disabled_reason: z.enum(["manual", "failing", "idle"]).nullable().meta({
      description:
        "null unless disabled; `manual` (PATCH), `failing` (every attempt failed for WEBHOOK_AUTO_DISABLE_AFTER_HOURS across at least 20 events) or `idle` (a listen webhook not pulled for LISTEN_IDLE_HOURS)",
    }),
    secret_activates_at: timestamp.nullable().meta({
      description: "while a rotation is pending: when its new secret starts signing (until then the previous one signs); else null",
    }),
    rate_limit: z.number().int().min(1).max(1000).nullable().meta({
      description: "the most requests per second sent to it, over every trigger and across all dispatchers; null: no limit",
      example: 50,
    }),
    inbox_ids: z
      .array(z.string())
      .nullable()
      .meta({
        description: "the inboxes whose events it receives; null: every inbox of the account",
        example: ["inbox_support", "inbox_sales"],
      }),
    headers: z.record(z.string(), z.literal("***")).meta({
      description: "its extra request headers by name; values are secrets and are never answered (always `***`); `{}`: none",
      example: { Authorization: "***" },
    }),
    signature_scheme: z.enum(SIGNATURE_SCHEMES).meta({
      description:
        "how its requests are signed: `service` (X-Service-Timestamp, X-Service-Signature) or `standard` (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature; during a rotation's grace both secrets sign)",
      example: "service",
    }),
    last_pulled_at: timestamp.nullable().meta({ description: "a listen webhook's last pull; null: never pulled, or a push webhook" }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Webhook" });
export type WebhookView = z.infer<typeof webhookSchema>;

const secret = z.string().meta({
  description:
    "`whsec_` and the standard base64 of 32 random bytes (or of the caller's own secret). The HMAC-SHA256 key of X-Service-Signature is this whole text's UTF-8 bytes; of webhook-signature (`standard`), the bytes its base64 decodes to",
  example: "whsec_kR1b0Xx0e2mU4lQ8sT6yV9zA3cF5hJ7nP1rW4tY6uI8=",
});

/** POST /v1/webhooks: the webhook and its secret, shown here and by GET /v1/webhooks/{id}/secret only. */
export const webhookWithSecretSchema = webhookSchema.extend({ secret }).meta({ id: "WebhookWithSecret" });
export type WebhookWithSecretView = z.infer<typeof webhookWithSecretSchema>;

export const webhookSecretSchema = z.object({ secret }).meta({ id: "WebhookSecret" });

/** POST /v1/webhooks/{id}/secret/rotate. */
export const rotatedSecretSchema = z
  .object({
    secret: secret.meta({ description: "the new secret" }),
    activates_at: timestamp.meta({ description: "from this time on the new secret signs every request; until then the previous one does" }),
  })
  .meta({ id: "RotatedSecret" });
export type RotatedSecretView = z.infer<typeof rotatedSecretSchema>;

/** POST /v1/webhooks/{id}/test. */
export const testRequestedSchema = z
  .object({
    delivery_id: prefixedId(
      "dlv",
      'the id of the delivery row (`trigger: "test"`, `event_id: null`) its one attempt writes (GET /v1/deliveries)',
    ),
  })
  .meta({ id: "TestRequested" });
export type TestRequestedView = z.infer<typeof testRequestedSchema>;
