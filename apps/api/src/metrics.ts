import type { Queue } from "bullmq";
import type { RequestHandler, Router } from "express";
import { Router as createRouter } from "express";
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { registerQueueDepthGauge } from "@mailhooks/queue";

/**
 * The API's Prometheus metrics at GET /metrics (no authentication, docs/api.md, "Service routes"):
 * requests by route and status, their duration in seconds, the deliveries queue by state, and
 * the API key lookups that reached PostgreSQL.
 */
export interface ApiMetrics {
  registry: Registry;
  middleware: RequestHandler;
  router: Router;
}

/** The values of the `method` label besides `other`: the methods the API's routes answer. */
const METHOD_LABELS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * `mounts`: the paths the app mounts its routers at (e.g. "/v1/events"), in the code's own
 * letter case. A request's route label is its mount point and its route's pattern (`/v1/events/:id`),
 * taken from this list and the code, never from the request's text: Express matches paths
 * case-insensitively, so `req.baseUrl` is `/V1/EVENTS` for such a request, and an unauthenticated
 * client could otherwise add series without end. Requests no route answered share `unmatched`.
 */
export function createApiMetrics(queue: Queue, keys?: { readonly lookups: number }, mounts: readonly string[] = []): ApiMetrics {
  const mountsByLowerCase = new Map(["", ...mounts].map((mount) => [mount.toLowerCase(), mount]));
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "http_requests_total",
    help: "API requests by route and status",
    labelNames: ["method", "route", "status"],
    registers: [registry],
  });
  const duration = new Histogram({
    name: "http_request_duration_seconds",
    help: "API request duration",
    labelNames: ["method", "route"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  registerQueueDepthGauge(registry, queue);
  if (keys) {
    let reported = 0;
    new Counter({
      name: "api_key_lookups_total",
      help: "API key lookups that reached PostgreSQL (the rest were answered from the caches)",
      registers: [registry],
      collect() {
        this.inc(keys.lookups - reported);
        reported = keys.lookups;
      },
    });
  }

  /** The method label: one of the methods the API answers, else `other` (Node parses 34, any client may send them). */
  const methodLabel = (method: string): string => (METHOD_LABELS.has(method) ? method : "other");
  const middleware: RequestHandler = (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const route = routeLabel(req.baseUrl, (req.route as { path?: unknown } | undefined)?.path);
      const method = methodLabel(req.method);
      requests.inc({ method, route, status: String(res.statusCode) });
      duration.observe({ method, route }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
  /** The matched route's pattern, never the raw path: neither ids nor letter case become label values. */
  const routeLabel = (baseUrl: string, pattern: unknown): string => {
    const mount = mountsByLowerCase.get(baseUrl.toLowerCase());
    return typeof pattern === "string" && mount !== undefined ? `${mount}${pattern}` : "unmatched";
  };

  const router = createRouter();
  router.get("/metrics", async (_req, res) => {
    res.setHeader("content-type", registry.contentType);
    res.send(await registry.metrics());
  });
  return { registry, middleware, router };
}
