import type { ErrorRequestHandler } from "express";
import { getLogger } from "@mailhooks/logger";
import { classifyAndLog } from "./classify-error.js";

const logger = getLogger("api");

/**
 * The API's error middleware: every error, classified by classify-error.ts, answered in
 * the shape of docs/api.md, "Errors", `{"error": {"code", "message", "details"?}}` with the code's
 * status. An unknown error is a 500 naming the id it was logged under, never a stack trace.
 */
export const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  const { error: appError } = classifyAndLog(error, req.path, logger);
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(appError.headers ?? {})) res.setHeader(name, value);
  res.status(appError.status).json({
    error: { code: appError.code, message: appError.message, ...(appError.details ? { details: appError.details } : {}) },
  });
};
