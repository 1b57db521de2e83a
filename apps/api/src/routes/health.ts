import { Router } from "express";
import { usesInsecureDevelopmentKey } from "@mailhooks/config";
import type { ApiDeps } from "../deps.js";

/** The warning of /readyz, and the dashboard's banner (layout.eta), when the public key is in use. */
export const INSECURE_DEVELOPMENT_KEY_WARNING =
  "webhook secrets are encrypted with the public development key (INSECURE_DEVELOPMENT_KEY): anyone can decrypt them; set SECRET_ENCRYPTION_KEYS (e.g. `openssl rand -base64 32`) and NODE_ENV=production for anything but development";

const withTimeout = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);

/**
 * GET /healthz (process up) and GET /readyz (docs/api.md, "Service routes"): ready while PostgreSQL
 * answers, since that is all accepting needs (Redis away only delays deliveries); the body names
 * the state of both, e.g. `{"status":"ready","checks":{"postgres":"ok","redis":"unavailable"}}`.
 * Either body carries `warnings` while secrets are encrypted with the public development key
 * (no SECRET_ENCRYPTION_KEYS outside production), so that it shows wherever readiness is watched.
 */
export function healthRouter(deps: ApiDeps): Router {
  const router = Router();
  const warnings = usesInsecureDevelopmentKey(deps.config)
    ? { warnings: [{ code: "insecure_development_key", message: INSECURE_DEVELOPMENT_KEY_WARNING }] }
    : {};
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const [postgres, redis] = await Promise.allSettled([
      withTimeout(deps.pool.query("SELECT 1"), 2_000),
      withTimeout(deps.redis.ping(), 2_000),
    ]);
    const checks = {
      postgres: postgres.status === "fulfilled" ? "ok" : "unavailable",
      redis: redis.status === "fulfilled" ? "ok" : "unavailable",
    };
    if (checks.postgres === "ok") {
      res.json({ status: "ready", checks, ...warnings });
      return;
    }
    res.status(503).json({
      error: { code: "unavailable", message: "PostgreSQL is unreachable", details: [{ path: "postgres", message: "unreachable" }] },
      checks,
      ...warnings,
    });
  });
  return router;
}
