import { createRequire } from "node:module";
import path from "node:path";
import express, { Router } from "express";
import { endSession } from "@mailhooks/access";
import { usesInsecureDevelopmentKey } from "@mailhooks/config";
import { redisKeyPrefix } from "@mailhooks/queue";
import type { ApiDeps } from "../deps.js";
import type { FailureLimiter } from "../http/failure-limiter.js";
import { rateLimitPerAccount } from "../http/rate-limit.js";
import { protectStateChanges } from "./csrf.js";
import { dashboardErrorHandler, notFoundPage } from "./errors.js";
import { tokenLookups } from "./lookup-limit.js";
import { bulkReplayPages } from "./pages/bulk-replay.js";
import { eventPages } from "./pages/events.js";
import { logPages } from "./pages/logs.js";
import { signInPages } from "./pages/sign-in.js";
import { webhookSecretPages } from "./pages/webhook-secret.js";
import { webhookPages } from "./pages/webhooks.js";
import { ASSETS_DIR, render } from "./render.js";
import { dashboardHeaders } from "./security.js";
import { clearSessionCookie, requireSession } from "./session.js";

/**
 * The dashboard (docs/dashboard.md), mounted at /dashboard by app.ts: server-rendered pages
 * for one account at a time, calling the same services as the JSON routes. In order: its strict
 * CSP, static assets (its own, and htmx from node_modules), sign-in by one-time link, then every
 * other page behind a live session, the per-account rate limit and CSRF checks.
 */

const HTMX_FILE = createRequire(import.meta.url).resolve("htmx.org/dist/htmx.min.js");

/**
 * The dashboard's files, mounted at /dashboard/assets: its own (ASSETS_DIR) and htmx from
 * node_modules; the folders are found by module resolution unless given (a test).
 */
export function dashboardAssets(options: { assetsDir?: string; htmxFile?: string } = {}): Router {
  const htmxFile = options.htmxFile ?? HTMX_FILE;
  const router = Router();
  // `root` + name: the dotfiles rule applies to what the request names, not to the install folder
  // (a project under `~/.cache/...`); express.static takes its folder as `root` already.
  router.get("/htmx.min.js", (_req, res, next) =>
    res.sendFile(path.basename(htmxFile), { root: path.dirname(htmxFile), maxAge: "1h" }, (error) => error && next(error)),
  );
  router.use(express.static(options.assetsDir ?? ASSETS_DIR, { index: false, maxAge: "1h", fallthrough: false }));
  return router;
}

/**
 * `failures`: the API's limiter of requests without valid credentials (app.ts), which invalid
 * sign-in links and session cookies meet too; null when UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE is 0.
 */
export function dashboardRouter(deps: ApiDeps, failures: FailureLimiter | null): Router {
  const lookups = tokenLookups(failures, deps.keys);
  const router = Router();
  router.use(dashboardHeaders);
  // Every page says so while webhook secrets are encrypted with the public development key.
  const insecureDevelopmentKey = usesInsecureDevelopmentKey(deps.config);
  router.use((_req, res, next) => {
    res.locals.insecureDevelopmentKey = insecureDevelopmentKey;
    next();
  });
  router.use("/assets", dashboardAssets());
  router.use(express.urlencoded({ extended: false, limit: "64kb", parameterLimit: 100 }));
  router.use(signInPages(deps, lookups));

  router.use(requireSession(deps, lookups));
  // The same Redis keys as the API's limit (app.ts): one allowance per account for both.
  router.use(
    rateLimitPerAccount(
      deps.redis,
      redisKeyPrefix(deps.config.QUEUE_PREFIX, deps.config.REDIS_CLUSTER),
      deps.config.RATE_LIMIT_PER_MINUTE,
      deps.config.RATE_LIMIT_REDIS_TIMEOUT_MS,
    ),
  );
  router.use(protectStateChanges(deps));

  router.get("/", (_req, res) => res.redirect(303, "/dashboard/webhooks"));
  router.post("/sign-out", async (req, res) => {
    await endSession(deps.prisma, req.dashboard!.sessionToken);
    clearSessionCookie(req, res, deps);
    res.locals.session = null;
    render(res, "signed-out", { title: "Signed out", reason: "signed-out" });
  });
  router.use(webhookPages(deps));
  router.use(webhookSecretPages(deps));
  router.use(eventPages(deps));
  router.use(logPages(deps));
  router.use(bulkReplayPages(deps));

  router.use(notFoundPage);
  router.use(dashboardErrorHandler);
  return router;
}
