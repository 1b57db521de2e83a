import { Router } from "express";
import type { ApiDeps } from "../deps.js";

const withTimeout = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);

/** GET /healthz (process up) and GET /readyz (PostgreSQL and Redis reachable, else 503). */
export function healthRouter(deps: ApiDeps): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const [postgres, redis] = await Promise.allSettled([
      withTimeout(deps.prisma.$queryRaw`SELECT 1`, 2_000),
      withTimeout(deps.redis.ping(), 2_000),
    ]);
    const checks = { postgres: postgres.status === "fulfilled" ? "ok" : "unavailable", redis: redis.status === "fulfilled" ? "ok" : "unavailable" };
    if (checks.postgres === "ok" && checks.redis === "ok") {
      res.json({ status: "ready", checks });
      return;
    }
    const details = Object.entries(checks).filter(([, v]) => v !== "ok").map(([path]) => ({ path, message: "unreachable" }));
    res.status(503).json({ error: { code: "unavailable", message: "a backing service is unreachable", details }, checks });
  });
  return router;
}
