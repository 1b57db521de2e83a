import winston from "winston";

/**
 * The one winston logger of a process. JSON in production, readable for people; secrets,
 * authorization headers, keys and message bodies are redacted whatever module logs them.
 * Call `configureLogger` once at start-up, then `getLogger("module")` anywhere.
 */

const REDACTED_KEYS = /^(authorization|secret|password|api_?key|key|token|payload|body|raw)$/i;

const redact = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (REDACTED_KEYS.test(key)) (info as Record<string, unknown>)[key] = "[redacted]";
  }
  return info;
});

const root = winston.createLogger({
  level: "info",
  format: winston.format.combine(redact(), winston.format.timestamp(), winston.format.json()),
  transports: [new winston.transports.Console({ stderrLevels: ["error", "warn"] })],
});

export interface LoggerOptions {
  level: string;
  format: "json" | "pretty";
}

/** Sets the level and output format of every logger of this process. */
export function configureLogger(options: LoggerOptions): void {
  root.level = options.level;
  root.format =
    options.format === "json"
      ? winston.format.combine(redact(), winston.format.timestamp(), winston.format.errors({ stack: true }), winston.format.json())
      : winston.format.combine(
          redact(),
          winston.format.timestamp(),
          winston.format.colorize(),
          winston.format.printf(({ level, message, timestamp, module, ...rest }) => {
            const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : "";
            return `${timestamp} ${level} [${module ?? "app"}] ${message}${extra}`;
          }),
        );
}

export type Logger = winston.Logger;

/** A child logger whose lines carry `module`. */
export function getLogger(module: string): Logger {
  return root.child({ module });
}
