import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { hasNoNul, NO_NUL_MESSAGE, parseOrThrow } from "../http/validate.js";
import { paginationShape } from "../http/pagination.js";
import {
  createWebhook,
  createWebhookSchema,
  deleteWebhook,
  findWebhook,
  getWebhookSecret,
  rotateSecretSchema,
  rotateWebhookSecret,
  listWebhooks,
  toWebhookView,
  updateWebhook,
  updateWebhookSchema,
} from "../services/webhooks.js";

export const resourceId = z.string().max(100).refine(hasNoNul, NO_NUL_MESSAGE);

export const listQuery = z.strictObject(paginationShape);

/** /v1/webhooks (CONTRACT.md section 4). */
export function webhooksRouter(deps: ApiDeps): Router {
  const router = Router();

  router.post("/", ...requireJson(), async (req, res) => {
    const input = parseOrThrow(createWebhookSchema, req.body);
    res.status(201).json(await createWebhook(deps, principalOf(req).accountId, input));
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
    const webhook = await findWebhook(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id"));
    res.json(toWebhookView(webhook));
  });

  router.post("/:id/secret/rotate", ...requireJson({ optional: true }), async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const { grace_seconds } = parseOrThrow(rotateSecretSchema, req.body ?? {});
    res.json(await rotateWebhookSecret(deps, principalOf(req).accountId, id, grace_seconds));
  });

  router.get("/:id/secret", async (req, res) => {
    res.json({ secret: await getWebhookSecret(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id")) });
  });

  return router;
}
