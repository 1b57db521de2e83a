import { isIP } from "node:net";
import { z } from "zod";
import { INSECURE_DEVELOPMENT_KEY, parseKeys } from "@mailhooks/secrets";
import { parsePrivateTargets, type PrivateTargets } from "@mailhooks/url-policy";

/**
 * Configuration from the environment (docs/configuration.md), parsed once per process at
 * start-up by one zod schema. Nothing else in the code reads `process.env`.
 */

const bool = z.enum(["true", "false", "1", "0"], { message: "must be true or false" }).transform((v) => v === "true" || v === "1");

const port = z.coerce.number().int().min(0).max(65535);

/** Three comma-separated positive integers of milliseconds, e.g. `10000,60000,300000`: the spec
 * makes exactly three automatic retries. */
const retryDelays = z
  .string()
  .regex(/^\s*\d+\s*,\s*\d+\s*,\s*\d+\s*$/, "must be three comma-separated delays in milliseconds")
  .transform((v) => v.split(",").map((s) => Number(s.trim())))
  .refine((delays) => delays.every((d) => d > 0), "every delay must be positive");

/** Comma-separated base64 32-byte keys; the list, each key checked. */
const secretKeys = z.string().transform((value, ctx) => {
  const keys = value
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
  try {
    parseKeys(keys);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
  return keys;
});

/** One trusted proxy for TRUST_PROXY: an address, a CIDR range, or one of Express's names. */
function isProxyAddress(entry: string): boolean {
  if (["loopback", "linklocal", "uniquelocal"].includes(entry)) return true;
  const [address, bits, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}

/**
 * TRUST_PROXY as Express's `trust proxy` setting, never `true` (which would believe the
 * left-most X-Forwarded-For entry, written by the client): `false`; a number of hops (`true` is
 * 1); or the list of trusted proxies' addresses and ranges.
 */
const trustProxy = z.string().transform((value, ctx): false | number | string[] => {
  const v = value.trim();
  if (v === "false" || v === "0") return false;
  if (v === "true") return 1;
  if (/^\d{1,2}$/.test(v)) return Number(v);
  const entries = v.split(",").map((e) => e.trim());
  const bad = entries.filter((e) => !isProxyAddress(e));
  if (bad.length === 0) return entries;
  ctx.addIssue({
    code: "custom",
    message: `must be true, false, a number of proxies, or comma-separated proxy addresses or CIDR ranges (not an address: ${bad.map((e) => JSON.stringify(e)).join(", ")})`,
  });
  return z.NEVER;
});

/** ALLOW_PRIVATE_TARGETS: `false`, `true`, or comma-separated CIDR ranges (parsePrivateTargets of @mailhooks/url-policy). */
const privateTargets = z.string().transform((value, ctx): PrivateTargets => {
  try {
    return parsePrivateTargets(value);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
});

const postgresUrl = z.string().regex(/^postgres(ql)?:\/\//, "must be a postgresql:// URL");

const shared = {
  /** `production` makes SECRET_ENCRYPTION_KEYS mandatory. */
  NODE_ENV: z.enum(["development", "test", "production"]).default("development"),
  /** Keys of webhook secrets at rest (AES-256-GCM): the first encrypts, all decrypt. Unset
   * outside production: the public INSECURE_DEVELOPMENT_KEY of @mailhooks/secrets. */
  SECRET_ENCRYPTION_KEYS: secretKeys.optional(),
  /** PostgreSQL connection string. */
  DATABASE_URL: postgresUrl.default("postgresql://postgres@127.0.0.1:5432/webhooks"),
  /** Redis used by BullMQ (comma-separated nodes of a Redis Cluster with REDIS_CLUSTER). */
  REDIS_URL: z
    .string()
    .refine(
      (v) => v.split(",").every((node) => /^rediss?:\/\//.test(node.trim())),
      "must be a redis:// URL (or several, comma-separated, with REDIS_CLUSTER)",
    )
    .default("redis://127.0.0.1:6379"),
  /** REDIS_URL is a Redis Cluster: keys are hash-tagged `{QUEUE_PREFIX}` so each queue keeps to one slot. */
  REDIS_CLUSTER: bool.default(false),
  /** BullMQ key prefix; lets several deployments or test runs share one Redis. */
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, "must be letters, digits, _ . or -")
    .default("whk"),
  /** The three retry delays of the spec, in ms, each counted from the failed attempt's end. */
  DELIVERY_RETRY_DELAYS_MS: retryDelays.default([10_000, 60_000, 300_000]),
  /** How long a receiver has to answer 2xx, in ms. */
  DELIVERY_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** Days an event payload is kept for replay. */
  EVENT_RETENTION_DAYS: z.coerce.number().int().positive().default(90),
  /** Which non-public addresses (loopback, private, link-local, ...) deliveries may reach: `false`
   * (none), `true` (all), or comma-separated CIDR ranges (only those, e.g. `127.0.0.0/8,::1/128`);
   * checked on a URL's literal at registration and on every resolved address at connect time. */
  ALLOW_PRIVATE_TARGETS: privateTargets.default(false),
  /** Size of the PostgreSQL connection pool of this process (a dispatcher holds two more for its attempts' loads, and each process its LISTEN connections). */
  DATABASE_POOL_SIZE: z.coerce.number().int().positive().max(200).default(10),
  /** PostgreSQL statement_timeout of every pooled connection, in ms (0: the server's own, none by default). */
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(0).default(30_000),
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
  /** How long one command of the rate limiters may wait for Redis, in ms; past it they count in
   * memory for 5 s (a hung Redis must not add ioredis's 5 s command timeout to each request). */
  RATE_LIMIT_REDIS_TIMEOUT_MS: z.coerce.number().int().min(1).max(5_000).default(250),
  /** Slow clients (Node's http.Server limits): the whole header block must arrive within this, in ms. */
  HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** The whole request, headers and body (a raw message is up to 10 MiB), must arrive within this, in ms; past it 408. */
  HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** A request body that sends nothing for this long is answered 408 and its connection closed, in ms. */
  HTTP_BODY_IDLE_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** A kept-alive connection with no request for this long is closed, in ms (behind a load
   * balancer: longer than its idle timeout). */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).default(5_000),
  /** Live webhooks one account may have. */
  MAX_WEBHOOKS_PER_ACCOUNT: z.coerce.number().int().positive().default(100),
  /** HTTP basic credentials of the queue board at /admin/queues; unset: not mounted. */
  ADMIN_USERNAME: z.string().min(1).optional(),
  ADMIN_PASSWORD: z.string().min(1).optional(),
  /** The operators' listener (the queue board): never the public PORT; loopback by default. */
  ADMIN_HOST: z.string().min(1).default("127.0.0.1"),
  ADMIN_PORT: port.default(9465),
  /** The board may retry, remove and promote jobs only when true; read-only otherwise. */
  ADMIN_READ_WRITE: bool.default(false),
  /** Requests per minute from one client address that carry no valid API key (0: no limit);
   * past it, 429 before any key is looked up. */
  UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).default(60),
  /** Which X-Forwarded-For entries are believed as the client address (per-address limits) and
   * X-Forwarded-Proto (https links, Secure cookies), counting proxies from the API back:
   * `false` (default: none, the connection's own address); `true` or `1`: one proxy, so the
   * client is the entry that proxy appended, the right-most (never the left-most, which the
   * client writes itself); a number N: N proxies, the N-th entry from the right; or a
   * comma-separated list of the proxies' addresses and CIDR ranges (`10.0.0.0/8, fd00::/8`;
   * also `loopback`, `linklocal`, `uniquelocal`): the right-most entry not among them. The
   * admin listener never believes it. */
  TRUST_PROXY: trustProxy.default(false),
  /** The API's public base URL, for the links it hands out (dashboard sign-in). */
  PUBLIC_URL: z.string().url().optional(),
});

export const dispatcherConfigSchema = z.object({
  ...shared,
  /** Port of the dispatcher's Prometheus /metrics. */
  METRICS_PORT: port.default(9464),
  /** Delivery attempts one dispatcher process runs at once. */
  DISPATCHER_CONCURRENCY: z.coerce.number().int().positive().max(1000).default(64),
  /**
   * How long a claimed unit of work stays leased to its dispatcher without a heartbeat, in ms (the
   * visibility timeout; docs/scheduler.md): each dispatcher renews the leases of the attempts it
   * runs every third of it, so a lease lapses only after two heartbeats missed in a row; work whose
   * dispatcher died is claimed again this long after its last heartbeat.
   */
  DISPATCHER_VISIBILITY_TIMEOUT_MS: z.coerce.number().int().min(300).default(20_000),
  /** A webhook whose every attempt failed for this many hours (decimal), across at least 20
   * events, is disabled (`disabled_reason: "failing"`); 0 turns auto-disable off. */
  WEBHOOK_AUTO_DISABLE_AFTER_HOURS: z.coerce.number().min(0).default(120),
  /** A listen webhook neither pulled nor changed for this many hours (decimal) is disabled
   * (`disabled_reason: "idle"`) and what waited for it cancelled; 0 turns this off. */
  LISTEN_IDLE_HOURS: z.coerce.number().min(0).default(24),
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
  const cleaned: Record<string, string | undefined> = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ""),
  );
  const shape = (schema as unknown as { shape?: Record<string, unknown> }).shape;
  const result = schema.safeParse(cleaned);
  const issues = result.success ? [] : result.error.issues;
  const lines = issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  const data = (result.success ? result.data : {}) as Record<string, unknown>;
  // Rules across variables, for the schemas that carry them.
  if (result.success && shape && "SECRET_ENCRYPTION_KEYS" in shape && "NODE_ENV" in shape) {
    if (data.SECRET_ENCRYPTION_KEYS === undefined) {
      if (data.NODE_ENV === "production")
        lines.push(
          "SECRET_ENCRYPTION_KEYS: required when NODE_ENV=production (comma-separated base64 32-byte keys, e.g. `openssl rand -base64 32`)",
        );
      else data.SECRET_ENCRYPTION_KEYS = [INSECURE_DEVELOPMENT_KEY];
    }
  }
  if (result.success && shape && "PORT" in shape && "ADMIN_PORT" in shape) {
    if (data.PORT === data.ADMIN_PORT && data.PORT !== 0)
      lines.push(`ADMIN_PORT: must differ from PORT (both are ${String(data.PORT)}): the operators' listener never shares the public port`);
  }
  if (lines.length > 0) throw new ConfigError(`invalid configuration: ${lines.join("; ")}`);
  return data as z.infer<S>;
}

