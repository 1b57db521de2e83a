import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { hasNoNul, NO_NUL_MESSAGE, parseOrThrow } from "../http/validate.js";
import { paginationShape } from "../http/pagination.js";
import { exampleKindOf, requestTestDelivery, testDeliveryRequestSchema } from "../services/webhook-health.js";
import { createWebhookSchema, updateWebhookSchema } from "../services/webhook-input.js";
import { createWebhook, deleteWebhook, getWebhook, listWebhooks, updateWebhook } from "../services/webhooks.js";
import { getWebhookSecret, rotateSecretSchema, rotateWebhookSecret } from "../services/webhook-secrets.js";
import { answerPending, pendingAnswerSchema, pendingQuerySchema, pullPending } from "../services/pending.js";
import { idempotencyFrom } from "./events.js";

export const resourceId = z.string().max(100).refine(hasNoNul, NO_NUL_MESSAGE);

export const listQuery = z.strictObject(paginationShape);

/** /v1/webhooks (docs/api.md, "Webhooks"). */
export function webhooksRouter(deps: ApiDeps): Router {
  const router = Router();

  router.post("/", ...requireJson(), async (req, res) => {
    const input = parseOrThrow(createWebhookSchema, req.body);
    // As for events: a repeat of the key within 24 h with the same bytes answers the first webhook.
    const idempotency = idempotencyFrom(req, req.rawBody);
    const { webhook, created } = await createWebhook(deps, principalOf(req).accountId, input, idempotency);
    res.status(created ? 201 : 200).json(webhook);
  });

  router.get("/", async (req, res) => {
    res.json(await listWebhooks(deps, principalOf(req).accountId, parseOrThrow(listQuery, req.query, "query")));
  });

  router.patch("/:id", ...requireJson(), async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const input = parseOrThrow(updateWebhookSchema, req.body);
    res.json(await updateWebhook(deps, principalOf(req).accountId, id, input));
  });

  router.delete("/:id", async (req, res) => {
    await deleteWebhook(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id"));
    res.status(204).end();
  });

  router.get("/:id", async (req, res) => {
    res.json(await getWebhook(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id")));
  });

  router.post("/:id/secret/rotate", ...requireJson({ optional: true }), async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const { grace_seconds } = parseOrThrow(rotateSecretSchema, req.body ?? {});
    res.json(await rotateWebhookSecret(deps, principalOf(req).accountId, id, grace_seconds));
  });

  router.post("/:id/test", ...requireJson({ optional: true }), async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const { event_type } = parseOrThrow(testDeliveryRequestSchema, req.body ?? {});
    res.status(202).json({ delivery_id: await requestTestDelivery(deps, principalOf(req).accountId, id, exampleKindOf(event_type)) });
  });

  router.get("/:id/pending", async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const query = parseOrThrow(pendingQuerySchema, req.query, "query");
    // A client that goes away ends its wait (and frees its place among the waiting pulls).
    const gone = new AbortController();
    res.once("close", () => gone.abort());
    res.json(await pullPending(deps, principalOf(req).accountId, id, query, gone.signal));
  });

  router.post("/:id/pending/:deliveryId", ...requireJson(), async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const deliveryId = parseOrThrow(resourceId, req.params.deliveryId, "delivery_id");
    const answer = parseOrThrow(pendingAnswerSchema, req.body);
    res.json(await answerPending(deps, principalOf(req).accountId, id, deliveryId, answer));
  });

  router.get("/:id/secret", async (req, res) => {
    res.json({ secret: await getWebhookSecret(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id")) });
  });

  return router;
}
