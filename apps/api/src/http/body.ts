import express, { type RequestHandler } from "express";
import { AppError } from "../errors.js";

/**
 * Body parsers with CONTRACT.md section 3's limits: JSON bodies up to 256 KiB, raw messages
 * up to 10 MiB. The raw bytes of JSON bodies are kept on `req.rawBody` for idempotency hashing.
 */

export const JSON_LIMIT_BYTES = 256 * 1024;
export const MESSAGE_LIMIT_BYTES = 10 * 1024 * 1024;

declare module "express-serve-static-core" {
  interface Request {
    rawBody?: Buffer;
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
      (req as unknown as { rawBody: Buffer }).rawBody = buf;
    },
  });
  const check: RequestHandler = (req, _res, next) => {
    if (!hasBody(req)) {
      if (options.optional) return next();
      return next(new AppError("validation_error", "a JSON request body is required", [{ path: "", message: "required" }]));
    }
    if (!req.is("application/json")) return next(new AppError("unsupported_media_type", "Content-Type must be application/json"));
    next();
  };
  const parse: RequestHandler = (req, res, next) => (hasBody(req) ? parser(req, res, next) : next());
  return [check, parse];
}

/** Requires `message/rfc822` and reads the raw message into `req.body` as a Buffer. */
export function requireRawMessage(): RequestHandler[] {
  const check: RequestHandler = (req, _res, next) => {
    if (!req.is("message/rfc822")) return next(new AppError("unsupported_media_type", "Content-Type must be message/rfc822"));
    next();
  };
  return [check, express.raw({ type: () => true, limit: MESSAGE_LIMIT_BYTES })];
}
