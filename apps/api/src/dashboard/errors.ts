import type { ErrorRequestHandler, RequestHandler } from "express";
import { getLogger } from "@mailhooks/logger";
import type { ErrorCode } from "../errors.js";
import { classifyAndLog } from "../http/classify-error.js";
import { NOT_FOUND_WORDS, refusalInWords } from "./refusal-words.js";
import { render } from "./render.js";

/**
 * The dashboard's answer to an error: a page in words (never a code, a stack or JSON), with the
 * status the API would give: the error is classified by the API's own classifier
 * (http/classify-error.ts) and worded by reason (refusal-words.ts). Errors a form can show beside
 * its fields are handled by the page itself; this is for the rest.
 */

const logger = getLogger("dashboard");

const HEADINGS: Partial<Record<ErrorCode, string>> = {
  not_found: "Not found",
  conflict: "That cannot be done now",
  payload_expired: "The payload is gone",
  validation_error: "Some input is not valid",
  rate_limited: "Too many requests",
  unavailable: "The service is unavailable",
  payload_too_large: "Too much data",
};

export const notFoundPage: RequestHandler = (_req, res) => {
  render(res, "error", { title: "Not found", heading: "Not found", message: NOT_FOUND_WORDS }, 404);
};

export const dashboardErrorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  const { kind, error: appError, errorId } = classifyAndLog(error, req.path, logger);
  if (res.headersSent) return;
  if (kind === "unknown") {
    const message = `Try again; if it keeps happening, give this reference to your operator: ${errorId}.`;
    render(res, "error", { title: "Error", heading: "Something went wrong on our side", message }, 500);
    return;
  }
  for (const [name, value] of Object.entries(appError.headers ?? {})) res.setHeader(name, value);
  const heading = HEADINGS[appError.code] ?? "Error";
  render(res, "error", { title: heading, heading, message: refusalInWords(appError) }, appError.status);
};
