import { randomUUID } from "node:crypto";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { redactPath, type Logger } from "@mailhooks/logger";
import { AppError, isAppError } from "../errors.js";

/**
 * The one classifier of what reaches an error handler, the API's (JSON, error-handler.ts) and the
 * dashboard's (pages, dashboard/errors.ts): each renders the AppError it is given in its own way.
 * - `refusal`: an AppError a route or a service threw;
 * - `parser`: body-parser's own errors, raised before a route runs (told apart by their `type`);
 * - `client`: other client errors (an http-errors 4xx from Express or `send`, a path that is not
 *   valid percent-encoding, input PostgreSQL refused to store);
 * - `infrastructure`: PostgreSQL or Redis unreachable or too slow (@mailhooks/infrastructure-errors);
 * - `unknown`: anything else, a 500 whose id is logged with the error and shown instead of it.
 * Nothing here reads an error's message: libraries' errors are told apart by their type, status
 * or code.
 */

export type ErrorKind = "refusal" | "parser" | "client" | "infrastructure" | "unknown";

export interface ClassifiedError {
  kind: ErrorKind;
  /** What to answer with (for `unknown`: 500 `internal_error` naming `errorId`). */
  error: AppError;
  /** For `unknown`: the id logged with the error, for the person to quote. */
  errorId?: string;
}

/** Maps body-parser's own errors (raised before any route runs) to AppErrors, by their `type`. */
function fromBodyParser(error: { type?: unknown }): AppError | null {
  switch (error.type) {
    case "entity.parse.failed":
      return new AppError("invalid_json", "body_not_json", "request body is not valid JSON");
    case "encoding.invalid.utf8":
      return new AppError("invalid_json", "body_not_utf8", "request body is not valid UTF-8");
    case "entity.too.large":
      return new AppError("payload_too_large", "body_too_large", "request body is too large");
    case "encoding.unsupported":
    case "charset.unsupported":
      return new AppError("unsupported_media_type", "encoding_unsupported", "unsupported body encoding or charset");
    case "request.aborted":
    case "request.size.invalid":
    case "stream.encoding.set":
      return new AppError("invalid_json", "body_unreadable", "request body could not be read");
    default:
      return null;
  }
}

/**
 * Maps the other client errors Express, its parsers and `send` raise before a route runs
 * (http-errors objects with a 4xx status), which would otherwise fall through to a 500:
 * - a path that is not valid percent-encoding (`/v1/webhooks/%ZZ`): the router cannot decode
 *   the id, so it names no resource: 404;
 * - a file path `send` refuses (403: it leaves the folder) or does not find (404): 404;
 * - a body that cannot be decompressed (`Content-Encoding: gzip` on bytes that are not gzip):
 *   it cannot be read, like an aborted body: 400 invalid_json;
 * - any other 4xx of that kind keeps its meaning where the contract has a code for it.
 */
function fromClientError(error: { status?: unknown; statusCode?: unknown; expose?: unknown }): AppError | null {
  if (error instanceof URIError)
    return new AppError("not_found", "path_not_decodable", "no such resource: the path is not valid percent-encoding");
  const status = typeof error.status === "number" ? error.status : typeof error.statusCode === "number" ? error.statusCode : undefined;
  if (status === undefined || status < 400 || status >= 500 || error.expose !== true) return null;
  switch (status) {
    case 403:
    case 404:
      return new AppError("not_found", "resource_not_found", "not found");
    case 413:
      return new AppError("payload_too_large", "body_too_large", "request body is too large");
    case 415:
      return new AppError("unsupported_media_type", "encoding_unsupported", "unsupported body encoding or content type");
    default:
      return new AppError("invalid_json", "body_unreadable", "request body could not be read or decoded");
  }
}

/**
 * SQLSTATEs by which PostgreSQL refuses input it cannot store or index: a NUL character
 * (22021, 22P05), a date or number out of its range (22008, 22003) or an index entry over the
 * btree limit (54000). The routes refuse such input before it reaches the database; this is the
 * net for any field they missed: a 422, not a 500 (the failed statement stored nothing).
 */
const INPUT_SQLSTATES = new Set(["22021", "22P05", "22008", "22003", "54000"]);

/** True when `error` (or its cause chain) is PostgreSQL refusing input, from pg or through Prisma's adapter. */
function isDatabaseInputError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const adapter = (e as { meta?: { driverAdapterError?: { cause?: { code?: unknown; originalCode?: unknown } } } }).meta
      ?.driverAdapterError?.cause;
    for (const code of [adapter?.code, adapter?.originalCode, (e as { code?: unknown }).code]) {
      if (typeof code === "string" && INPUT_SQLSTATES.has(code)) return true;
    }
  }
  return false;
}

/** The kind of `error` and the AppError to answer it with (see the top of this file). */
export function classifyError(error: unknown): ClassifiedError {
  if (isAppError(error)) return { kind: "refusal", error };
  const parser = error && typeof error === "object" ? fromBodyParser(error) : null;
  if (parser) return { kind: "parser", error: parser };
  const client = error && typeof error === "object" ? fromClientError(error) : null;
  if (client) return { kind: "client", error: client };
  if (isDatabaseInputError(error)) {
    const message = "the input contains a value that cannot be stored (a NUL character, a date out of range or an oversized identifier)";
    return { kind: "client", error: new AppError("validation_error", "unstorable_value", message) };
  }
  if (isInfrastructureError(error)) {
    return {
      kind: "infrastructure",
      error: new AppError("unavailable", "dependency_unavailable", "a backing service is unavailable; retry later"),
    };
  }
  const errorId = randomUUID();
  return { kind: "unknown", error: new AppError("internal_error", "unexpected", `internal error ${errorId}`), errorId };
}

/**
 * Classifies `error` and logs what an operator should see: a dependency away (warn), input the
 * database refused (warn, without the error's text: it may quote the input), an unknown error
 * (error, with its id and stack). `requestPath` is logged redacted: what the client put in it
 * (ids it made up, sign-in tokens, keys) never reaches a log.
 */
export function classifyAndLog(error: unknown, requestPath: string, logger: Logger): ClassifiedError {
  const classified = classifyError(error);
  const path = redactPath(requestPath);
  const { message, stack } = (error ?? {}) as Partial<Error>;
  if (classified.kind === "infrastructure") logger.warn("dependency unavailable", { path, error: message });
  else if (classified.error.reason === "unstorable_value") logger.warn("input refused by the database", { path });
  else if (classified.kind === "unknown") logger.error("unhandled error", { errorId: classified.errorId, path, error: message, stack });
  return classified;
}
