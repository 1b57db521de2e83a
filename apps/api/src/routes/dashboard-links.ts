import { Router } from "express";
import { z } from "zod";
import { createDashboardLink } from "@mailhooks/access";
import type { ApiDeps } from "../deps.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { publicBaseUrl } from "../http/public-url.js";
import { parseOrThrow } from "../http/validate.js";

/** No field yet: an empty object (or no body at all). */
const linkRequest = z.strictObject({});

/**
 * POST /v1/dashboard-links (docs/dashboard.md) → 201 `{url, expires_at}`: a one-time
 * dashboard sign-in link for the caller's account, tied to the calling key.
 */
export function dashboardLinksRouter(deps: ApiDeps): Router {
  const router = Router();
  router.post("/", ...requireJson({ optional: true }), async (req, res) => {
    parseOrThrow(linkRequest, req.body ?? {});
    res.status(201).json(await createDashboardLink(deps.prisma, principalOf(req), publicBaseUrl(req, deps.config)));
  });
  return router;
}