/** The SECRET_ENCRYPTION_KEYS of a loaded configuration (always set once loaded). */
export function secretKeysOf(config: { SECRET_ENCRYPTION_KEYS?: string[] }): string[] {
  return config.SECRET_ENCRYPTION_KEYS ?? [INSECURE_DEVELOPMENT_KEY];
}

/**
 * Whether webhook secrets are encrypted with the public INSECURE_DEVELOPMENT_KEY (among
 * SECRET_ENCRYPTION_KEYS, or because they are unset outside production): the processes warn at
 * start-up, since anyone can decrypt what it encrypted.
 */
export function usesInsecureDevelopmentKey(config: { SECRET_ENCRYPTION_KEYS?: string[] }): boolean {
  return secretKeysOf(config).includes(INSECURE_DEVELOPMENT_KEY);
}

/** What a process logs at start-up when usesInsecureDevelopmentKey(config). */
export const INSECURE_DEVELOPMENT_KEY_WARNING =
  "webhook secrets are encrypted with the public INSECURE_DEVELOPMENT_KEY: anyone can decrypt them; set SECRET_ENCRYPTION_KEYS (e.g. `openssl rand -base64 32`) for anything but development";

/**
 * A service's configuration at start-up: loadConfig over process.env; when it is invalid, prints
 * `<service>: <what is wrong>` on stderr and exits 1 (nothing has started yet).
 */
export function loadServiceConfig<S extends z.ZodType>(schema: S, service: string): z.infer<S> {
  try {
    return loadConfig(schema, process.env);
  } catch (error) {
    console.error(`${service}: ${(error as Error).message}`);
    process.exit(1);
  }
}
