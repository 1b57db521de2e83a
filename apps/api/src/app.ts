import express, { type Express } from "express";
import type { ApiDeps } from "./deps.js";
import { AppError, errorHandler } from "./errors.js";
import { requireApiKey } from "./http/auth.js";
import { auditRouter } from "./routes/audit.js";
import { deliveriesRouter } from "./routes/deliveries.js";
import { eventsRouter } from "./routes/events.js";
import { healthRouter } from "./routes/health.js";
import { inboundRouter } from "./routes/inbound.js";
import { webhooksRouter } from "./routes/webhooks.js";

/** The Express application of the REST API; `deps` are built by main.ts or by a test. */
export function createApp(deps: ApiDeps): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("query parser", "simple");
  app.use(healthRouter(deps));

  const v1 = express.Router();
  v1.use(requireApiKey(deps.prisma));
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
