import { z } from "zod";

/**
 * Configuration from the environment (CONTRACT.md section 2), parsed once per process at
 * start-up by one zod schema. Nothing else in the code reads `process.env`.
 */

const bool = z
  .enum(["true", "false", "1", "0"], { message: "must be true or false" })
  .transform((v) => v === "true" || v === "1");

const port = z.coerce.number().int().min(0).max(65535);

/** Three comma-separated positive integers of milliseconds, e.g. `10000,60000,300000`: the spec
 * makes exactly three automatic retries. */
const retryDelays = z
  .string()
  .regex(/^\s*\d+\s*,\s*\d+\s*,\s*\d+\s*$/, "must be three comma-separated delays in milliseconds")
  .transform((v) => v.split(",").map((s) => Number(s.trim())))
  .refine((delays) => delays.every((d) => d > 0), "every delay must be positive");

const postgresUrl = z.string().regex(/^postgres(ql)?:\/\//, "must be a postgresql:// URL");
const redisUrl = z.string().regex(/^rediss?:\/\//, "must be a redis:// URL");

const shared = {
  /** PostgreSQL connection string. */
  DATABASE_URL: postgresUrl.default("postgresql://postgres@127.0.0.1:5432/webhooks"),
  /** Redis used by BullMQ. */
  REDIS_URL: redisUrl.default("redis://127.0.0.1:6379"),
  /** BullMQ key prefix; lets several deployments or test runs share one Redis. */
  QUEUE_PREFIX: z.string().regex(/^[A-Za-z0-9_.-]+$/, "must be letters, digits, _ . or -").default("whk"),
  /** The three retry delays of the spec, in ms, each counted from the failed attempt's end. */
  DELIVERY_RETRY_DELAYS_MS: retryDelays.default([10_000, 60_000, 300_000]),
  /** How long a receiver has to answer 2xx, in ms. */
  DELIVERY_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** Days an event payload is kept for replay. */
  EVENT_RETENTION_DAYS: z.coerce.number().int().positive().default(90),
  /** Allow deliveries to loopback, private and other non-public addresses. */
  ALLOW_PRIVATE_TARGETS: bool.default(false),
  /** Size of the PostgreSQL connection pool of this process. */
  DATABASE_POOL_SIZE: z.coerce.number().int().positive().max(200).default(10),
  /** winston level. */
  LOG_LEVEL: z.enum(["error", "warn", "info", "http", "verbose", "debug", "silly"]).default("info"),
  /** `json` in production, `pretty` for people. */
  LOG_FORMAT: z.enum(["json", "pretty"]).default("json"),
};

export const apiConfigSchema = z.object({
  ...shared,
  /** API port. */
  PORT: port.default(3000),
  /** Requests one API key may make per minute, across all API replicas (0: no limit). */
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).default(6_000),
  /** Live webhooks one account may have. */
  MAX_WEBHOOKS_PER_ACCOUNT: z.coerce.number().int().positive().default(100),
  /** HTTP basic credentials of the queue board at /admin/queues; unset: not mounted. */
  ADMIN_USERNAME: z.string().min(1).optional(),
  ADMIN_PASSWORD: z.string().min(1).optional(),
});

export const dispatcherConfigSchema = z.object({
  ...shared,
  /** Port of the dispatcher's Prometheus /metrics. */
  METRICS_PORT: port.default(9464),
  /** Delivery attempts one dispatcher process runs at once. */
  DISPATCHER_CONCURRENCY: z.coerce.number().int().positive().max(1000).default(64),
  /** Lock of a job being delivered, in ms; a killed dispatcher's jobs move on after about this. */
  DISPATCHER_LOCK_DURATION_MS: z.coerce.number().int().min(1_000).default(30_000),
  /** How often dispatchers look for jobs whose dispatcher died, in ms. */
  DISPATCHER_STALLED_INTERVAL_MS: z.coerce.number().int().min(500).default(30_000),
  /** How often pending destinations that never got a job are looked for, in ms. */
  SWEEP_INTERVAL_MS: z.coerce.number().int().min(1_000).default(30_000),
  /** A destination with no attempt after this long (ms) is re-queued by the sweeper. */
  SWEEP_AFTER_MS: z.coerce.number().int().min(1_000).default(60_000),
});

export type ApiConfig = z.infer<typeof apiConfigSchema>;
export type DispatcherConfig = z.infer<typeof dispatcherConfigSchema>;

/** Thrown by `loadConfig`; the message names every bad variable. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * Parses `env` with `schema`. Empty strings count as unset so that `VAR=` means the default.
 * @throws ConfigError naming each invalid variable and why.
 */
export function loadConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.infer<S> {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join("; ")}`);
  }
  return result.data;
}
