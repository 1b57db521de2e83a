import { randomUUID } from "node:crypto";
import type { ErrorRequestHandler } from "express";
import { z } from "zod";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { getLogger, redactPath } from "@mailhooks/logger";

/**
 * The API's one error type and the middleware that maps it to CONTRACT.md section 3:
 * `{"error": {"code", "message", "details?"}}`. Unknown errors become 500 with an id that is
 * also logged, never a stack trace.
 */

export const ERROR_STATUS = {
  invalid_json: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  payload_expired: 410,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  rate_limited: 429,
  headers_too_large: 431,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  path: string;
  message: string;
}

export class AppError extends Error {
  override name = "AppError";
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const notFound = (what: string) => new AppError("not_found", `${what} not found`);

/** A 422 from a zod error; `prefix` names where the input came from (e.g. "query"). */
export function validationError(error: z.ZodError, prefix?: string): AppError {
  // zod reports unknown fields on their parent object: name each of them instead.
  const details = error.issues.flatMap((issue) => {
    const base = [prefix, ...issue.path.map(String)];
    const join = (parts: (string | undefined)[]) => parts.filter(Boolean).join(".");
    if (issue.code === "unrecognized_keys") return issue.keys.map((key) => ({ path: join([...base, key]), message: "is not a recognized field" }));
    return [{ path: join(base), message: issue.message }];
  });
  const first = details[0];
  return new AppError("validation_error", first ? `${first.path || "body"}: ${first.message}` : "invalid input", details);
}

/**
 * SQLSTATEs by which PostgreSQL refuses input it cannot store or index: a NUL character
 * (22021, 22P05), a date or number out of its range (22008, 22003) or an index entry over the
 * btree limit (54000). The routes refuse such input before it reaches the database; this is the
 * net for any field they missed: a 422, not a 500 (the failed statement stored nothing).
 */
const INPUT_SQLSTATES = new Set(["22021", "22P05", "22008", "22003", "54000"]);

function isDatabaseInputError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const adapter = (e as { meta?: { driverAdapterError?: { cause?: { code?: unknown; originalCode?: unknown } } } }).meta?.driverAdapterError?.cause;
    for (const code of [adapter?.code, adapter?.originalCode, (e as { code?: unknown }).code]) {
      if (typeof code === "string" && INPUT_SQLSTATES.has(code)) return true;
    }
  }
  return false;
}

const logger = getLogger("api");
/** The path as logged: what the client put in it (ids it made up, tokens, keys) is redacted. */
const loggedPath = (req: { path: string }) => redactPath(req.path);

/** Maps body-parser's own errors (raised before any route runs) to AppErrors. */
function fromBodyParser(error: { type?: string; status?: number }): AppError | null {
  switch (error.type) {
    case "entity.parse.failed":
      return new AppError("invalid_json", "request body is not valid JSON");
    case "encoding.invalid.utf8":
      return new AppError("invalid_json", "request body is not valid UTF-8");
    case "entity.too.large":
      return new AppError("payload_too_large", "request body is too large");
    case "encoding.unsupported":
    case "charset.unsupported":
      return new AppError("unsupported_media_type", "unsupported body encoding or charset");
    case "request.aborted":
    case "request.size.invalid":
    case "stream.encoding.set":
      return new AppError("invalid_json", "request body could not be read");
    default:
      return null;
  }
}

/**
 * Maps the other client errors Express and its parsers raise before a route runs (http-errors
 * objects with a 4xx status), which would otherwise fall through to a 500:
 * - a path that is not valid percent-encoding (`/v1/webhooks/%ZZ`): the router cannot decode
 *   the id, so it names no resource: 404;
 * - a body that cannot be decompressed (`Content-Encoding: gzip` on bytes that are not gzip):
 *   it cannot be read, like an aborted body: 400 invalid_json;
 * - any other 4xx of that kind keeps its meaning where the contract has a code for it.
 */
function fromClientError(error: { status?: unknown; statusCode?: unknown; expose?: unknown } & Partial<Error>): AppError | null {
  if (error instanceof URIError) return new AppError("not_found", "no such resource: the path is not valid percent-encoding");
  const status = typeof error?.status === "number" ? error.status : typeof error?.statusCode === "number" ? error.statusCode : undefined;
  if (status === undefined || status < 400 || status >= 500 || error.expose !== true) return null;
  switch (status) {
    case 404:
      return new AppError("not_found", "not found");
    case 413:
      return new AppError("payload_too_large", "request body is too large");
    case 415:
      return new AppError("unsupported_media_type", "unsupported body encoding or content type");
    default:
      return new AppError("invalid_json", "request body could not be read or decoded");
  }
}

export const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  let appError: AppError | null = error instanceof AppError ? error : (fromBodyParser(error) ?? fromClientError(error));
  if (!appError && isDatabaseInputError(error)) {
    // Not the message: it may quote the input.
    logger.warn("input refused by the database", { path: loggedPath(req) });
    appError = new AppError("validation_error", "the input contains a value that cannot be stored (a NUL character, a date out of range or an oversized identifier)");
  }
  if (!appError && isInfrastructureError(error)) {
    logger.warn("dependency unavailable", { path: loggedPath(req), error: (error as Error).message });
    appError = new AppError("unavailable", "a backing service is unavailable; retry later");
  }
  if (!appError) {
    const id = randomUUID();
    logger.error("unhandled error", { errorId: id, path: loggedPath(req), error: (error as Error)?.message, stack: (error as Error)?.stack });
    appError = new AppError("internal_error", `internal error ${id}`);
  }
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(appError.headers ?? {})) res.setHeader(name, value);
  res.status(appError.status).json({
    error: { code: appError.code, message: appError.message, ...(appError.details ? { details: appError.details } : {}) },
  });
};
