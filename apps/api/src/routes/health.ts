import { Router } from "express";
import type { ApiDeps } from "../deps.js";

const withTimeout = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);

/**
 * GET /healthz (process up) and GET /readyz (CONTRACT.md section 8): ready while PostgreSQL
 * answers, since that is all accepting needs (Redis away only delays deliveries); the body names
 * the state of both, e.g. `{"status":"ready","checks":{"postgres":"ok","redis":"unavailable"}}`.
 */
export function healthRouter(deps: ApiDeps): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const [postgres, redis] = await Promise.allSettled([withTimeout(deps.pool.query("SELECT 1"), 2_000), withTimeout(deps.redis.ping(), 2_000)]);
    const checks = { postgres: postgres.status === "fulfilled" ? "ok" : "unavailable", redis: redis.status === "fulfilled" ? "ok" : "unavailable" };
    if (checks.postgres === "ok") {
      res.json({ status: "ready", checks });
      return;
    }
    res.status(503).json({ error: { code: "unavailable", message: "PostgreSQL is unreachable", details: [{ path: "postgres", message: "unreachable" }] }, checks });
  });
  return router;
}
