import express, { type Express } from "express";
import type { Queue } from "bullmq";
import type { ApiConfig } from "@mailhooks/config";
import { ADMIN_PATH, basicAuth, queueBoard } from "./http/admin.js";
import { createFailureLimiter } from "./http/failure-limiter.js";

/** Failed operator sign-ins one address may make per minute before it must wait. */
export const ADMIN_FAILED_SIGN_INS_PER_MINUTE = 10;

/**
 * The operators' listener (ADMIN_HOST:ADMIN_PORT, loopback by default; never the public PORT):
 * the queue board behind basic auth (ADMIN_USERNAME/ADMIN_PASSWORD), read-only unless
 * ADMIN_READ_WRITE=true. It never believes X-Forwarded-For (TRUST_PROXY is for PORT). Null when
 * no credentials are configured: then there is no board at all.
 */
export function createAdminApp(config: ApiConfig, queues: Queue[]): Express | null {
  const { ADMIN_USERNAME, ADMIN_PASSWORD } = config;
  if (!ADMIN_USERNAME || !ADMIN_PASSWORD) return null;
  const app = express();
  app.disable("x-powered-by");
  // Nothing sits in front of this listener: X-Forwarded-For is the client's own invention here,
  // whatever TRUST_PROXY says for PORT. The failed sign-in limit counts the connection's address.
  app.set("trust proxy", false);
  const failures = createFailureLimiter({ keyPrefix: "admin", limit: ADMIN_FAILED_SIGN_INS_PER_MINUTE, windowMs: 60_000 });
  app.use(ADMIN_PATH, basicAuth(ADMIN_USERNAME, ADMIN_PASSWORD, failures), queueBoard(queues, config.ADMIN_READ_WRITE));
  app.use((_req, res) => void res.status(404).json({ error: { code: "not_found", message: "not found" } }));
  return app;
}
