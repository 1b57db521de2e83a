import { randomUUID } from "node:crypto";
import type { ErrorRequestHandler } from "express";
import { z } from "zod";
import { getLogger } from "@mailhooks/logger";

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
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  rate_limited: 429,
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

const INFRASTRUCTURE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "P1001", "P1002", "P1008", "P1017", "P2024"]);
const INFRASTRUCTURE_MESSAGE =
  /ECONNREFUSED|Connection terminated|Can't reach database|connection timeout|timeout exceeded when trying to connect|enableOfflineQueue|Connection is closed|MaxRetriesPerRequest|Reached the max retries|Stream isn't writeable|the database system is (starting|shutting) up|terminating connection/i;

/** True for errors that mean PostgreSQL or Redis could not be reached (answered as 503). */
export function isInfrastructureError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && INFRASTRUCTURE_CODES.has(code)) return true;
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && INFRASTRUCTURE_MESSAGE.test(message)) return true;
  }
  return false;
}

const logger = getLogger("api");

/** Maps body-parser's own errors (raised before any route runs) to AppErrors. */
function fromBodyParser(error: { type?: string; status?: number }): AppError | null {
  switch (error.type) {
    case "entity.parse.failed":
      return new AppError("invalid_json", "request body is not valid JSON");
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

export const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  let appError: AppError | null = error instanceof AppError ? error : fromBodyParser(error);
  if (!appError && isInfrastructureError(error)) {
    logger.warn("dependency unavailable", { path: req.path, error: (error as Error).message });
    appError = new AppError("unavailable", "a backing service is unavailable; retry later");
  }
  if (!appError) {
    const id = randomUUID();
    logger.error("unhandled error", { errorId: id, path: req.path, error: (error as Error)?.message, stack: (error as Error)?.stack });
    appError = new AppError("internal_error", `internal error ${id}`);
  }
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(appError.headers ?? {})) res.setHeader(name, value);
  res.status(appError.status).json({
    error: { code: appError.code, message: appError.message, ...(appError.details ? { details: appError.details } : {}) },
  });
};
