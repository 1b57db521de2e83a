import winston from "winston";

/**
 * The one winston logger of a process. JSON in production, readable for people. Whatever module
 * logs, and however deep in its metadata: fields named like secrets (authorization, secret,
 * password, key, token, body, payload, raw, ...) are replaced by "[redacted]", and every string
 * is scrubbed of what a secret looks like (API keys, webhook secrets, their ciphertexts, Bearer
 * and Basic credentials); error texts (`error`, `stack`, `reason`, `detail` fields) lose their
 * quoted parts too, because drivers quote the input they refused ("invalid input syntax for
 * type integer: \"...\""), and request paths (`path` fields) keep only the route's words and our
 * ids (see redactPath). Call `configureLogger` once at start-up, then `getLogger("module")`.
 */

const REDACTED_KEYS =
  /^(authorization|cookie|set-cookie|secret|secrets|previous_?secret|password|passphrase|api_?key|key|token|payload|body|raw|data|headers)$/i;
/** Fields holding error texts, which may quote input. */
const ERROR_TEXT_KEYS = /^(error|err|stack|reason|detail|cause)$/i;

const SECRET_PATTERNS: [RegExp, string][] = [
  // API keys keep their public prefix (whk_<12 hex>), which identifies them without use.
  [/\b(whk_[0-9a-f]{12})_[A-Za-z0-9_-]{20,}/g, "$1_[redacted]"],
  // Standard base64 (the secrets made now) or its URL-safe alphabet (those made before), padding included.
  [/\bwhsec_[A-Za-z0-9+/=_-]{8,}/g, "whsec_[redacted]"],
  // Ciphertexts of secrets at rest (packages/secrets).
  [/\bv1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g, "[redacted ciphertext]"],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, "$1 [redacted]"],
];

/** `text` without anything that looks like a key, a secret or credentials. */
export function scrubSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/** An error text without secrets and without the quoted input it may carry. */
export function scrubErrorText(text: string): string {
  return scrubSecrets(text)
    .replace(/"(?:[^"\\]|\\.)*"/g, '"[redacted]"')
    .replace(/'(?:[^'\\]|\\.)*'/g, "'[redacted]'");
}

/** A path segment that can be logged: a route's own word (`webhooks`, `sign-in`, `v1`) or an id
 * the service made (`wh_<32 hex>`). Anything else came from the client. */
const LOGGABLE_SEGMENT = /^(?:[a-z][a-z0-9.-]{0,23}|[a-z]{2,5}_[0-9a-f]{32}|\[redacted\])$/;

/**
 * A request path as it may be logged: every segment that is not a route's word or an id of ours
 * becomes `[redacted]` (`/dashboard/sign-in/<token>` → `/dashboard/sign-in/[redacted]`), since
 * clients put tokens, keys and secrets in paths, by design or by mistake. No query string.
 * Fields named `path` are logged this way whoever logs them.
 */
export function redactPath(path: string): string {
  const bare = path.split("?")[0];
  return bare
    .split("/")
    .map((segment) => (segment === "" || LOGGABLE_SEGMENT.test(segment) ? segment : "[redacted]"))
    .join("/");
}

function redactValue(value: unknown, key: string, depth: number): unknown {
  if (typeof key === "string" && REDACTED_KEYS.test(key)) return "[redacted]";
  if (typeof value === "string" && key === "path") return redactPath(value);
  if (typeof value === "string") return ERROR_TEXT_KEYS.test(key) ? scrubErrorText(value) : scrubSecrets(value);
  if (value instanceof Error) return redactValue({ name: value.name, message: value.message, stack: value.stack }, key, depth);
  if (depth >= 6 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => redactValue(item, key, depth + 1));
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, redactValue(v, k, depth + 1)]));
}

const redact = winston.format((info) => {
  const record = info as Record<string | symbol, unknown>;
  for (const key of Object.keys(info)) {
    if (key === "level") continue;
    record[key] = redactValue(record[key], key === "message" ? "" : key, 0);
  }
  return info;
});

/** Levels the console writes to stderr; every other level goes to stdout. */
const STDERR_LEVELS = ["error", "warn"];

const root = winston.createLogger({
  level: "info",
  format: winston.format.combine(redact(), winston.format.timestamp(), winston.format.json()),
  transports: [new winston.transports.Console({ stderrLevels: STDERR_LEVELS })],
});

/**
 * Whether a line of `level` is written in colour: only to a terminal (stderr for `error` and
 * `warn`, stdout otherwise), never to a file or a pipe, and never while `NO_COLOR` is set
 * (https://no-color.org). `streams` defaults to the process's own.
 */
export function colourFor(
  level: string,
  env: NodeJS.ProcessEnv = process.env,
  streams: { stdout: { isTTY?: boolean }; stderr: { isTTY?: boolean } } = process,
): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  return Boolean((STDERR_LEVELS.includes(level) ? streams.stderr : streams.stdout).isTTY);
}

const colorizer = winston.format.colorize();

export interface LoggerOptions {
  level: string;
  format: "json" | "pretty";
}

/** Sets the level and output format of every logger of this process (`pretty`: coloured only on a terminal, `colourFor`). */
export function configureLogger(options: LoggerOptions): void {
  root.level = options.level;
  root.format =
    options.format === "json"
      ? winston.format.combine(redact(), winston.format.timestamp(), winston.format.json())
      : winston.format.combine(
          redact(),
          winston.format.timestamp(),
          winston.format.printf(({ level, message, timestamp, module, ...rest }) => {
            const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : "";
            const shown = colourFor(level) ? colorizer.colorize(level, level) : level;
            return `${String(timestamp)} ${shown} [${(module as string | undefined) ?? "app"}] ${String(message)}${extra}`;
          }),
        );
}

export type Logger = winston.Logger;

/** A child logger whose lines carry `module`. */
export function getLogger(module: string): Logger {
  return root.child({ module });
}
export { captureLogs } from "./capture.js";
