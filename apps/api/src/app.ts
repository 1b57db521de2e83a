import express, { type Express } from "express";
import helmet from "helmet";
import type { Queue } from "bullmq";
import type { ApiDeps } from "./deps.js";
import { AppError, errorHandler } from "./errors.js";
import { ADMIN_PATH, basicAuth, queueBoard } from "./http/admin.js";
import { requireApiKey } from "./http/auth.js";
import { rateLimitPerKey } from "./http/rate-limit.js";
import { auditRouter } from "./routes/audit.js";
import { deliveriesRouter } from "./routes/deliveries.js";
import { eventsRouter } from "./routes/events.js";
import { healthRouter } from "./routes/health.js";
import { createApiMetrics } from "./metrics.js";
import { inboundRouter } from "./routes/inbound.js";
import { webhooksRouter } from "./routes/webhooks.js";

/**
 * The Express application of the REST API; `deps` are built by main.ts or by a test.
 * `boardQueues` are shown on the operators' board when ADMIN_USERNAME/ADMIN_PASSWORD are set.
 */
export function createApp(deps: ApiDeps, boardQueues: Queue[] = [deps.queue.queue]): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("query parser", "simple");
  app.use(helmet());
  const metrics = createApiMetrics(deps.queue.queue);
  app.use(metrics.middleware);
  app.use(healthRouter(deps));
  app.use(metrics.router);
  const { ADMIN_USERNAME, ADMIN_PASSWORD } = deps.config;
  if (ADMIN_USERNAME && ADMIN_PASSWORD) app.use(ADMIN_PATH, basicAuth(ADMIN_USERNAME, ADMIN_PASSWORD), queueBoard(boardQueues));

  const v1 = express.Router();
  v1.use(requireApiKey(deps.prisma));
  v1.use(rateLimitPerKey(deps.redis, deps.config.QUEUE_PREFIX, deps.config.RATE_LIMIT_PER_MINUTE));
  v1.use("/webhooks", webhooksRouter(deps));
  v1.use("/events", eventsRouter(deps));
  v1.use("/inboxes", inboundRouter(deps));
  v1.use("/deliveries", deliveriesRouter(deps));
  v1.use("/audit-log", auditRouter(deps));
  app.use("/v1", v1);

  app.use((req, _res, next) => next(new AppError("not_found", `no route for ${req.method} ${req.path}`)));
  app.use(errorHandler);
  return app;
}
