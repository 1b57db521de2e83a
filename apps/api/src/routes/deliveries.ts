import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { principalOf } from "../http/auth.js";
import { paginationShape } from "../http/pagination.js";
import { hasNoNul, NO_NUL_MESSAGE, parseOrThrow } from "../http/validate.js";
import { listDeliveries } from "../services/deliveries.js";

export const querySchema = z.strictObject({
  event_id: z.string().min(1).max(100).refine(hasNoNul, NO_NUL_MESSAGE).optional(),
  webhook_id: z.string().min(1).max(100).refine(hasNoNul, NO_NUL_MESSAGE).optional(),
  ...paginationShape,
});

/** GET /v1/deliveries (docs/api.md, "Deliveries log"). */
export function deliveriesRouter(deps: ApiDeps): Router {
  const router = Router();
  router.get("/", async (req, res) => {
    const query = parseOrThrow(querySchema, req.query, "query");
    res.json(await listDeliveries(deps, principalOf(req).accountId, query));
  });
  return router;
}
