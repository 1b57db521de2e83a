import express, { type Express } from "express";
import helmet from "helmet";
import { createUsageRecorder } from "@mailhooks/access";
import { redisKeyPrefix } from "@mailhooks/queue";
import { completeDeps } from "./deps.js";
import { AppError } from "./errors.js";
import { errorHandler } from "./http/error-handler.js";
import { requireApiKey } from "./http/auth.js";
import { createFailureLimiter } from "./http/failure-limiter.js";
import { rateLimitPerAccount } from "./http/rate-limit.js";
import { dashboardRouter } from "./dashboard/index.js";
import { auditRouter } from "./routes/audit.js";
import { dashboardLinksRouter } from "./routes/dashboard-links.js";
import { deliveriesRouter } from "./routes/deliveries.js";
import { eventsRouter } from "./routes/events.js";
import { healthRouter } from "./routes/health.js";
import { createApiMetrics } from "./metrics.js";
import { openApiRouter } from "./openapi/router.js";
import { inboundRouter } from "./routes/inbound.js";
import { webhooksRouter } from "./routes/webhooks.js";

/** Where app.ts mounts its routers: the route labels of the metrics are made of these. */
const V1_MOUNTS = ["/webhooks", "/events", "/inboxes", "/deliveries", "/audit-log", "/dashboard-links"] as const;
const MOUNTS = ["/v1", ...V1_MOUNTS.map((mount) => `/v1${mount}`), "/dashboard"];

/**
 * The Express application of the public API on PORT; `deps` are built by main.ts or by a test.
 * The operators' board is not here: see admin-app.ts (ADMIN_HOST:ADMIN_PORT).
 */
export function createApp(given: Parameters<typeof completeDeps>[0]): Express {
  const deps = completeDeps(given);
  const app = express();
  app.disable("x-powered-by");
  app.set("query parser", "simple");
  // Conditional GETs are not how this API is used; hashing every answer is not free.
  app.set("etag", false);
  app.set("trust proxy", deps.config.TRUST_PROXY);
  app.use(helmet());
  const bodyIdleTimeoutMs = deps.config.HTTP_BODY_IDLE_TIMEOUT_MS;
  app.use((_req, res, next) => {
    res.locals.bodyIdleTimeoutMs = bodyIdleTimeoutMs;
    next();
  });
  const metrics = createApiMetrics(deps.queue, deps.keys, MOUNTS);
  app.use(metrics.middleware);
  app.use(healthRouter(deps));
  app.use(metrics.router);
  app.use(openApiRouter());

  const keyPrefix = redisKeyPrefix(deps.config.QUEUE_PREFIX, deps.config.REDIS_CLUSTER);
  const perMinute = deps.config.UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE;
  const failures =
    perMinute > 0
      ? createFailureLimiter({
          redis: deps.redis,
          keyPrefix: `${keyPrefix}:authfail`,
          limit: perMinute,
          windowMs: 60_000,
          redisTimeoutMs: deps.config.RATE_LIMIT_REDIS_TIMEOUT_MS,
        })
      : null;
  const v1 = express.Router();
  v1.use(requireApiKey({ keys: deps.keys, failures, recordUsage: createUsageRecorder(deps.prisma) }));
  v1.use(rateLimitPerAccount(deps.redis, keyPrefix, deps.config.RATE_LIMIT_PER_MINUTE, deps.config.RATE_LIMIT_REDIS_TIMEOUT_MS));
  v1.use("/webhooks", webhooksRouter(deps));
  v1.use("/events", eventsRouter(deps));
  v1.use("/inboxes", inboundRouter(deps));
  v1.use("/deliveries", deliveriesRouter(deps));
  v1.use("/audit-log", auditRouter(deps));
  v1.use("/dashboard-links", dashboardLinksRouter(deps));
  app.use("/v1", v1);
  app.use("/dashboard", dashboardRouter(deps, failures));

  app.use((req, _res, next) => next(new AppError("not_found", "route_not_found", `no route for ${req.method} ${req.path}`)));
  app.use(errorHandler);
  return app;
}
