import { INSECURE_DEVELOPMENT_KEY_WARNING, loadServiceConfig, usesInsecureDevelopmentKey } from "@mailhooks/config";
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

/**
 * Answers --help and usage errors first, before anything starts (CONTRACT.md section 1); then
 * loads `command.environment` from process.env (invalid: prints `<service>: <what is wrong>` and
 * exits 1), configures this process's logging from LOG_LEVEL and LOG_FORMAT, and warns when the
 * webhook secrets are encrypted with the public development key.
 * @returns the configuration, and the logger of module `service`
 */
export function startService<S extends z.ZodObject & z.ZodType<ServiceBasics>>(
  service: string,
  command: Omit<CommandSpec, "environment"> & { environment: S },
): { config: z.infer<S>; logger: Logger } {
  createCommand(command)
    .action(() => undefined)
    .parse(process.argv);
  const config = loadServiceConfig(command.environment, service);
  configureLogger({ level: config.LOG_LEVEL, format: config.LOG_FORMAT });
  const logger = getLogger(service);
  if (usesInsecureDevelopmentKey(config)) logger.warn(INSECURE_DEVELOPMENT_KEY_WARNING);
  return { config, logger };
}
