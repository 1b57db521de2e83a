import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { parseOrThrow } from "../http/validate.js";
import { createWebhook, createWebhookSchema, findWebhook, toWebhookView } from "../services/webhooks.js";

export const resourceId = z.string().max(100);

/** /v1/webhooks (CONTRACT.md section 4). */
export function webhooksRouter(deps: ApiDeps): Router {
  const router = Router();

  router.post("/", ...requireJson(), async (req, res) => {
    const input = parseOrThrow(createWebhookSchema, req.body);
    res.status(201).json(await createWebhook(deps, principalOf(req).accountId, input));
  });

  router.get("/:id", async (req, res) => {
    const webhook = await findWebhook(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id"));
    res.json(toWebhookView(webhook));
  });

  router.get("/:id/secret", async (req, res) => {
    const webhook = await findWebhook(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id"));
    res.json({ secret: webhook.secret });
  });

  return router;
}
