import { parse as parseContentType } from "content-type";
import express, { type RequestHandler } from "express";
import { AppError, invalidInput } from "../errors.js";

/**
 * Body parsers with the limits of docs/api.md, "Limits": JSON bodies up to 256 KiB, raw messages
 * up to 10 MiB. The raw bytes of JSON bodies are kept on `req.rawBody` for idempotency hashing.
 * A JSON body is UTF-8 (RFC 8259 section 8.1): a declared charset other than UTF-8 is 415
 * `unsupported_media_type`, and bytes that are not valid UTF-8 are 400 `invalid_json` (a body is
 * never stored with U+FFFD in place of bad bytes, whatever charset decoded them) and may not have a `__proto__` key anywhere (422 `validation_error`:
 * it would be dropped silently, where every other unknown key is refused). A body that sends
 * nothing for `res.locals.bodyIdleTimeoutMs` (HTTP_BODY_IDLE_TIMEOUT_MS, set by app.ts) is
 * answered 408 `request_timeout` and its connection closed.
 */

export const JSON_LIMIT_BYTES = 256 * 1024;
export const MESSAGE_LIMIT_BYTES = 10 * 1024 * 1024;

declare module "express-serve-static-core" {
  interface Request {
    rawBody?: Buffer;
  }
}

/** Thrown by the JSON parser's verify step for bytes that are not UTF-8 (errors.ts maps it to 400 invalid_json). */
const INVALID_UTF8 = "encoding.invalid.utf8";

/** The path of the first own `__proto__` key in `value` (breadth first, no recursion: any depth is safe), or null. */
export function protoKeyPath(value: unknown): string | null {
  const queue: [unknown, string][] = [[value, ""]];
  for (let i = 0; i < queue.length; i++) {
    const [node, path] = queue[i];
    if (node === null || typeof node !== "object") continue;
    if (!Array.isArray(node) && Object.prototype.hasOwnProperty.call(node, "__proto__")) return path ? `${path}.__proto__` : "__proto__";
    for (const [key, child] of Object.entries(node))
      if (child !== null && typeof child === "object") queue.push([child, path ? `${path}.${key}` : key]);
  }
  return null;
}

/**
 * Runs `parser` on the request body, answering 408 `request_timeout` (then closing the
 * connection) when the body sends nothing for `res.locals.bodyIdleTimeoutMs`.
 */
function withIdleTimeout(parser: RequestHandler): RequestHandler {
  return (req, res, next) => {
    const ms = res.locals.bodyIdleTimeoutMs as number | undefined;
    if (!ms) return parser(req, res, next);
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const settle = () => {
      settled = true;
      clearTimeout(timer);
      req.off("data", arm);
    };
    function arm() {
      clearTimeout(timer);
      timer = setTimeout(expire, ms);
    }
    const expire = () => {
      if (settled) return;
      settle();
      if (res.headersSent) return void req.socket.destroy();
      // The rest of the body will never be read: the connection cannot carry another request.
      res.setHeader("Connection", "close");
      res.once("finish", () => req.socket.destroy());
      next(new AppError("request_timeout", "body_idle", `the request body sent nothing for ${ms} ms`));
    };
    arm();
    // Added after the parser's own listener: it is what reads the body (flowing already).
    parser(req, res, (error?: unknown) => {
      if (settled) return;
      settle();
      next(error);
    });
    if (!settled) req.on("data", arm);
  };
}

/** The `charset` parameter of a Content-Type header, if any (a header that does not parse declares none: req.is refused it). */
function declaredCharset(header: string | undefined): string | undefined {
  try {
    return header === undefined ? undefined : parseContentType(header).parameters.charset;
  } catch {
    return undefined;
  }
}

function hasBody(req: Parameters<RequestHandler>[0]): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** Requires `application/json` when a body is present (415 otherwise). */
export function requireJson(options: { optional?: boolean } = {}): RequestHandler[] {
  const parser = express.json({
    limit: JSON_LIMIT_BYTES,
    // Parse any JSON: the zod schemas decide what is acceptable, not body-parser's strict mode.
    strict: false,
    type: () => true,
    verify: (req, _res, buf) => {
      // body-parser decodes with replacement characters; a fatal decoder refuses instead (the
      // charset is UTF-8: requireJson's check refused any other).
      try {
        new TextDecoder("utf-8", { fatal: true }).decode(buf);
      } catch {
        throw Object.assign(new Error("request body is not valid UTF-8"), { type: INVALID_UTF8 });
      }
      (req as unknown as { rawBody: Buffer }).rawBody = buf;
    },
  });
  const check: RequestHandler = (req, _res, next) => {
    if (!hasBody(req)) {
      if (options.optional) return next();
      return next(
        new AppError("validation_error", "invalid_input", "a JSON request body is required", {
          details: [{ path: "", message: "required" }],
        }),
      );
    }
    if (!req.is("application/json"))
      return next(new AppError("unsupported_media_type", "content_type_not_json", "Content-Type must be application/json"));
    const charset = declaredCharset(req.headers["content-type"]);
    if (charset !== undefined && !/^utf-8$/i.test(charset))
      return next(
        new AppError(
          "unsupported_media_type",
          "charset_not_utf8",
          `a JSON body is UTF-8; the charset ${JSON.stringify(charset)} is not accepted`,
        ),
      );
    next();
  };
  const parse: RequestHandler = (req, res, next) => (hasBody(req) ? withIdleTimeout(parser)(req, res, next) : next());
  const noProto: RequestHandler = (req, _res, next) => {
    const path = protoKeyPath(req.body);
    if (path === null) return next();
    next(invalidInput([{ path, message: "is not a recognized field" }]));
  };
  return [check, parse, noProto];
}

/** Requires `message/rfc822` and reads the raw message into `req.body` as a Buffer. */
export function requireRawMessage(): RequestHandler[] {
  const check: RequestHandler = (req, _res, next) => {
    if (!req.is("message/rfc822"))
      return next(new AppError("unsupported_media_type", "content_type_not_message", "Content-Type must be message/rfc822"));
    next();
  };
  return [check, withIdleTimeout(express.raw({ type: () => true, limit: MESSAGE_LIMIT_BYTES }))];
}
