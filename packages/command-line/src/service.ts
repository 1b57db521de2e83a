import {
  apiConfigSchema,
  dispatcherConfigSchema,
  INSECURE_DEVELOPMENT_KEY_WARNING,
  loadServiceConfig,
  usesInsecureDevelopmentKey,
} from "@mailhooks/config";
import { configureLogger, getLogger, type Logger } from "@mailhooks/logger";
import type { z } from "zod";
import { createCommand, type CommandSpec } from "./index.js";

/**
 * The start of a service process (the API, the dispatcher), the same steps in the same order for
 * each. Its own module, so that the other commands do not load the logger.
 */

/** What the start-up reads of every service's configuration. */
interface ServiceBasics {
  LOG_LEVEL: string;
  LOG_FORMAT: "json" | "pretty";
  SECRET_ENCRYPTION_KEYS?: string[];
}

/** The command line of each service process (its --help), with the environment it reads. */
export const SERVICES = {
  api: {
    name: "npm run start:api --",
    description:
      "Run the REST API (built: npm run build first) on PORT, with GET /openapi.json and GET /docs. Stateless: run as many as you like behind a load balancer. SIGTERM finishes the requests in flight, then exits 0.",
    examples: ["npm run start:api", "PORT=8080 DATABASE_URL=postgresql://postgres@db.internal:5432/webhooks npm run start:api"],
    environment: apiConfigSchema,
  },
  dispatcher: {
    name: "npm run start:dispatcher --",
    description:
      "Run one dispatcher (built: npm run build first): the outbox relay and the worker that signs, delivers and retries; Prometheus metrics on METRICS_PORT. Run as many as you like. SIGTERM lets the attempts in flight finish, then exits 0.",
    examples: ["npm run start:dispatcher", "DISPATCHER_CONCURRENCY=128 METRICS_PORT=9465 npm run start:dispatcher"],
    environment: dispatcherConfigSchema,
  },
} satisfies Record<string, CommandSpec & { environment: z.ZodObject & z.ZodType<ServiceBasics> }>;

/**
 * Starts service `service` (SERVICES): answers --help and usage errors first, before anything
 * starts (docs/operations.md, "Commands"); then loads its environment from process.env (invalid: prints
 * `<service>: <what is wrong>` and exits 1), configures this process's logging from LOG_LEVEL
 * and LOG_FORMAT, and warns when the webhook secrets are encrypted with the public development key.
 * @returns the configuration, and the logger of module `service`
 */
export function startService<K extends keyof typeof SERVICES>(
  service: K,
): { config: z.infer<(typeof SERVICES)[K]["environment"]>; logger: Logger } {
  const command = SERVICES[service];
  createCommand(command)
    .action(() => undefined)
    .parse(process.argv);
  // TypeScript does not narrow SERVICES[service] by K; the schema is that service's.
  const config = loadServiceConfig(command.environment, service) as z.infer<(typeof SERVICES)[K]["environment"]>;
  configureLogger({ level: config.LOG_LEVEL, format: config.LOG_FORMAT });
  const logger = getLogger(service);
  if (usesInsecureDevelopmentKey(config)) logger.warn(INSECURE_DEVELOPMENT_KEY_WARNING);
  return { config, logger };
}
