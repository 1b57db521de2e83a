import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { principalOf } from "../http/auth.js";
import { paginationShape, timeWindowShape } from "../http/pagination.js";
import { hasNoNul, NO_NUL_MESSAGE, parseOrThrow } from "../http/validate.js";
import { listAuditEntries } from "../services/audit.js";

export const querySchema = z.strictObject({
  event_id: z.string().min(1).max(100).refine(hasNoNul, NO_NUL_MESSAGE).optional(),
  ...timeWindowShape,
  ...paginationShape,
});

/** GET /v1/audit-log (docs/api.md, "Audit log"). There is no route that changes an entry. */
export function auditRouter(deps: ApiDeps): Router {
  const router = Router();
  router.get("/", async (req, res) => {
    res.json(await listAuditEntries(deps, principalOf(req).accountId, parseOrThrow(querySchema, req.query, "query")));
  });
  return router;
}
